package commands

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/utils/ptr"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	visv1 "github.com/berth-dev/berth/apis/visibility/v1alpha1"
)

func cond(typ string, status metav1.ConditionStatus, reason berthv1.WorkloadReason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: string(reason), Message: msg}
}

func TestWorkloadStatus(t *testing.T) {
	const (
		yes = metav1.ConditionTrue
		no  = metav1.ConditionFalse
	)
	admission := &berthv1.Admission{ClusterQueue: "gpus"}
	reserved := &berthv1.Admission{ClusterQueue: "gpus", Provisioning: &berthv1.AdmissionProvisioning{ClassName: berthv1.ProvisioningClassAtomicScaleUp}}
	booking := &berthv1.ProvisioningStatus{Attempt: 1, State: berthv1.ProvisioningPending}
	gaveUp := &berthv1.ProvisioningStatus{Attempt: 3, State: berthv1.ProvisioningFailed, GaveUp: true}
	withdrawn := &berthv1.ProvisioningStatus{Attempt: 1, State: berthv1.ProvisioningCancelled}
	cases := []struct {
		name       string
		conds      []metav1.Condition
		admission  *berthv1.Admission
		active     *bool
		prov       *berthv1.ProvisioningStatus
		wantStatus string
		wantReason string
	}{
		{"new, no conditions", nil, nil, nil, nil, statusPending, ""},
		{"waits for quota", []metav1.Condition{cond(berthv1.ConditionQuotaReserved, no, berthv1.ReasonInsufficientQuota, "m"),
			cond(berthv1.ConditionAdmitted, no, berthv1.ReasonPending, "")}, nil, nil, nil, statusPending, "InsufficientQuota"},
		{"admitted", []metav1.Condition{cond(berthv1.ConditionQuotaReserved, yes, berthv1.ReasonQuotaReserved, ""),
			cond(berthv1.ConditionAdmitted, yes, berthv1.ReasonAdmitted, "")}, admission, nil, nil, statusAdmitted, "Admitted"},
		{"booking capacity", []metav1.Condition{cond(berthv1.ConditionQuotaReserved, yes, berthv1.ReasonQuotaReserved, ""),
			cond(berthv1.ConditionAdmitted, no, berthv1.ReasonWaitingForCapacity, "")}, reserved, nil, booking, statusBooking, "WaitingForCapacity"},
		{"being preempted", []metav1.Condition{cond(berthv1.ConditionEvicted, yes, berthv1.ReasonPreempted, "by x"),
			cond(berthv1.ConditionAdmitted, no, berthv1.ReasonEvicted, "")}, admission, nil, nil, statusEvicting, "Preempted"},
		{"requeued after eviction waits again", []metav1.Condition{cond(berthv1.ConditionEvicted, yes, berthv1.ReasonRequeued, ""),
			cond(berthv1.ConditionQuotaReserved, no, berthv1.ReasonPending, "")}, nil, nil, nil, statusPending, "Pending"},
		{"eviction withdrew its booking: queued again", []metav1.Condition{cond(berthv1.ConditionEvicted, yes, berthv1.ReasonPreempted, "by x"),
			cond(berthv1.ConditionQuotaReserved, no, berthv1.ReasonPending, "by x")}, nil, nil, withdrawn, statusPending, "Pending"},
		{"finished beats everything", []metav1.Condition{cond(berthv1.ConditionFinished, yes, berthv1.ReasonSucceeded, "done"),
			cond(berthv1.ConditionAdmitted, yes, berthv1.ReasonAdmitted, "")}, admission, ptr.To(false), nil, statusFinished, "Succeeded"},
		{"deactivated", []metav1.Condition{cond(berthv1.ConditionQuotaReserved, no, berthv1.ReasonDeactivated, "")}, nil, ptr.To(false), nil,
			statusDeactivated, "Deactivated"},
		{"gave up booking", []metav1.Condition{cond(berthv1.ConditionQuotaReserved, no, berthv1.ReasonProvisioningGaveUp, "3 attempts")}, nil, nil, gaveUp,
			statusGaveUp, "ProvisioningGaveUp"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wl := &berthv1.Workload{Spec: berthv1.WorkloadSpec{Active: tc.active},
				Status: berthv1.WorkloadStatus{Conditions: tc.conds, Admission: tc.admission}}
			wl.Status.Provisioning = tc.prov
			status, reason, _ := workloadStatus(wl)
			if status != tc.wantStatus || reason != tc.wantReason {
				t.Errorf("status %s (%s), want %s (%s)", status, reason, tc.wantStatus, tc.wantReason)
			}
		})
	}
}

