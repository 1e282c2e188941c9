package serving

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

func rs(name, uid, owner, rev string) appsv1.ReplicaSet {
	return appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid),
		Annotations:     map[string]string{revisionAnnotation: rev},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: types.UID(owner), Controller: ptr.To(true)}}}}
}

// replicaPod is a pod of ReplicaSet rsUID, created at minute age, gated or
// released (and then Ready or not).
func replicaPod(name, rsUID string, minute int, gated, ready bool) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Unix(0, 0).Add(time.Duration(minute) * time.Minute)),
		Labels:          map[string]string{berthv1.QueueNameLabel: "team"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: types.UID(rsUID), Controller: ptr.To(true)}}}}
	if gated {
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: berthv1.AdmissionGate}}
	}
	p.Status.Phase = corev1.PodRunning
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	return p
}

// TestSwap: the rolling-update rule at full quota, case by case.
func TestSwap(t *testing.T) {
	deploy := func(mut ...func(*appsv1.Deployment)) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "d1", Annotations: map[string]string{revisionAnnotation: "2"}}}
		for _, m := range mut {
			m(d)
		}
		return d
	}
	rollout := []appsv1.ReplicaSet{rs("old", "rs1", "d1", "1"), rs("new", "rs2", "d1", "2")}
	oldA, oldB := replicaPod("old-a", "rs1", 1, false, true), replicaPod("old-b", "rs1", 2, false, true)
	surge := replicaPod("new-a", "rs2", 10, true, false)
	marked := func(donor string) corev1.Pod {
		p := replicaPod("new-a", "rs2", 10, true, false)
		p.Annotations = map[string]string{berthv1.SwapAnnotation: donor}
		return p
	}
	deleting := func(p corev1.Pod) corev1.Pod { p.DeletionTimestamp = ptr.To(metav1.Now()); return p }
	waiting := map[string]bool{"new-a": true}
	for _, tc := range []struct {
		name         string
		d            *appsv1.Deployment
		rss          []appsv1.ReplicaSet
		pods         []corev1.Pod
		waiting      map[string]bool
		surge, donor string
	}{
		{name: "a waiting surge pod takes the youngest old replica", d: deploy(), rss: rollout,
			pods: []corev1.Pod{oldA, oldB, surge}, waiting: waiting, surge: "new-a", donor: "old-b"},
		{name: "an old replica that is not Ready goes first", d: deploy(), rss: rollout,
			pods: []corev1.Pod{replicaPod("old-a", "rs1", 1, false, false), oldB, surge}, waiting: waiting, surge: "new-a", donor: "old-a"},
		{name: "a surge pod not waiting for quota (it may fit) takes nothing", d: deploy(), rss: rollout,
			pods: []corev1.Pod{oldA, oldB, surge}, waiting: map[string]bool{}},
		{name: "a paused rollout takes nothing", d: deploy(func(d *appsv1.Deployment) { d.Spec.Paused = true }), rss: rollout,
			pods: []corev1.Pod{oldA, oldB, surge}, waiting: waiting},
		{name: "Recreate needs no room", d: deploy(func(d *appsv1.Deployment) { d.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType }),
			rss: rollout, pods: []corev1.Pod{oldA, oldB, surge}, waiting: waiting},
		{name: "one swap at a time: a marked surge pod whose donor is going", d: deploy(), rss: rollout,
			pods:    []corev1.Pod{deleting(oldA), oldB, marked("old-a"), replicaPod("new-b", "rs2", 11, true, false)},
			waiting: map[string]bool{"new-a": true, "new-b": true}},
		{name: "one swap at a time even when its freed quota went elsewhere", d: deploy(), rss: rollout,
			pods: []corev1.Pod{oldB, marked("old-a")}, waiting: waiting},
		{name: "an interrupted swap is finished with its own donor", d: deploy(), rss: rollout,
			pods: []corev1.Pod{oldA, oldB, marked("old-a")}, waiting: waiting, surge: "new-a", donor: "old-a"},
		{name: "a mark naming a pod of the new ReplicaSet deletes nothing", d: deploy(), rss: rollout,
			pods: []corev1.Pod{oldA, replicaPod("new-0", "rs2", 5, false, true), marked("new-0")}, waiting: waiting},
		{name: "no old replica runs: nothing to take", d: deploy(), rss: rollout,
			pods: []corev1.Pod{replicaPod("old-a", "rs1", 1, true, false), surge}, waiting: waiting},
		{name: "a ReplicaSet of another revision is not the new one", d: deploy(func(d *appsv1.Deployment) { d.Annotations[revisionAnnotation] = "3" }),
			rss: rollout, pods: []corev1.Pod{oldA, surge}, waiting: waiting},
		{name: "a ReplicaSet another Deployment controls gives no donor", d: deploy(),
			rss:  []appsv1.ReplicaSet{rs("old", "rs1", "other", "1"), rs("new", "rs2", "d1", "2")},
			pods: []corev1.Pod{oldA, surge}, waiting: waiting},
		{name: "a tenant's ReplicaSet claiming the new revision but not controlled by the Deployment", d: deploy(),
			rss:  []appsv1.ReplicaSet{rs("old", "rs1", "d1", "1"), rs("mine", "rs2", "someone", "2")},
			pods: []corev1.Pod{oldA, surge}, waiting: waiting},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, d := Swap(tc.d, tc.rss, tc.pods, tc.waiting)
			name := func(p *corev1.Pod) string {
				if p == nil {
					return ""
				}
				return p.Name
			}
			if name(s) != tc.surge || name(d) != tc.donor {
				t.Errorf("Swap = %q for %q, want %q for %q", name(d), name(s), tc.donor, tc.surge)
			}
		})
	}
}
