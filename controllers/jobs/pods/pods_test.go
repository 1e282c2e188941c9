package pods

import (
	"context"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

func TestDefaulter(t *testing.T) {
	owned := func(apiVersion, kind string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "o", Controller: ptr.To(true)}}
	}
	tests := []struct {
		name   string
		labels map[string]string
		owners []metav1.OwnerReference
		gated  bool
	}{
		{name: "labelled plain pod", labels: map[string]string{berthv1.QueueNameLabel: "q"}, gated: true},
		{name: "labelled pod of a StatefulSet", labels: map[string]string{berthv1.QueueNameLabel: "q"}, owners: owned("apps/v1", "StatefulSet"), gated: true},
		{name: "labelled pod of a Job, held by the Job", labels: map[string]string{berthv1.QueueNameLabel: "q"}, owners: owned("batch/v1", "Job")},
		{name: "unlabelled pod"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: tt.labels, OwnerReferences: tt.owners}}
			if err := (Defaulter{}).Default(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			if IsGated(p) != tt.gated {
				t.Errorf("gated = %v, want %v", IsGated(p), tt.gated)
			}
			if err := (Defaulter{}).Default(context.Background(), p); err != nil || len(p.Spec.SchedulingGates) > 1 {
				t.Errorf("defaulting twice added the gate twice: %v", p.Spec.SchedulingGates)
			}
		})
	}
}

// TestDefaulterSchedulingGroup names the PodGroup a pod joins at
// creation, the only time it can be named.
func TestDefaulterSchedulingGroup(t *testing.T) {
	queued := map[string]string{berthv1.QueueNameLabel: "q"}
	byLabel := map[string]string{berthv1.SchedulingGroupLabel: "job-train-1a2b3"}
	jobPod := []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", Controller: ptr.To(true)}}
	groups := func(context.Context, *corev1.Pod) string { return "podgroup-ranks" }
	tests := []struct {
		name   string
		d      Defaulter
		labels map[string]string
		owners []metav1.OwnerReference
		has    *string
		gated  bool
		want   string
	}{
		{name: "a Job's pod joins the group its template's label names", labels: byLabel, owners: jobPod, want: "job-train-1a2b3"},
		{name: "a gated pod joins the group of its gang", d: Defaulter{SchedulingGroups: groups}, labels: queued, want: "podgroup-ranks"},
		{name: "hand-off off: a gated pod joins none", labels: queued},
		{name: "a pod of no gang joins none", d: Defaulter{SchedulingGroups: func(context.Context, *corev1.Pod) string { return "" }}, labels: queued},
		{name: "a pod that names its group keeps it", d: Defaulter{SchedulingGroups: groups}, labels: queued, has: ptr.To("own"), want: "own"},
		{name: "a pod created gated (its template has the gate) joins its gang's group", d: Defaulter{SchedulingGroups: groups}, labels: queued,
			gated: true, want: "podgroup-ranks"},
		{name: "an unlabelled pod is left alone", d: Defaulter{SchedulingGroups: groups}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: tt.labels, OwnerReferences: tt.owners}}
			if tt.has != nil {
				p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: tt.has}
			}
			if tt.gated {
				p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: berthv1.AdmissionGate}}
			}
			if err := tt.d.Default(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			got := ""
			if sg := p.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil {
				got = *sg.PodGroupName
			}
			if got != tt.want {
				t.Errorf("scheduling group %q, want %q", got, tt.want)
			}
		})
	}
}

// TestGangSchedulingGroup is the group a gang's pods share.
func TestGangSchedulingGroup(t *testing.T) {
	pod := func(group string) corev1.Pod {
		p := corev1.Pod{}
		if group != "" {
			p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
		}
		return p
	}
	tests := []struct {
		name string
		pods []corev1.Pod
		want string
	}{
		{"every pod names one group", []corev1.Pod{pod("g"), pod("g")}, "g"},
		{"a pod created before the hand-off names none", []corev1.Pod{pod("g"), pod("")}, "g"},
		{"no pod names one", []corev1.Pod{pod(""), pod("")}, ""},
		{"pods name different groups", []corev1.Pod{pod("g"), pod("h")}, ""},
		{"no pods", nil, ""},
	}
	for _, tt := range tests {
		if got := (&Gang{Pods: tt.pods}).SchedulingGroup(); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestReleaseFromStaleCache releases a pod from a cached copy a version
// behind the server's, as after kube-scheduler wrote the gated pod's
// PodScheduled condition: the release must not conflict, must keep what
// the newer version has, and must remove only berth's gate.
func TestReleaseFromStaleCache(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p-0"},
		Spec: corev1.PodSpec{
			NodeSelector:    map[string]string{"pool": "a"},
			SchedulingGates: []corev1.PodSchedulingGate{{Name: "other.example/gate"}, {Name: berthv1.AdmissionGate}},
		},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pod).WithStatusSubresource(pod).Build()
	stale := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), stale); err != nil {
		t.Fatal(err)
	}
	newer := stale.DeepCopy()
	newer.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "SchedulingGated"}}
	if err := c.Status().Update(ctx, newer); err != nil {
		t.Fatal(err)
	}

	g := &Gang{Pods: []corev1.Pod{*stale}, PodSetOf: func(*corev1.Pod) string { return "main" }}
	g.SetScheduling([]jobs.PodSetScheduling{{Name: "main", Count: 1, NodeSelector: map[string]string{"pool": "b", "rack": "r1"}}})
	g.Resume()
	if err := g.Write(ctx, c); err != nil {
		t.Fatalf("releasing from a stale copy: %v", err)
	}
	got := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
		t.Fatal(err)
	}
	if IsGated(got) {
		t.Errorf("berth's gate is still there: %v", got.Spec.SchedulingGates)
	}
	if want := []corev1.PodSchedulingGate{{Name: "other.example/gate"}}; !reflect.DeepEqual(got.Spec.SchedulingGates, want) {
		t.Errorf("gates = %v, want %v", got.Spec.SchedulingGates, want)
	}
	if want := map[string]string{"pool": "a", "rack": "r1"}; !reflect.DeepEqual(got.Spec.NodeSelector, want) {
		t.Errorf("node selector = %v, want %v (existing keys kept, missing ones added)", got.Spec.NodeSelector, want)
	}
	if len(got.Status.Conditions) != 1 {
		t.Errorf("the newer version's status was lost: %v", got.Status.Conditions)
	}
}

