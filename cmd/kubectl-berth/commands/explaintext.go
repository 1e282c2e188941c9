package commands

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/printers"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	visv1 "github.com/berth-dev/berth/apis/visibility/v1alpha1"
)

// explanation writes "Key:<tab>value" lines, aligned by kubectl's tab
// writer; a line with an empty key continues the one above.
type explanation struct {
	w   io.Writer
	err error
}

func (x *explanation) line(key, format string, args ...any) {
	if x.err != nil {
		return
	}
	if key != "" {
		key += ":"
	}
	_, x.err = fmt.Fprintf(x.w, "%s\t%s\n", key, fmt.Sprintf(format, args...))
}

// writeExplanation says in plain words where one Workload stands.
func writeExplanation(w io.Writer, ex explained, now time.Time) error {
	tw := printers.GetNewTabWriter(w)
	x := &explanation{w: tw}
	it := ex.item
	of := jobText(it.Job)
	if ex.replica != "" {
		of += " (" + ex.replica + ")"
	}
	x.line("Workload", "%s/%s, of %s", it.Metadata.Namespace, it.Metadata.Name, of)
	x.line("Queue", "%s", queueText(it))
	switch it.Status {
	case statusPending:
		explainPending(x, ex, now)
	case statusBooking:
		x.line("Status", "Booking for %s: it holds quota of ClusterQueue %s and a ProvisioningRequest books its capacity; the job starts once it is provisioned",
			ageText(it.Metadata.CreationTimestamp, now), orNone(it.ClusterQueue))
		explainPlacement(x, it)
	case statusAdmitted:
		x.line("Status", "Admitted: it holds quota of ClusterQueue %s and its gang may run", orNone(it.ClusterQueue))
		explainPlacement(x, it)
	case statusEvicting:
		x.line("Status", "Evicting (%s): berth stops its job; it queues again once its pods are gone", it.Reason)
		if it.Message != "" {
			x.line("", "%s", it.Message)
		}
	case statusFinished:
		x.line("Status", "Finished (%s): its quota is released; nothing to do", it.Reason)
		if it.Message != "" {
			x.line("", "%s", it.Message)
		}
	case statusDeactivated:
		x.line("Status", "Deactivated: %s, so it is not queued (if it was admitted, it was evicted)", it.Message)
		x.line("To run it", "kubectl berth activate workload %s -n %s", it.Metadata.Name, it.Metadata.Namespace)
	case statusGaveUp:
		x.line("Status", "GaveUp (%s): every booking of its capacity failed; berth queues it no more", it.Reason)
		if it.Message != "" {
			x.line("", "%s", it.Message)
		}
		x.line("To run it", "delete the Workload and the job's controller makes a new one that queues again: kubectl delete workloads.berth.dev %s -n %s",
			it.Metadata.Name, it.Metadata.Namespace)
	}
	if x.err != nil {
		return x.err
	}
	return tw.Flush()
}

func queueText(it workloadItem) string {
	if it.ClusterQueue == "" {
		return fmt.Sprintf("LocalQueue %s (not found, or not readable: its ClusterQueue is unknown)", orNone(it.LocalQueue))
	}
	return fmt.Sprintf("LocalQueue %s, ClusterQueue %s", it.LocalQueue, it.ClusterQueue)
}

