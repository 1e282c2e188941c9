package lifecycle

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

func TestClusterQueueToEngine(t *testing.T) {
	cq := &berthv1.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
		Spec: berthv1.ClusterQueueSpec{
			Cohort:      "gpus",
			StopPolicy:  berthv1.StopPolicyHold,
			FairSharing: berthv1.FairSharing{Weight: ptr.To(resource.MustParse("2"))},
			ResourceGroups: []berthv1.ResourceGroup{{
				CoveredResources: []corev1.ResourceName{"nvidia.com/gpu", "memory"},
				Flavors: []berthv1.FlavorQuotas{{Name: "h200", Resources: []berthv1.ResourceQuota{
					{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse("8"), BorrowingLimit: ptr.To(resource.MustParse("4"))},
					{Name: "memory", NominalQuota: resource.MustParse("1Gi"), LendingLimit: ptr.To(resource.MustParse("512Mi"))},
				}}},
			}},
		},
	}
	got := ClusterQueueToEngine(cq, nil)
	if got.Name != "team-a" || got.Cohort != "gpus" || !got.Stopped || got.FairShareWeight != 2000 {
		t.Errorf("queue = %+v", got)
	}
	if got.QueueingStrategy != admission.BestEffortFIFO {
		t.Errorf("strategy = %q, want the API default BestEffortFIFO", got.QueueingStrategy)
	}
	q := got.ResourceGroups[0].Flavors[0].Resources
	if g := q["nvidia.com/gpu"]; g.Nominal != 8000 || g.BorrowingLimit == nil || *g.BorrowingLimit != 4000 || g.LendingLimit != nil {
		t.Errorf("gpu quota = %+v, want nominal 8000m, borrowing 4000m", g)
	}
	if m := q["memory"]; m.Nominal != (1<<30)*1000 || *m.LendingLimit != (512<<20)*1000 {
		t.Errorf("memory quota = %+v", m)
	}
}

func TestAdmissionRoundTrip(t *testing.T) {
	in := admission.Admission{ClusterQueue: "team-a", PodSets: []admission.PodSetAssignment{
		{Name: "main", Count: 2, Flavors: map[admission.ResourceName]string{"nvidia.com/gpu": "h200"}},
	}}
	api := AdmissionToAPI(in)
	back := AdmissionToEngine(api, nil)
	if back.ClusterQueue != in.ClusterQueue || len(back.PodSets) != 1 || back.PodSets[0].Count != 2 ||
		back.PodSets[0].Flavors["nvidia.com/gpu"] != "h200" {
		t.Errorf("round trip = %+v, want %+v", back, in)
	}
	wl := &berthv1.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w"},
		Spec: berthv1.WorkloadSpec{QueueName: "lq", PodSets: []berthv1.PodSet{
			{Name: "main", Count: 2, Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}},
		}},
		Status: berthv1.WorkloadStatus{Admission: api},
	}
	ew := WorkloadToEngine(wl, QueueRef{ClusterQueue: "ignored-for-admitted"})
	if ew.ClusterQueue != "team-a" || ew.Admission == nil || ew.PodSets[0].Requests["nvidia.com/gpu"] != 4000 {
		t.Errorf("workload = %+v: an admitted workload stays in its admission's queue", ew)
	}
}

func TestQuantity(t *testing.T) {
	cases := []struct {
		res   admission.ResourceName
		milli int64
		want  string
	}{
		{"nvidia.com/gpu", 8000, "8"},
		{"cpu", 1500, "1500m"},
		{"memory", (2 << 30) * 1000, "2Gi"},
	}
	for _, tc := range cases {
		q := Quantity(tc.res, tc.milli)
		if q.String() != tc.want {
			t.Errorf("Quantity(%s, %d) = %s, want %s", tc.res, tc.milli, q.String(), tc.want)
		}
	}
}

