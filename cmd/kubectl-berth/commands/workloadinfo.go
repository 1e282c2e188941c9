package commands

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	visv1 "github.com/berth-dev/berth/apis/visibility/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// The one-word statuses list and explain give a Workload. They condense
// its conditions (see apis/v1alpha1/conditions.go) into what a user asks:
// does my job run, and if not, is it waiting, stopping or done.
const (
	statusPending     = "Pending"     // waits for quota
	statusBooking     = "Booking"     // holds quota; a ProvisioningRequest books its capacity
	statusAdmitted    = "Admitted"    // may start, or runs
	statusEvicting    = "Evicting"    // berth stops it; it queues again once its pods are gone
	statusFinished    = "Finished"    // the job ended
	statusDeactivated = "Deactivated" // spec.active is false
	statusGaveUp      = "GaveUp"      // maxAttempts bookings failed; not queued again
)

// podGroupKind is the kind a pod group's Workload is shown with: the group
// is no object of its own, its pods own the Workload.
const podGroupKind = "PodGroup"

// workloadItem is one Workload as `list workloads` and `explain` see it:
// the table's columns under stable field names, plus, for a pending one,
// its entry in the visibility API. -o json|yaml prints it as is (in a v1
// List); it is not an API type and has no apiVersion or kind.
type workloadItem struct {
	// Metadata names the Workload (name, namespace, uid, creationTimestamp).
	Metadata metav1.ObjectMeta `json:"metadata"`
	// Job is the object the Workload stands for: the controller owner, or
	// for a pod group kind PodGroup and the group's name.
	Job          visv1.JobReference `json:"job"`
	LocalQueue   string             `json:"localQueue"`
	ClusterQueue string             `json:"clusterQueue,omitempty"`
	// Status is one of Pending, Booking, Admitted, Evicting, Finished,
	// Deactivated, GaveUp; Reason and Message say why (for a pending one,
	// as the visibility API explains it now).
	Status   string `json:"status"`
	Reason   string `json:"reason,omitempty"`
	Message  string `json:"message,omitempty"`
	Priority int32  `json:"priority"`
	// Pending is the visibility API's entry for a pending Workload: its
	// positions, shortfalls, preemption what-if and booking.
	Pending *visv1.PendingWorkload `json:"pending,omitempty"`
	// PendingUnknown is set when the visibility API could not be read for
	// the Workload's LocalQueue: its position is unknown, not absent.
	PendingUnknown bool `json:"pendingUnknown,omitempty"`
	// Admission and Provisioning are the Workload's status: where its gang
	// is placed and its latest capacity booking.
	Admission    *berthv1.Admission          `json:"admission,omitempty"`
	Provisioning *berthv1.ProvisioningStatus `json:"provisioning,omitempty"`
}

// newWorkloadItem builds the item of wl. clusterQueue is the ClusterQueue
// of the Workload's LocalQueue ("" if unknown); pending is the visibility
// API's entry for it, if it listed one.
func newWorkloadItem(wl *berthv1.Workload, clusterQueue string, pending *visv1.PendingWorkload) workloadItem {
	it := workloadItem{
		Metadata: metav1.ObjectMeta{Namespace: wl.Namespace, Name: wl.Name, UID: wl.UID, CreationTimestamp: wl.CreationTimestamp},
		Job:      jobOf(wl), LocalQueue: wl.Spec.QueueName, ClusterQueue: clusterQueue, Priority: wl.Spec.Priority,
		Admission: wl.Status.Admission, Provisioning: wl.Status.Provisioning,
	}
	if a := wl.Status.Admission; a != nil && a.ClusterQueue != "" {
		it.ClusterQueue = a.ClusterQueue
	}
	it.Status, it.Reason, it.Message = workloadStatus(wl)
	if pending != nil {
		// The engine's line is the truth about a pending workload: its
		// reason is what berth would write now, the condition may lag.
		it.Pending = pending
		it.Status, it.Reason, it.Message = statusPending, pending.Reason, pending.Message
	}
	return it
}