// explainPending says where a pending Workload stands in line, why it
// waits and what would let it run.
func explainPending(x *explanation, ex explained, now time.Time) {
	it := ex.item
	x.line("Status", "Pending for %s", ageText(it.Metadata.CreationTimestamp, now))
	switch p := it.Pending; {
	case ex.lineErr != nil:
		x.line("Position", "unknown: %v", ex.lineErr)
	case p != nil && ex.line != nil:
		x.line("Position", "%d in ClusterQueue %s (%s), %d in LocalQueue %s (of %d pending there)",
			p.PositionInClusterQueue, it.ClusterQueue, aheadText(p.PositionInClusterQueue),
			p.PositionInLocalQueue, it.LocalQueue, ex.line.Total)
	case ex.line != nil:
		x.line("Position", "none: it is not in ClusterQueue %s's line (held, or about to be queued again)", it.ClusterQueue)
	}
	reason := it.Reason
	if reason == "" {
		reason = "not known yet (berth gives it once an admission cycle considered the workload)"
	}
	if it.Message != "" {
		reason += ": " + it.Message
	}
	x.line("Why it waits", "%s", reason)
	if hint := pendingHint(it); hint != "" {
		x.line("To run it", "%s", hint)
	}
	if p := it.Pending; p != nil {
		explainShortfalls(x, p)
	}
	if ex.line != nil {
		x.line("Fair share", "%s", fairShareText(it.ClusterQueue, ex.line.FairShare))
	}
	if p := it.Pending; p != nil && p.Booking != nil {
		x.line("Booking", "%s", pendingBookingText(p.Booking))
	} else if pr := it.Provisioning; pr != nil {
		x.line("Booking", "%s", provisioningText(pr))
	}
}

func aheadText(pos int32) string {
	switch pos {
	case 0:
		return "it is admitted next"
	case 1:
		return "1 pending workload is admitted before it"
	}
	return fmt.Sprintf("%d pending workloads are admitted before it", pos)
}

// pendingHint is what to do about a reason only a person can fix.
func pendingHint(it workloadItem) string {
	ns := it.Metadata.Namespace
	switch berthv1.WorkloadReason(it.Reason) {
	case berthv1.ReasonLocalQueueStopped:
		return fmt.Sprintf("resume its LocalQueue: kubectl berth resume localqueue %s -n %s", it.LocalQueue, ns)
	case berthv1.ReasonClusterQueueStopped:
		return fmt.Sprintf("resume its ClusterQueue: kubectl berth resume clusterqueue %s", orNone(it.ClusterQueue))
	case berthv1.ReasonLocalQueueNotFound:
		return fmt.Sprintf("create the LocalQueue: kubectl berth create localqueue %s -n %s --clusterqueue CLUSTERQUEUE", it.LocalQueue, ns)
	case berthv1.ReasonClusterQueueNotFound:
		return "create the ClusterQueue its LocalQueue names: kubectl berth create clusterqueue"
	case berthv1.ReasonExceedsMaxQuota, berthv1.ReasonExceedsDomainCapacity:
		return "it never fits as it is: ask for less, or have the ClusterQueue's quota (or the domain's capacity) raised"
	case berthv1.ReasonNoMatchingFlavor:
		return "its pods' node selector rules out every flavor of its ClusterQueue: change the selector, or have a flavor with matching nodeLabels added"
	}
	return ""
}

