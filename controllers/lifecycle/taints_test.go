package lifecycle

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// TestTolerationsAgreeWithKubernetes compares the engine's matcher, on the
// converted values, with corev1.Toleration.ToleratesTaint for every
// combination of a table of tolerations and taints, and the engine's node
// decision (some taint that excludes is not tolerated) with the scheduler's
// TaintToleration filter (FindMatchingUntoleratedTaint over NoSchedule and
// NoExecute taints).
func TestTolerationsAgreeWithKubernetes(t *testing.T) {
	effects := []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}
	var taints []corev1.Taint
	for _, key := range []string{"example.com/reserved", "nvidia.com/gpu"} {
		for _, value := range []string{"", "true", "false"} {
			for _, effect := range effects {
				taints = append(taints, corev1.Taint{Key: key, Value: value, Effect: effect})
			}
		}
	}
	var tols []corev1.Toleration
	for _, key := range []string{"", "example.com/reserved", "other"} {
		for _, op := range []corev1.TolerationOperator{"", corev1.TolerationOpEqual, corev1.TolerationOpExists, corev1.TolerationOpGt, "In"} {
			for _, value := range []string{"", "true", "1"} {
				for _, effect := range append([]corev1.TaintEffect{""}, effects...) {
					tols = append(tols, corev1.Toleration{Key: key, Operator: op, Value: value, Effect: effect})
				}
			}
		}
	}
	logger := klog.Background()
	for _, tol := range tols {
		engine := TolerationsToEngine([]corev1.Toleration{tol})[0]
		for _, taint := range taints {
			want := tol.ToleratesTaint(logger, &taint, false)
			if got := engine.Tolerates(TaintsToEngine([]corev1.Taint{taint})[0]); got != want {
				t.Errorf("toleration %+v, taint %v: engine says %v, Kubernetes %v", tol, taint.ToString(), got, want)
			}
		}
	}
	excludes := func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}
	// Nodes of one and two taints, against pods of one and two tolerations.
	for i := range taints {
		for j := i; j < len(taints); j += 7 {
			node := []corev1.Taint{taints[i], taints[j]}
			for k := 0; k < len(tols); k += 3 {
				pod := []corev1.Toleration{tols[k], tols[(k*11+5)%len(tols)]}
				_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logger, node, pod, excludes, false)
				got := engineExcludes(TaintsToEngine(node), TolerationsToEngine(pod))
				if got != untolerated {
					t.Errorf("node %v, pod %+v: engine excludes %v, scheduler %v", node, pod, got, untolerated)
				}
			}
		}
	}
}

// engineExcludes is the engine's node decision for one pod set: some taint
// that excludes is tolerated by none of its tolerations.
func engineExcludes(taints []admission.Taint, tols []admission.Toleration) bool {
	return slices.ContainsFunc(taints, func(t admission.Taint) bool {
		if t.Effect != admission.TaintNoSchedule && t.Effect != admission.TaintNoExecute {
			return false
		}
		return !slices.ContainsFunc(tols, func(tol admission.Toleration) bool { return tol.Tolerates(t) })
	})
}

func TestTaintsConversion(t *testing.T) {
	reserved := corev1.Taint{Key: "example.com/reserved", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	tol := corev1.Toleration{Key: "example.com/reserved", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	engineTol := admission.Toleration{Key: "example.com/reserved", Operator: admission.TolerationEqual, Value: "true", Effect: admission.TaintNoSchedule}
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"pool template taints", PoolToEngine(&berthv1.CapacityPool{Spec: berthv1.CapacityPoolSpec{Flavor: "h200",
			NodeTemplate: berthv1.NodeTemplate{Taints: []corev1.Taint{reserved}}}}, 0).Taints,
			[]admission.Taint{{Key: "example.com/reserved", Value: "true", Effect: admission.TaintNoSchedule}}},
		{"flavor tolerations", FlavorToEngine(&berthv1.ResourceFlavor{Spec: berthv1.ResourceFlavorSpec{Tolerations: []corev1.Toleration{tol}}}).Tolerations,
			[]admission.Toleration{engineTol}},
		{"pod set tolerations from the template", WorkloadToEngine(&berthv1.Workload{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w"},
			Spec: berthv1.WorkloadSpec{PodSets: []berthv1.PodSet{
				{Name: "main", Count: 1, Template: &berthv1.PodSetTemplate{Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{tol}}}},
				{Name: "bare", Count: 1},
			}}}, QueueRef{}).PodSets, nil},
		{"no taints", TaintsToEngine(nil), []admission.Taint(nil)},
		{"no tolerations", TolerationsToEngine(nil), []admission.Toleration(nil)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if ps, ok := tc.got.([]admission.PodSet); ok {
				if !slices.Equal(ps[0].Tolerations, []admission.Toleration{engineTol}) || ps[1].Tolerations != nil {
					t.Fatalf("pod sets' tolerations %+v, %+v", ps[0].Tolerations, ps[1].Tolerations)
				}
				return
			}
			if fmt.Sprint(tc.got) != fmt.Sprint(tc.want) {
				t.Fatalf("got %+v, want %+v", tc.got, tc.want)
			}
		})
	}
}

// TestForeignHeadroom: pods queued in one ClusterQueue that tolerate the
// headroom taint of another, or of every queue, are marked so on the
// engine's form of their Workload; their own queue's taint, other taints
// and other effects are not.
func TestForeignHeadroom(t *testing.T) {
	const key = berthv1.HeadroomLabel
	cases := []struct {
		name string
		tols []corev1.Toleration
		want string
	}{
		{name: "no tolerations"},
		{name: "its own queue's taint", tols: []corev1.Toleration{{Key: key, Operator: corev1.TolerationOpEqual, Value: "training", Effect: corev1.TaintEffectNoSchedule}}},
		{name: "another key", tols: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}},
		{name: "another queue's taint", tols: []corev1.Toleration{{Key: key, Value: "serving", Effect: corev1.TaintEffectNoSchedule}}, want: "serving"},
		{name: "another queue's taint, any effect", tols: []corev1.Toleration{{Key: key, Operator: corev1.TolerationOpEqual, Value: "serving"}}, want: "serving"},
		{name: "another queue's taint, another effect", tols: []corev1.Toleration{{Key: key, Value: "serving", Effect: corev1.TaintEffectNoExecute}}},
		{name: "the key with Exists", tols: []corev1.Toleration{{Key: key, Operator: corev1.TolerationOpExists}}, want: admission.AnyHeadroom},
		{name: "every taint", tols: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, want: admission.AnyHeadroom},
		{name: "every NoSchedule taint", tols: []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}, want: admission.AnyHeadroom},
		{name: "every NoExecute taint", tols: []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wl := &berthv1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w"}, Spec: berthv1.WorkloadSpec{PodSets: []berthv1.PodSet{
				{Name: "main", Count: 1},
				{Name: "workers", Count: 1, Template: &berthv1.PodSetTemplate{Spec: corev1.PodSpec{Tolerations: tc.tols}}},
			}}}
			if got := WorkloadToEngine(wl, QueueRef{ClusterQueue: "training"}).ForeignHeadroom; got != tc.want {
				t.Errorf("ForeignHeadroom = %q, want %q", got, tc.want)
			}
			if got := WorkloadToEngine(wl, QueueRef{}).ForeignHeadroom; got != "" {
				t.Errorf("without a ClusterQueue, ForeignHeadroom = %q", got)
			}
		})
	}
}
