package podgroup

import (
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/jobs/pods"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// seenChanges records the changes reported to the engine.
type seenChanges struct{ seen []admission.ChangeKind }

func (s *seenChanges) ReportChange(_ admission.WorkloadKey, c admission.Change, _ runtime.Object) {
	s.seen = append(s.seen, c.Kind)
}

// gpuTemplate is a ResourceClaimTemplate gpus-<n> of n devices of class
// gpu.nvidia.com.
func gpuTemplate(n int64) *resourcev1.ResourceClaimTemplate {
	return &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gpus-" + strconv.FormatInt(n, 10)},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpus", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com",
				AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: n}}}}}}}
}

// gpuMember is a gated member of group g of count pods that requests cpu
// (and containerGPUs GPUs) and claims template gpus-<claimed>.
func gpuMember(name, count, cpu string, containerGPUs, claimed int64) *corev1.Pod {
	p := pod(name, "g", count)
	p.Namespace, p.UID = "ns", types.UID("u-"+name)
	p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: berthv1.AdmissionGate}}
	reqs := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	if containerGPUs > 0 {
		reqs["nvidia.com/gpu"] = *resource.NewQuantity(containerGPUs, resource.DecimalSI)
	}
	p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: reqs}}}
	if claimed > 0 {
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To(gpuTemplate(claimed).Name)}}
	}
	return &p
}

// groupReconciler is a pod group reconciler over a fake API server holding
// objs, that counts gpu.nvidia.com devices as nvidia.com/gpu.
func groupReconciler(t *testing.T, changes jobs.ChangeReporter, rec *fakeapi.Recorder, objs ...client.Object) (*jobs.Reconciler, client.Client) {
	t.Helper()
	b, err := fakeapi.Builder(objs...)
	if err != nil {
		t.Fatal(err)
	}
	k := Kind{}
	c := b.WithIndex(&corev1.Pod{}, jobs.KeyIndexKey(k.GVK()), func(o client.Object) []string {
		if key, ok := k.Key(o); ok {
			return []string{key}
		}
		return nil
	}).Build()
	opts := jobs.Options{Clock: clocktesting.NewFakePassiveClock(time.Unix(1000, 0)), Changes: changes,
		DeviceClasses: jobs.DeviceClassMapping{"gpu.nvidia.com": {Resource: "nvidia.com/gpu", PerDevice: resource.MustParse("1")}}}
	return jobs.NewReconciler(c, c, rec, k, opts), c
}

// TestGroupChargedForEveryMembersClaims: a group is charged per pod for its
// largest member, what its DRA claims cost included, whichever member that
// is: a first member (by name) without claims does not make berth charge,
// and then release, the others' claimed GPUs as free.
func TestGroupChargedForEveryMembersClaims(t *testing.T) {
	member := func(name, cpu string, containerGPUs, claimed int64) client.Object {
		return gpuMember(name, "3", cpu, containerGPUs, claimed)
	}
	tests := []struct {
		name    string
		members []client.Object
		wantGPU string // per pod
		wantCPU string
	}{
		{name: "only the second member claims GPUs", members: []client.Object{member("a", "1", 0, 0), member("b", "1", 0, 8), member("c", "1", 0, 8)},
			wantGPU: "8", wantCPU: "1"},
		{name: "a member's claims add to its own containers' GPUs, not another's",
			members: []client.Object{member("a", "4", 2, 0), member("b", "1", 1, 4), member("c", "1", 0, 0)}, wantGPU: "5", wantCPU: "4"},
		{name: "the first member claims the most", members: []client.Object{member("a", "1", 0, 8), member("b", "1", 0, 4), member("c", "1", 0, 0)},
			wantGPU: "8", wantCPU: "1"},
		{name: "no member claims", members: []client.Object{member("a", "1", 1, 0), member("b", "2", 1, 0), member("c", "1", 1, 0)},
			wantGPU: "1", wantCPU: "2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, c := groupReconciler(t, &seenChanges{}, &fakeapi.Recorder{}, append([]client.Object{gpuTemplate(4), gpuTemplate(8)}, tt.members...)...)
			if _, err := r.Reconcile(t.Context(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "g"}}); err != nil {
				t.Fatal(err)
			}
			wl := &berthv1.Workload{}
			if err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: jobs.KeyWorkloadName("Pod", "ns", "g")}, wl); err != nil {
				t.Fatalf("the group is queued: %v", err)
			}
			ps := wl.Spec.PodSets
			if len(ps) != 1 || ps[0].Count != 3 {
				t.Fatalf("pod sets %+v, want one of 3 pods", ps)
			}
			if got := ps[0].Requests["nvidia.com/gpu"]; got.Cmp(resource.MustParse(tt.wantGPU)) != 0 {
				t.Errorf("nvidia.com/gpu per pod = %s, want %s", got.String(), tt.wantGPU)
			}
			if got := ps[0].Requests[corev1.ResourceCPU]; got.Cmp(resource.MustParse(tt.wantCPU)) != 0 {
				t.Errorf("cpu per pod = %s, want %s", got.String(), tt.wantCPU)
			}
		})
	}
}

