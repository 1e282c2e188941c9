package jobs

import (
	"context"
	"strings"
	"testing"
	"time"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

func TestSchedulingGroupName(t *testing.T) {
	long := strings.Repeat("a", 70)
	cases := []struct {
		name  string
		parts []string
		want  string // "" means: hashed, checked for validity only
	}{
		{"a valid name is kept", []string{"job-train-1a2b3"}, "job-train-1a2b3"},
		{"parts are joined", []string{"podgroup", "ranks"}, "podgroup-ranks"},
		{"upper case is hashed", []string{"podgroup", "Ranks_A"}, ""},
		{"too long for a label value is hashed", []string{long}, ""},
	}
	for _, tc := range cases {
		got := SchedulingGroupName(tc.parts...)
		if tc.want != "" && got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
		if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
			t.Errorf("%s: %q is not a valid PodGroup name and label value: %v", tc.name, got, errs)
		}
	}
	if SchedulingGroupName("podgroup", "A") == SchedulingGroupName("podgroup", "a_") {
		t.Errorf("different groups hashed to one name")
	}
}

// plainJob is a job whose pods its operator creates once berth lets it.
type plainJob struct{ GenericJob }

// gatedJob is a gang of gated pods created with a scheduling group name.
type gatedJob struct {
	GenericJob
	group  string
	active bool
}

func (g gatedJob) SchedulingGroup() string { return g.group }
func (g gatedJob) IsActive() bool          { return g.active }

// ownJob is a job whose controller makes its gang's group from the job's
// spec (a Job with spec.scheduling); size records the gang size set.
type ownJob struct {
	GenericJob
	size *int32
}

func (o ownJob) HasOwnGang() bool       { return true }
func (o ownJob) SetGangSize(pods int32) { *o.size = pods }

func TestHandOffToOwnGang(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(handOffScheme(t)).Build()
	r := &Reconciler{client: c, reader: c, opts: Options{PodGroups: true}}
	job := ownJob{size: new(int32)}
	wl := admittedWorkload(1, 3)
	got, err := r.handOff(context.Background(), job, wl, schedulingOf(wl))
	if err != nil {
		t.Fatal(err)
	}
	if *job.size != 4 {
		t.Errorf("gang size %d, want the 4 pods admitted", *job.size)
	}
	for _, s := range got {
		if _, has := s.Labels[berthv1.SchedulingGroupLabel]; has {
			t.Errorf("pod set %s names a group of berth's: its pods join the job controller's", s.Name)
		}
	}
	pgs := &schedulingv1beta1.PodGroupList{}
	if err := c.List(context.Background(), pgs); err != nil || len(pgs.Items) != 0 {
		t.Errorf("PodGroups %v (%v), want none of berth's", pgs.Items, err)
	}
}

func handOffScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, berthv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func admittedWorkload(counts ...int32) *berthv1.Workload {
	wl := &berthv1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "job-train-1a2b3", UID: "wl-uid"}}
	wl.Status.Admission = &berthv1.Admission{}
	for i, n := range counts {
		wl.Status.Admission.PodSetAssignments = append(wl.Status.Admission.PodSetAssignments,
			berthv1.PodSetAssignment{Name: []string{"leader", "workers"}[i], Count: n})
	}
	return wl
}

func schedulingOf(wl *berthv1.Workload) []PodSetScheduling {
	var out []PodSetScheduling
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		out = append(out, PodSetScheduling{Name: psa.Name, Count: psa.Count, Labels: map[string]string{berthv1.WorkloadLabel: "wl-uid"}})
	}
	return out
}