// explainShortfalls says, per flavor tried, what does not fit, and what
// preempting would take.
func explainShortfalls(x *explanation, p *visv1.PendingWorkload) {
	if len(p.Shortfalls) == 0 && p.Preemption.Message == "" && len(p.Preemption.Victims) == 0 {
		return
	}
	key := "What would let it run"
	for _, s := range p.Shortfalls {
		x.line(key, "flavor %s: needs %s %s, %s available", s.Flavor, s.Requested.String(), s.Resource, s.Available.String())
		key = ""
	}
	switch pre := p.Preemption; {
	case pre.Possible && len(pre.Victims) > 0:
		x.line(key, "preemption: possible, evicting %s", strings.Join(pre.Victims, ", "))
	case pre.Possible:
		x.line(key, "preemption: possible%s", prefixed(": ", pre.Message))
	default:
		x.line(key, "preemption: not possible%s", prefixed(": ", pre.Message))
	}
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

// fairShareText is a ClusterQueue's standing in its cohort.
func fairShareText(cq string, fs visv1.FairShare) string {
	if fs.Cohort == "" {
		return fmt.Sprintf("ClusterQueue %s is in no cohort: it neither borrows nor lends", cq)
	}
	ahead := fmt.Sprintf("%d ClusterQueues with pending work are served before it", fs.ClusterQueuesAhead)
	if fs.ClusterQueuesAhead == 1 {
		ahead = "1 ClusterQueue with pending work is served before it"
	}
	return fmt.Sprintf("ClusterQueue %s has weighted share %s in cohort %s; %s", cq, fs.WeightedShare, fs.Cohort, ahead)
}

// explainPlacement says where an admitted (or booking) gang is placed and
// what capacity it booked.
func explainPlacement(x *explanation, it workloadItem) {
	if a := it.Admission; a != nil {
		key := "Placement"
		for _, ps := range a.PodSetAssignments {
			x.line(key, "pod set %s: %s on %s", ps.Name, plural(ps.Count, "pod"), flavorAssignmentText(ps.Flavors))
			key = ""
		}
		if t := a.Topology; t != nil {
			x.line("Topology", "one domain of flavor %s: %s", t.Flavor, domainText(t))
		}
		if p := a.Provisioning; p != nil && len(p.NewNodes) > 0 {
			var nodes []string
			for _, n := range p.NewNodes {
				nodes = append(nodes, fmt.Sprintf("%d of CapacityPool %s", n.Nodes, n.Pool))
			}
			x.line("New nodes", "%s", strings.Join(nodes, ", "))
		}
	}
	if p := it.Provisioning; p != nil {
		x.line("Booking", "%s", provisioningText(p))
	}
}

// flavorAssignmentText is a pod set's flavors, "h200 (nvidia.com/gpu,
// cpu)", one flavor at a time.
func flavorAssignmentText(flavors map[corev1.ResourceName]string) string {
	byFlavor := map[string][]string{}
	for r, f := range flavors {
		byFlavor[f] = append(byFlavor[f], string(r))
	}
	names := make([]string, 0, len(byFlavor))
	for f := range byFlavor {
		names = append(names, f)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, f := range names {
		sort.Strings(byFlavor[f])
		parts = append(parts, fmt.Sprintf("flavor %s (%s)", f, strings.Join(byFlavor[f], ", ")))
	}
	if len(parts) == 0 {
		return "no flavor"
	}
	return strings.Join(parts, ", ")
}

// domainText writes a topology domain as level=value pairs.
func domainText(t *berthv1.TopologyAssignment) string {
	parts := make([]string, 0, len(t.Levels))
	for i, l := range t.Levels {
		if i < len(t.Values) {
			parts = append(parts, l+"="+t.Values[i])
		}
	}
	return strings.Join(parts, ", ")
}

// provisioningText is a Workload's latest booking, from its status.
func provisioningText(p *berthv1.ProvisioningStatus) string {
	s := fmt.Sprintf("attempt %d, %s", p.Attempt, p.State)
	if p.RequestName != "" {
		s += fmt.Sprintf(", ProvisioningRequest %s", p.RequestName)
	}
	if p.ClassName != "" {
		s += fmt.Sprintf(" (class %s)", p.ClassName)
	}
	if p.Topology != nil {
		s += ", for the domain " + domainText(p.Topology)
	}
	if p.Failures > 0 {
		s += fmt.Sprintf("; %d failed in a row", p.Failures)
	}
	if p.RetryAfter != nil {
		s += "; next attempt after " + p.RetryAfter.UTC().Format(time.RFC3339)
	}
	return s + prefixed(": ", p.Message)
}

// pendingBookingText is a pending Workload's latest booking, as the
// visibility API has it.
func pendingBookingText(b *visv1.Booking) string {
	s := fmt.Sprintf("attempt %d, %s", b.Attempt, b.State)
	if b.Flavor != "" {
		s += ", flavor " + b.Flavor
	}
	if len(b.Domain) > 0 {
		s += ", domain " + strings.Join(b.Domain, "/")
	}
	if b.Failures > 0 {
		s += fmt.Sprintf("; %d failed in a row", b.Failures)
	}
	if len(b.FailedDomains) > 0 {
		var failed []string
		for _, d := range b.FailedDomains {
			failed = append(failed, strings.Join(d, "/"))
		}
		s += "; avoids the failed domains " + strings.Join(failed, ", ")
	}
	if b.RetryAfter != nil {
		s += "; next attempt after " + b.RetryAfter.UTC().Format(time.RFC3339)
	}
	return s
}

// plural writes n things, "1 pod" or "4 pods".
func plural(n int32, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