// TestReplacementWithUncountedClaimsStaysGated: a running group's new
// member whose claims berth cannot count (its template does not exist yet)
// is not released on the running admission, which would let it run with
// whatever the template later asks for; the running member keeps running,
// and once the template exists and asks for more, the group has grown.
func TestReplacementWithUncountedClaimsStaysGated(t *testing.T) {
	changes, rec := &seenChanges{}, &fakeapi.Recorder{}
	h200 := &berthv1.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "h200"},
		Spec: berthv1.ResourceFlavorSpec{NodeLabels: map[string]string{"gpu": "h200"}}}
	r, c := groupReconciler(t, changes, rec, h200, gpuMember("a", "2", "1", 1, 0), gpuMember("b", "2", "1", 1, 0))
	ctx, req := t.Context(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "g"}}
	reconcileOnce := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	gated := func(name string) bool {
		t.Helper()
		p := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, p); err != nil {
			t.Fatal(err)
		}
		return pods.IsGated(p)
	}
	reconcileOnce()
	wl := &berthv1.Workload{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: jobs.KeyWorkloadName("Pod", "ns", "g")}, wl); err != nil {
		t.Fatalf("the group is queued: %v", err)
	}
	a := &berthv1.Admission{ClusterQueue: "cq", PodSetAssignments: []berthv1.PodSetAssignment{{Name: PodSetName, Count: 2,
		Flavors: map[corev1.ResourceName]string{"nvidia.com/gpu": "h200"}}}}
	if err := lifecycle.Apply(wl, lifecycle.Admit{Admission: a, Generation: wl.Generation, Message: "admitted"}, metav1.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	if err := c.Status().Update(ctx, wl); err != nil {
		t.Fatal(err)
	}
	reconcileOnce()
	if gated("a") || gated("b") {
		t.Fatal("the admitted group's members are released")
	}

	if err := c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, gpuMember("c", "2", "1", 0, 8)); err != nil {
		t.Fatal(err)
	}
	reconcileOnce()
	if !gated("c") || gated("a") {
		t.Errorf("the member whose template does not exist is released (gated: %v), or the running one stopped", gated("c"))
	}
	if reasons := rec.Reasons(); !slices.Contains(reasons, jobs.EventInvalidJob) {
		t.Errorf("events %v, want %s saying which template is missing", reasons, jobs.EventInvalidJob)
	}
	if len(changes.seen) != 0 {
		t.Errorf("the engine was told %v, want nothing while the running member keeps its admission", changes.seen)
	}

	if err := c.Create(ctx, gpuTemplate(8)); err != nil {
		t.Fatal(err)
	}
	reconcileOnce()
	if !slices.Equal(changes.seen, []admission.ChangeKind{admission.ChangeGrew}) {
		t.Errorf("the engine was told %v once the template asks for 8 GPUs, want %v", changes.seen, admission.ChangeGrew)
	}
}