func TestMilliSaturates(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"1", 1000},
		{"500m", 500},
		{"1e18", admission.MaxAmount + 1},
		{"9223372036854775807", admission.MaxAmount + 1},
		{"-1e18", -admission.MaxAmount - 1},
		{"1152921504606846976m", admission.MaxAmount},
	} {
		if got := milli(resource.MustParse(tc.in)); got != tc.want {
			t.Errorf("milli(%s) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// TestWorkloadFacts: the facts the engine decides eligibility and
// evictions on come from the Workload and the queue resolution.
func TestWorkloadFacts(t *testing.T) {
	evicting := &berthv1.Workload{Spec: berthv1.WorkloadSpec{Active: ptr.To(false)}}
	evicting.Status.Admission = &berthv1.Admission{ClusterQueue: "cq"}
	evicting.Status.Conditions = []metav1.Condition{
		{Type: berthv1.ConditionQuotaReserved, Status: metav1.ConditionTrue, Reason: "QuotaReserved"},
		{Type: berthv1.ConditionAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted"},
		{Type: berthv1.ConditionEvicted, Status: metav1.ConditionTrue, Reason: string(berthv1.ReasonPreempted)},
	}
	for _, tc := range []struct {
		name string
		wl   *berthv1.Workload
		q    QueueRef
		want admission.Workload
	}{
		{name: "active and open", wl: &berthv1.Workload{}, q: QueueRef{ClusterQueue: "cq"}},
		{name: "deactivated, its LocalQueue drained, its namespace refused", wl: &berthv1.Workload{Spec: berthv1.WorkloadSpec{Active: ptr.To(false)}},
			q:    QueueRef{ClusterQueue: "cq", LocalQueueState: admission.LocalQueueHoldAndDrain, NamespaceRefusal: admission.NamespaceNotSelected},
			want: admission.Workload{Inactive: true, LocalQueueState: admission.LocalQueueHoldAndDrain, NamespaceRefusal: admission.NamespaceNotSelected}},
		{name: "an eviction under way", wl: evicting, q: QueueRef{ClusterQueue: "cq"}, want: admission.Workload{Inactive: true, Evicting: true}},
	} {
		got := WorkloadToEngine(tc.wl, tc.q)
		if got.Inactive != tc.want.Inactive || got.LocalQueueState != tc.want.LocalQueueState ||
			got.NamespaceRefusal != tc.want.NamespaceRefusal || got.Evicting != tc.want.Evicting {
			t.Errorf("%s: facts %v %q %q %v, want %v %q %q %v", tc.name, got.Inactive, got.LocalQueueState, got.NamespaceRefusal, got.Evicting,
				tc.want.Inactive, tc.want.LocalQueueState, tc.want.NamespaceRefusal, tc.want.Evicting)
		}
	}
}

// TestRefusedPriorityClass: a LocalQueue lets its workloads take a class of
// value above 0 only when it lists it; lower classes need no grant, and the
// refused class reaches the engine.
func TestRefusedPriorityClass(t *testing.T) {
	lq := &berthv1.LocalQueue{Spec: berthv1.LocalQueueSpec{ClusterQueue: "cq", PriorityClasses: []string{"granted"}}}
	open := &berthv1.LocalQueue{Spec: berthv1.LocalQueueSpec{ClusterQueue: "cq"}}
	for _, tc := range []struct {
		name     string
		lq       *berthv1.LocalQueue
		class    string
		priority int32
		want     string
	}{
		{name: "no class", lq: open},
		{name: "a listed class", lq: lq, class: "granted", priority: 1000},
		{name: "a class not listed", lq: lq, class: "urgent", priority: 1000, want: "urgent"},
		{name: "a class on a LocalQueue that lists none", lq: open, class: "urgent", priority: 1, want: "urgent"},
		{name: "a class of value 0", lq: open, class: "zero"},
		{name: "a class below 0", lq: open, class: "batch-low", priority: -10},
	} {
		wl := &berthv1.Workload{Spec: berthv1.WorkloadSpec{PriorityClassName: tc.class, Priority: tc.priority}}
		if got := RefusedPriorityClass(tc.lq, wl); got != tc.want {
			t.Errorf("%s: RefusedPriorityClass = %q, want %q", tc.name, got, tc.want)
		}
		if got := WorkloadToEngine(wl, QueueRef{ClusterQueue: "cq", PriorityClassRefused: tc.want}).PriorityClassRefused; got != tc.want {
			t.Errorf("%s: the engine's PriorityClassRefused = %q, want %q", tc.name, got, tc.want)
		}
	}
}