// TestReleaseIsBoundedByTheAdmission releases at most the admitted count
// of each pod set, counting the pods that already run, oldest gated pods
// first, and nothing of a pod set the admission does not name.
func TestReleaseIsBoundedByTheAdmission(t *testing.T) {
	gated := func(name string, sec int64, set string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.Unix(sec, 0), Labels: map[string]string{"set": set}},
			Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: berthv1.AdmissionGate}}}}
	}
	running := func(name, set string, phase corev1.PodPhase) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"set": set}}, Status: corev1.PodStatus{Phase: phase}}
	}
	tests := []struct {
		name         string
		pods         []corev1.Pod
		admitted     map[string]int32
		wantReleased []string
		wantHeld     []string
	}{
		{name: "a whole gang is released", pods: []corev1.Pod{gated("a", 1, "main"), gated("b", 2, "main")},
			admitted: map[string]int32{"main": 2}, wantReleased: []string{"a", "b"}},
		{name: "extra members of a running gang stay gated",
			pods:     []corev1.Pod{running("a", "main", corev1.PodRunning), running("b", "main", corev1.PodRunning), gated("x", 3, "main"), gated("y", 4, "main")},
			admitted: map[string]int32{"main": 2}, wantHeld: []string{"x", "y"}},
		{name: "a replacement of an ended pod is released, oldest first",
			pods:     []corev1.Pod{running("a", "main", corev1.PodRunning), running("b", "main", corev1.PodFailed), gated("late", 9, "main"), gated("early", 5, "main")},
			admitted: map[string]int32{"main": 2}, wantReleased: []string{"early"}, wantHeld: []string{"late"}},
		{name: "each pod set has its own bound",
			pods:     []corev1.Pod{gated("l", 1, "leader"), gated("l2", 2, "leader"), gated("w1", 3, "workers"), gated("w2", 4, "workers")},
			admitted: map[string]int32{"leader": 1, "workers": 2}, wantReleased: []string{"l", "w1", "w2"}, wantHeld: []string{"l2"}},
		{name: "a pod set the admission does not name is never released",
			pods:     []corev1.Pod{gated("l", 1, "leader"), gated("w", 2, "workers")},
			admitted: map[string]int32{"leader": 1}, wantReleased: []string{"l"}, wantHeld: []string{"w"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			objs := make([]client.Object, 0, len(tt.pods))
			for i := range tt.pods {
				objs = append(objs, tt.pods[i].DeepCopy())
			}
			c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(objs...).Build()
			g := &Gang{Pods: tt.pods, PodSetOf: func(p *corev1.Pod) string { return p.Labels["set"] }}
			var s []jobs.PodSetScheduling
			for name, n := range tt.admitted {
				s = append(s, jobs.PodSetScheduling{Name: name, Count: n})
			}
			wasGated := map[string]bool{}
			for i := range tt.pods {
				wasGated[tt.pods[i].Name] = IsGated(&tt.pods[i])
			}
			g.SetScheduling(s)
			g.Resume()
			if err := g.Write(ctx, c); err != nil {
				t.Fatal(err)
			}
			var released []string
			for _, p := range tt.pods {
				got := &corev1.Pod{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(&p), got); err != nil {
					t.Fatal(err)
				}
				if wasGated[p.Name] && !IsGated(got) {
					released = append(released, p.Name)
				}
			}
			var held []string
			for _, h := range g.Held() {
				held = append(held, h.Name)
			}
			slices.Sort(released)
			if !slices.Equal(released, tt.wantReleased) || !slices.Equal(held, tt.wantHeld) || g.Released() != len(tt.wantReleased) {
				t.Errorf("released %v (%d), held %v; want %v, %v", released, g.Released(), held, tt.wantReleased, tt.wantHeld)
			}
		})
	}
}
