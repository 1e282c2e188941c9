package commands

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// TestHeadroomTable: each policy's row says what is kept and available,
// how and why not, and -o wide adds the per-domain split.
func TestHeadroomTable(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	created := metav1.NewTime(now.Add(-2 * time.Hour))
	policies := []berthv1.HeadroomPolicy{
		{ObjectMeta: metav1.ObjectMeta{Name: "chat", Namespace: "serving", CreationTimestamp: created},
			Spec: berthv1.HeadroomPolicySpec{TargetRef: berthv1.HeadroomTarget{Kind: "Deployment", Name: "chat"}, Sizing: berthv1.HeadroomSizing{Mode: berthv1.HeadroomDemand}},
			Status: berthv1.HeadroomPolicyStatus{ClusterQueue: "serving", Replicas: 8, DesiredReplicas: 3, AvailableReplicas: 2, Mechanism: "CapacityBuffer",
				Domains:    []berthv1.HeadroomDomain{{Name: "r1", Replicas: 2, Available: 2}, {Name: "r2", Replicas: 1}},
				Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Kept"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "embed", Namespace: "serving", CreationTimestamp: created},
			Spec:   berthv1.HeadroomPolicySpec{TargetRef: berthv1.HeadroomTarget{Kind: "LeaderWorkerSet", Name: "embed"}, Sizing: berthv1.HeadroomSizing{Mode: berthv1.HeadroomFixed}},
			Status: berthv1.HeadroomPolicyStatus{Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "NoHeadroomNodes"}}}},
	}
	for _, tc := range []struct {
		wide bool
		want []string
	}{
		{want: []string{"chat    Deployment/chat         serving        Demand   3      2           CapacityBuffer   Kept              120m",
			"embed   LeaderWorkerSet/embed   -              Fixed    0      0           -                NoHeadroomNodes   120m"}},
		{wide: true, want: []string{"8          r1=2/2,r2=1/0", "0          -"}},
	} {
		var out bytes.Buffer
		p := printers.NewTablePrinter(printers.PrintOptions{Wide: tc.wide})
		if err := p.PrintObj(headroomTable(policies, now), &out); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("wide=%t: the table lacks %q:\n%s", tc.wide, w, out.String())
			}
		}
	}
}
