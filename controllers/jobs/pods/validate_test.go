package pods

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

func TestValidateUpdateStatic(t *testing.T) {
	base := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{
			berthv1.QueueNameLabel: "team", berthv1.PodGroupLabel: "g"}}}
	}
	owner := func(uid string) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "other", UID: types.UID("u" + uid), Controller: ptr.To(true)}
	}
	tests := []struct {
		name   string
		old    func(*corev1.Pod)
		change func(*corev1.Pod)
		want   string
	}{
		{name: "unrelated label", change: func(p *corev1.Pod) { p.Labels["app"] = "x" }},
		{name: "queue changed", change: func(p *corev1.Pod) { p.Labels[berthv1.QueueNameLabel] = "other" },
			want: "metadata.labels[berth.dev/queue-name]: Forbidden: cannot be changed or removed on a queued pod"},
		{name: "queue removed", change: func(p *corev1.Pod) { delete(p.Labels, berthv1.QueueNameLabel) },
			want: "metadata.labels[berth.dev/queue-name]: Forbidden"},
		{name: "moved to another group", change: func(p *corev1.Pod) { p.Labels[berthv1.PodGroupLabel] = "h" },
			want: "metadata.labels[berth.dev/pod-group]: Forbidden"},
		{name: "controller set", change: func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{owner("1")} },
			want: "the controller of a queued pod cannot be set or replaced"},
		{name: "controller replaced", old: func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{owner("1")} },
			change: func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{owner("2")} }, want: "cannot be set or replaced"},
		{name: "controller removed by the garbage collector", old: func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{owner("1")} },
			change: func(p *corev1.Pod) { p.OwnerReferences = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := base()
			if tt.old != nil {
				tt.old(old)
			}
			p := old.DeepCopy()
			tt.change(p)
			errs := ValidateUpdateStatic(old, p)
			if tt.want == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			if got := errs.ToAggregate(); got == nil || !strings.Contains(got.Error(), tt.want) {
				t.Fatalf("got %v, want %q", got, tt.want)
			}
		})
	}
	unqueued := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	if errs := ValidateUpdateStatic(unqueued, base()); len(errs) > 0 {
		t.Errorf("a pod that was not queued may get the label (the mutating webhook does not gate it): %v", errs)
	}
}
