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
	gate := func(p *corev1.Pod) {
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: berthv1.AdmissionGate}}
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
		{name: "workload label removed from a released pod", old: func(p *corev1.Pod) { p.Labels[berthv1.WorkloadLabel] = "uid" },
			change: func(p *corev1.Pod) { delete(p.Labels, berthv1.WorkloadLabel) },
			want:   "metadata.labels[berth.dev/workload]: Forbidden: berth sets it when it releases the pod and counts the pods a gang runs by it"},
		{name: "workload label changed", old: func(p *corev1.Pod) { p.Labels[berthv1.WorkloadLabel] = "uid" },
			change: func(p *corev1.Pod) { p.Labels[berthv1.WorkloadLabel] = "other" }, want: "metadata.labels[berth.dev/workload]: Forbidden"},
		{name: "pod set renamed", old: func(p *corev1.Pod) { p.Labels[berthv1.PodSetLabel] = "main" },
			change: func(p *corev1.Pod) { p.Labels[berthv1.PodSetLabel] = "other" }, want: "metadata.labels[berth.dev/pod-set]: Forbidden"},
		{name: "placement label removed", old: func(p *corev1.Pod) { p.Labels[berthv1.PlacementLabel] = "uid" },
			change: func(p *corev1.Pod) { delete(p.Labels, berthv1.PlacementLabel) }, want: "metadata.labels[berth.dev/placement]: Forbidden"},
		{name: "empty workload label removed", old: func(p *corev1.Pod) { p.Labels[berthv1.WorkloadLabel] = "" },
			change: func(p *corev1.Pod) { delete(p.Labels, berthv1.WorkloadLabel) }, want: "metadata.labels[berth.dev/workload]: Forbidden"},
		{name: "workload label added to a running pod", change: func(p *corev1.Pod) { p.Labels[berthv1.WorkloadLabel] = "uid" },
			want: "metadata.labels[berth.dev/workload]: Forbidden: berth sets it when it releases the pod, in the same write that removes its gate"},
		{name: "placement label added to a gated pod that stays gated", old: gate,
			change: func(p *corev1.Pod) { p.Labels[berthv1.PlacementLabel] = "uid" }, want: "metadata.labels[berth.dev/placement]: Forbidden"},
		{name: "labels added with the gate's removal: judged with a lookup, not here", old: gate,
			change: func(p *corev1.Pod) {
				p.Labels[berthv1.WorkloadLabel], p.Labels[berthv1.PodSetLabel], p.Spec.SchedulingGates = "uid", "main", nil
			}},
		{name: "workload label kept", old: func(p *corev1.Pod) { p.Labels[berthv1.WorkloadLabel] = "uid" },
			change: func(p *corev1.Pod) { p.Labels["app"] = "x" }},
		{name: "gate removed with a gang's labels from a pod berth did not queue", old: func(p *corev1.Pod) {
			delete(p.Labels, berthv1.QueueNameLabel)
			gate(p)
		}, change: func(p *corev1.Pod) {
			p.Labels[berthv1.WorkloadLabel], p.Labels[berthv1.PodSetLabel], p.Spec.SchedulingGates = "uid", "main", nil
		}, want: "spec.schedulingGates: Forbidden: berth releases into a gang only the pods it queued"},
		{name: "gate removed from a pod berth did not queue, into no gang", old: func(p *corev1.Pod) {
			delete(p.Labels, berthv1.QueueNameLabel)
			gate(p)
		}, change: func(p *corev1.Pod) { p.Spec.SchedulingGates = nil }},
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
	// A Job's pods carry berth's labels but not the queue label: the labels
	// stay as berth set them there too.
	jobPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{
		berthv1.WorkloadLabel: "uid", berthv1.PodSetLabel: "main"}}}
	for _, key := range []string{berthv1.WorkloadLabel, berthv1.PodSetLabel} {
		stripped := jobPod.DeepCopy()
		delete(stripped.Labels, key)
		if errs := ValidateUpdateStatic(jobPod, stripped); len(errs) == 0 {
			t.Errorf("removing %s from a Job's running pod was allowed", key)
		}
	}
}

// TestValidateRecord: a replica's quota record cannot be created with a
// pod, nor set, changed or removed by anyone the check is asked about
// (berth's own updates never reach it).
func TestValidateRecord(t *testing.T) {
	with := func(v string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
		if v != "" {
			p.Annotations = map[string]string{berthv1.AdmissionRecordAnnotation: v}
		}
		return p
	}
	const forbidden = "metadata.annotations[berth.dev/admission-record]: Forbidden: berth writes it when it releases a replica"
	tests := []struct {
		name     string
		old, new *corev1.Pod
		want     string
	}{
		{name: "a new pod without one", new: with("")},
		{name: "a new pod with one", new: with(`{"workload":"w"}`), want: forbidden + ", as the record of the quota the replica holds; it cannot be set on a new pod: leave it to berth"},
		{name: "an update that leaves it", old: with(`{"workload":"w"}`), new: with(`{"workload":"w"}`)},
		{name: "an update of a pod without one", old: with(""), new: with("")},
		{name: "added", old: with(""), new: with(`{"workload":"w"}`), want: forbidden},
		{name: "changed", old: with(`{"workload":"w"}`), new: with(`{"workload":"x"}`), want: "it cannot be set, changed or removed"},
		{name: "removed", old: with(`{"workload":"w"}`), new: with(""), want: "it cannot be set, changed or removed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := ValidateRecord(tt.old, tt.new)
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
}