// workloadStatus derives a Workload's status, and the reason and message
// of the condition that decides it. The status is the lifecycle's phase
// (lifecycle.PhaseOf, the one definition the controllers use) in the
// words list and explain print, with Deactivated added: a deactivated
// Workload that has not finished reads as such, whatever its phase.
func workloadStatus(wl *berthv1.Workload) (status, reason, message string) {
	phase := lifecycle.PhaseOf(wl)
	qr := lifecycle.Condition(wl, berthv1.ConditionQuotaReserved)
	if phase != lifecycle.Finished && !wl.IsActive() {
		msg := "spec.active is false"
		if qr != nil && qr.Reason == string(berthv1.ReasonDeactivated) && qr.Message != "" {
			msg = qr.Message
		}
		return statusDeactivated, string(berthv1.ReasonDeactivated), msg
	}
	switch phase {
	case lifecycle.Finished:
		return conditionStatus(wl, statusFinished, berthv1.ConditionFinished, "")
	case lifecycle.Evicting:
		return conditionStatus(wl, statusEvicting, berthv1.ConditionEvicted, "")
	case lifecycle.Admitted, lifecycle.Running:
		return conditionStatus(wl, statusAdmitted, berthv1.ConditionAdmitted, "")
	case lifecycle.Reserved:
		return conditionStatus(wl, statusBooking, berthv1.ConditionAdmitted, berthv1.ReasonWaitingForCapacity)
	case lifecycle.GaveUp:
		return conditionStatus(wl, statusGaveUp, berthv1.ConditionQuotaReserved, berthv1.ReasonProvisioningGaveUp)
	}
	if qr != nil {
		return statusPending, qr.Reason, qr.Message
	}
	return conditionStatus(wl, statusPending, berthv1.ConditionAdmitted, "")
}

// conditionStatus is status with the reason and message of the condition
// of type typ, or with reason alone when the Workload has no such
// condition.
func conditionStatus(wl *berthv1.Workload, status, typ string, reason berthv1.WorkloadReason) (string, string, string) {
	if c := lifecycle.Condition(wl, typ); c != nil {
		return status, c.Reason, c.Message
	}
	return status, string(reason), ""
}

// jobOf names the object a Workload stands for: its controller owner, or
// the pod group its pods form.
func jobOf(wl *berthv1.Workload) visv1.JobReference {
	if ref := metav1.GetControllerOf(wl); ref != nil {
		return visv1.JobReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name}
	}
	if key := wl.Labels[berthv1.JobKeyLabel]; key != "" {
		return visv1.JobReference{APIVersion: "v1", Kind: podGroupKind, Name: key}
	}
	return visv1.JobReference{}
}

// jobText writes a job as KIND/NAME, the form explain takes.
func jobText(j visv1.JobReference) string {
	if j.Name == "" {
		return "-"
	}
	return strings.ToLower(j.Kind) + "/" + j.Name
}

// shortfallText writes shortfalls as FLAVOR/RESOURCE REQUESTED>AVAILABLE,
// comma separated.
func shortfallText(s []visv1.Shortfall) string {
	if len(s) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(s))
	for _, f := range s {
		parts = append(parts, fmt.Sprintf("%s/%s %s>%s", f.Flavor, f.Resource, f.Requested.String(), f.Available.String()))
	}
	return strings.Join(parts, ",")
}

// flavorsOf lists the flavors an admission assigned, sorted and once each.
func flavorsOf(a *berthv1.Admission) []string {
	var out []string
	for _, ps := range a.PodSetAssignments {
		for _, f := range ps.Flavors {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	slices.Sort(out)
	return out
}

// placementText is where a gang is placed (admitted) or planned (a pending
// booking): FLAVOR[ DOMAIN], the domain's values joined by "/".
func placementText(it workloadItem) string {
	if a := it.Admission; a != nil {
		if t := a.Topology; t != nil {
			return t.Flavor + " " + strings.Join(t.Values, "/")
		}
		if f := flavorsOf(a); len(f) > 0 {
			return strings.Join(f, ",")
		}
	}
	if it.Pending != nil && it.Pending.Booking != nil {
		b := it.Pending.Booking
		if len(b.Domain) > 0 {
			return b.Flavor + " " + strings.Join(b.Domain, "/")
		}
		if b.Flavor != "" {
			return b.Flavor
		}
	}
	return "-"
}

// bookingText is the state of the latest capacity booking and its attempt.
func bookingText(it workloadItem) string {
	if p := it.Provisioning; p != nil {
		return fmt.Sprintf("%s#%d", p.State, p.Attempt)
	}
	if it.Pending != nil && it.Pending.Booking != nil {
		return fmt.Sprintf("%s#%d", it.Pending.Booking.State, it.Pending.Booking.Attempt)
	}
	return "-"
}

// positionText is a position in a queue's line: "-" when the workload is
// not in it, "?" when the line could not be read.
func positionText(it workloadItem, inLocalQueue bool) string {
	switch {
	case it.Pending != nil && inLocalQueue:
		return fmt.Sprint(it.Pending.PositionInLocalQueue)
	case it.Pending != nil:
		return fmt.Sprint(it.Pending.PositionInClusterQueue)
	case it.PendingUnknown:
		return "?"
	}
	return "-"
}

// ageText is kubectl's AGE of a creation time.
func ageText(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// orNone writes an empty value as "-" so table columns stay aligned.
func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps a message on its table row.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