func TestJobOf(t *testing.T) {
	cases := []struct {
		name string
		wl   berthv1.Workload
		want string
	}{
		{"a job controls it", berthv1.Workload{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "batch/v1", Kind: "Job", Name: "train", Controller: ptr.To(true)}}}}, "job/train"},
		{"a pod group's pods own it", berthv1.Workload{ObjectMeta: metav1.ObjectMeta{
			Labels:          map[string]string{berthv1.JobKeyLabel: "eval"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "eval-0"}}}}, "podgroup/eval"},
		{"made by hand", berthv1.Workload{}, "-"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := jobText(jobOf(&tc.wl)); got != tc.want {
				t.Errorf("jobText = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCellTexts(t *testing.T) {
	gpu8, gpu2 := resource.MustParse("8"), resource.MustParse("2")
	pending := &visv1.PendingWorkload{PositionInClusterQueue: 3, PositionInLocalQueue: 1,
		Shortfalls: []visv1.Shortfall{{Flavor: "h200", Resource: "nvidia.com/gpu", Requested: gpu8, Available: gpu2},
			{Flavor: "a100", Resource: "nvidia.com/gpu", Requested: gpu8, Available: resource.MustParse("0")}},
		Booking: &visv1.Booking{Attempt: 2, State: "Failed", Flavor: "h200", Domain: []string{"zone-a", "rack-1"}}}
	admitted := workloadItem{Admission: &berthv1.Admission{ClusterQueue: "gpus",
		PodSetAssignments: []berthv1.PodSetAssignment{{Name: "main", Count: 2, Flavors: map[corev1.ResourceName]string{"nvidia.com/gpu": "h200", "cpu": "cpu"}}},
		Topology:          &berthv1.TopologyAssignment{Flavor: "h200", Levels: []string{"zone", "rack"}, Values: []string{"zone-a", "rack-2"}}},
		Provisioning: &berthv1.ProvisioningStatus{Attempt: 1, State: berthv1.ProvisioningProvisioned}}
	cases := []struct {
		name, got, want string
	}{
		{"shortfalls", shortfallText(pending.Shortfalls), "h200/nvidia.com/gpu 8>2,a100/nvidia.com/gpu 8>0"},
		{"no shortfall", shortfallText(nil), "-"},
		{"position in the ClusterQueue", positionText(workloadItem{Pending: pending}, false), "3"},
		{"position in the LocalQueue", positionText(workloadItem{Pending: pending}, true), "1"},
		{"not pending", positionText(workloadItem{}, false), "-"},
		{"line unreadable", positionText(workloadItem{PendingUnknown: true}, false), "?"},
		{"placement in a domain", placementText(admitted), "h200 zone-a/rack-2"},
		{"placement by flavors", placementText(workloadItem{Admission: &berthv1.Admission{PodSetAssignments: admitted.Admission.PodSetAssignments}}), "cpu,h200"},
		{"planned booking", placementText(workloadItem{Pending: pending}), "h200 zone-a/rack-1"},
		{"nowhere", placementText(workloadItem{}), "-"},
		{"booking of an admitted one", bookingText(admitted), "Provisioned#1"},
		{"booking of a pending one", bookingText(workloadItem{Pending: pending}), "Failed#2"},
		{"one line", oneLine("a\n  b\tc "), "a b c"},
		{"age", ageText(metav1.NewTime(time.Unix(0, 0)), time.Unix(90, 0)), "90s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
}

func TestSortItems(t *testing.T) {
	item := func(cq, ns, name string, pos int32) workloadItem {
		it := workloadItem{ClusterQueue: cq, Metadata: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if pos >= 0 {
			it.Pending = &visv1.PendingWorkload{PositionInClusterQueue: pos}
		}
		return it
	}
	items := []workloadItem{item("b", "x", "running", -1), item("a", "y", "second", 1), item("a", "x", "admitted", -1),
		item("a", "z", "first", 0), item("", "x", "orphan", -1)}
	sortItems(items)
	var got []string
	for _, it := range items {
		got = append(got, it.Metadata.Name)
	}
	if s := strings.Join(got, ","); s != "orphan,first,second,admitted,running" {
		t.Errorf("order %s", s)
	}
}

// TestWorkloadTable: the wide columns and -A's NAMESPACE column come from
// kubectl's table printer.
func TestWorkloadTable(t *testing.T) {
	now := time.Now()
	items := []workloadItem{{
		Metadata: metav1.ObjectMeta{Namespace: "research", Name: "job-train-1", CreationTimestamp: metav1.NewTime(now.Add(-2 * time.Minute))},
		Job:      visv1.JobReference{Kind: "Job", Name: "train"}, LocalQueue: "team", ClusterQueue: "gpus", Status: statusPending,
		Reason: "InsufficientQuota", Message: "needs\n8 GPUs", Pending: &visv1.PendingWorkload{PositionInClusterQueue: 2},
	}}
	cases := []struct {
		name     string
		opts     printers.PrintOptions
		want     []string
		wantNot  []string
		wantHead string
	}{
		{"narrow", printers.PrintOptions{}, []string{"job-train-1", "job/train", "InsufficientQuota", "2m"}, []string{"needs 8 GPUs", "research"},
			"NAME          JOB         LOCALQUEUE   CLUSTERQUEUE   STATUS    POSITION   REASON              AGE\n"},
		{"wide, all namespaces", printers.PrintOptions{Wide: true, WithNamespace: true}, []string{"research", "needs 8 GPUs"}, nil,
			"NAMESPACE   NAME"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := printers.NewTablePrinter(tc.opts).PrintObj(workloadTable(items, now), &out); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(out.String(), tc.wantHead) {
				t.Errorf("header of\n%s\nwant it to start %q", out.String(), tc.wantHead)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("table lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(out.String(), w) {
					t.Errorf("table has %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestQueueCellTexts(t *testing.T) {
	cases := []struct {
		name, got, want string
	}{
		{"active", activeText([]metav1.Condition{{Type: berthv1.ConditionActive, Status: metav1.ConditionTrue, Reason: "Ready"}}), "Active"},
		{"stopped", activeText([]metav1.Condition{{Type: berthv1.ConditionActive, Status: metav1.ConditionFalse, Reason: "Stopped"}}), "Stopped"},
		{"no condition yet", activeText(nil), "Unknown"},
		{"default stop policy", stopText(""), "None"},
		{"hold", stopText(berthv1.StopPolicyHold), "Hold"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
}
