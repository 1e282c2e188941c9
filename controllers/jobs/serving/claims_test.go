package serving

import (
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
	"github.com/berth-dev/berth/controllers/jobs"
)

// TestSetChargedForItsPodsClaims: a whole set is charged per pod for the
// largest of its template and its pods, what their DRA claims cost
// included: a pod of an older revision that claims eight GPUs is not
// released on a charge made from a template that claims none.
func TestSetChargedForItsPodsClaims(t *testing.T) {
	eight := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "eight"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpus", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com",
				AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 8}}}}}}}
	claims := []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("eight")}}
	member := func(name string, claimed bool) *corev1.Pod {
		p := gpuPod(name, ref("StatefulSet", "train", "s2"), 1, berthv1.GangAnnotation, berthv1.GangSet)
		if claimed {
			p.Spec.ResourceClaims = claims
		}
		return p
	}
	tests := []struct {
		name           string
		templateClaims bool
		claimed        []bool // per pod, by ordinal
		wantGPUsPerPod string
	}{
		{name: "a pod of an older revision claims eight GPUs", claimed: []bool{false, true}, wantGPUsPerPod: "9"},
		{name: "the template claims them", templateClaims: true, claimed: []bool{false, false}, wantGPUsPerPod: "9"},
		{name: "nothing claimed", claimed: []bool{false, false}, wantGPUsPerPod: "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := sts("train", "s2", 2)
			if tt.templateClaims {
				set.Spec.Template.Spec.ResourceClaims = claims
			}
			objs := []client.Object{set, eight}
			for i, c := range tt.claimed {
				objs = append(objs, member("train-"+strconv.Itoa(i), c))
			}
			k := StatefulSetKind{}
			b, err := fakeapi.Builder(objs...)
			if err != nil {
				t.Fatal(err)
			}
			c := b.WithIndex(&corev1.Pod{}, jobs.KeyIndexKey(k.GVK()), func(o client.Object) []string {
				if key, ok := k.Key(o); ok {
					return []string{key}
				}
				return nil
			}).Build()
			opts := jobs.Options{Clock: clocktesting.NewFakePassiveClock(time.Unix(1000, 0)), Changes: &seenChanges{},
				DeviceClasses: jobs.DeviceClassMapping{"gpu.nvidia.com": {Resource: "nvidia.com/gpu", PerDevice: resource.MustParse("1")}}}
			r := jobs.NewReconciler(c, c, &fakeapi.Recorder{}, k, opts)
			if _, err := r.Reconcile(t.Context(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "train-set"}}); err != nil {
				t.Fatal(err)
			}
			wls := &berthv1.WorkloadList{}
			if err := c.List(t.Context(), wls); err != nil || len(wls.Items) != 1 {
				t.Fatalf("Workloads %d (%v), want the set's", len(wls.Items), err)
			}
			ps := wls.Items[0].Spec.PodSets
			if got := ps[0].Requests["nvidia.com/gpu"]; len(ps) != 1 || ps[0].Count != 2 || got.Cmp(resource.MustParse(tt.wantGPUsPerPod)) != 0 {
				t.Errorf("pod sets %+v, want 2 pods of %s GPUs", ps, tt.wantGPUsPerPod)
			}
		})
	}
}