func TestHandOff(t *testing.T) {
	cases := []struct {
		name      string
		on        bool
		job       GenericJob
		counts    []int32
		existing  *schedulingv1beta1.PodGroup
		wantGroup string // the PodGroup that must exist afterwards, "" none
		wantMin   int32
		wantLabel bool
		wantErr   string
	}{
		{name: "off: nothing", job: plainJob{}, counts: []int32{1, 3}},
		{name: "a job's gang gets a PodGroup and its templates the label", on: true, job: plainJob{}, counts: []int32{1, 3},
			wantGroup: "job-train-1a2b3", wantMin: 4, wantLabel: true},
		{name: "a gang of one has nothing to gang", on: true, job: plainJob{}, counts: []int32{1}},
		{name: "gated pods keep the name they were created with", on: true, job: gatedJob{group: "podgroup-ranks"}, counts: []int32{4},
			wantGroup: "podgroup-ranks", wantMin: 4},
		{name: "gated pods created without a name get no group", on: true, job: gatedJob{}, counts: []int32{4}},
		{name: "the Workload's own group is kept", on: true, job: plainJob{}, counts: []int32{2},
			existing: podGroup("wl-uid", 2), wantGroup: "job-train-1a2b3", wantMin: 2, wantLabel: true},
		{name: "its own group, lowered once placed, is whole again for the next start", on: true, job: gatedJob{group: "job-train-1a2b3"}, counts: []int32{2},
			existing: podGroup("wl-uid", 1), wantGroup: "job-train-1a2b3", wantMin: 2},
		{name: "a group of another Workload is deleted and the start retried", on: true, job: plainJob{}, counts: []int32{2},
			existing: podGroup("forged", 2), wantLabel: true, wantErr: "was not workload"},
		{name: "a group deleted under a gang of pods that all wait at the gate is let go, and the start retried", on: true,
			job: gatedJob{group: "job-train-1a2b3"}, counts: []int32{2}, existing: deleting(podGroup("wl-uid", 2)), wantErr: "was deleted while"},
		{name: "a group deleted under a running gang of gated pods is waited for", on: true,
			job: gatedJob{group: "job-train-1a2b3", active: true}, counts: []int32{2}, existing: deleting(podGroup("wl-uid", 2)),
			wantGroup: "job-train-1a2b3", wantMin: 2, wantErr: "still being deleted"},
		{name: "a group still being deleted is waited for", on: true, job: plainJob{}, counts: []int32{2},
			existing: deleting(podGroup("wl-uid", 2)), wantGroup: "job-train-1a2b3", wantMin: 2, wantLabel: true, wantErr: "still being deleted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(handOffScheme(t))
			if tc.existing != nil {
				b = b.WithObjects(tc.existing)
			}
			c := b.Build()
			r := &Reconciler{client: c, reader: c, opts: Options{PodGroups: tc.on}}
			wl := admittedWorkload(tc.counts...)
			got, err := r.handOff(context.Background(), tc.job, wl, schedulingOf(wl))
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			for _, s := range got {
				if _, has := s.Labels[berthv1.SchedulingGroupLabel]; has != tc.wantLabel {
					t.Errorf("pod set %s: scheduling group label %v, want %v", s.Name, has, tc.wantLabel)
				}
			}
			pgs := &schedulingv1beta1.PodGroupList{}
			if err := c.List(context.Background(), pgs); err != nil {
				t.Fatal(err)
			}
			if tc.wantGroup == "" {
				if len(pgs.Items) != 0 {
					t.Fatalf("PodGroups %v, want none", pgs.Items)
				}
				return
			}
			if len(pgs.Items) != 1 || pgs.Items[0].Name != tc.wantGroup {
				t.Fatalf("PodGroups %v, want %s", pgs.Items, tc.wantGroup)
			}
			pg := pgs.Items[0]
			if g := pg.Spec.SchedulingPolicy.Gang; g == nil || g.MinCount != tc.wantMin {
				t.Errorf("gang policy %+v, want minCount %d", g, tc.wantMin)
			}
			if ref := metav1.GetControllerOf(&pg); ref == nil || ref.Kind != "Workload" || ref.Name != wl.Name {
				t.Errorf("controller %+v, want Workload %s", ref, wl.Name)
			}
		})
	}
}

func podGroup(wlUID string, minCount int32) *schedulingv1beta1.PodGroup {
	return &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "job-train-1a2b3", UID: "pg-uid", Labels: map[string]string{berthv1.WorkloadLabel: wlUID},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(admittedWorkload(), berthv1.GroupVersion.WithKind("Workload"))}},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}}},
	}
}

func deleting(pg *schedulingv1beta1.PodGroup) *schedulingv1beta1.PodGroup {
	pg.Finalizers = []string{"scheduling.k8s.io/podgroup-protection"}
	pg.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	return pg
}

func TestDropPodGroup(t *testing.T) {
	cases := []struct {
		name   string
		on     bool
		job    GenericJob
		counts []int32
		ended  bool
		gone   bool
	}{
		{"off: kept", false, plainJob{}, []int32{2}, true, false},
		{"a stopped job's group is deleted", true, plainJob{}, []int32{2}, false, true},
		{"an ended job's group is deleted", true, plainJob{}, []int32{2}, true, true},
		{"an ended gated gang's group is deleted by the name its pods carry", true, gatedJob{group: "job-train-1a2b3"}, []int32{2}, true, true},
		{"a stopped gated gang keeps its group for the pods its owner creates again", true, gatedJob{group: "job-train-1a2b3"}, []int32{2}, false, false},
		{"a gang of one never had one: no call", true, plainJob{}, []int32{1}, true, false},
		{"a job whose controller made its group leaves it to that controller", true, ownJob{size: new(int32)}, []int32{2}, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(handOffScheme(t)).WithObjects(podGroup("wl-uid", 2)).Build()
			r := &Reconciler{client: c, reader: c, opts: Options{PodGroups: tc.on}}
			if err := r.dropPodGroup(context.Background(), tc.job, admittedWorkload(tc.counts...), tc.ended); err != nil {
				t.Fatal(err)
			}
			err := c.Get(context.Background(), client.ObjectKey{Namespace: "team", Name: "job-train-1a2b3"}, &schedulingv1beta1.PodGroup{})
			if gone := apierrors.IsNotFound(err); gone != tc.gone {
				t.Errorf("deleted %v (get: %v), want %v", gone, err, tc.gone)
			}
		})
	}
}
