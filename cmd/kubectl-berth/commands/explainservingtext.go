package commands

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"k8s.io/cli-runtime/pkg/printers"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// writeExplanations writes the explanation of each Workload, after, for a
// Deployment or StatefulSet (set not nil), a header that sums the replicas
// up: a set of 30 replicas is 30 explanations, and the header says at a
// glance how many run and why the others wait.
func writeExplanations(w io.Writer, set *servingSet, all []explained, now time.Time) error {
	if set != nil {
		if err := writeServingHeader(w, set, all); err != nil {
			return fmt.Errorf("writing the summary of %s: %w", jobText(set.ref), err)
		}
	}
	for i := range all {
		if i > 0 || set != nil {
			if _, err := fmt.Fprintln(w); err != nil {
				return fmt.Errorf("writing the explanation: %w", err)
			}
		}
		if err := writeExplanation(w, all[i], now); err != nil {
			return fmt.Errorf("writing the explanation: %w", err)
		}
	}
	return nil
}

// writeServingHeader sums up a Deployment's or StatefulSet's replicas:
// how they are queued, how many are wanted, admitted and pending, the
// pods berth does not queue, and a Deployment's rolling update.
func writeServingHeader(w io.Writer, s *servingSet, all []explained) error {
	tw := printers.GetNewTabWriter(w)
	x := &explanation{w: tw}
	x.line(s.ref.Kind, "%s/%s, queued in LocalQueue %s; %s", s.namespace, s.ref.Name, s.queue, gangText(s))
	x.line("Replicas", "%d wanted, %s; Workloads: %s", s.wanted, plural(int32(s.pods), "live pod"), workloadCounts(all))
	if len(all) == 0 {
		x.line("", "%s", noWorkloadText(s))
	}
	if s.recorded > 0 {
		x.line("", "%s without a Workload: admitted at once, each admission recorded on the replica's pod (%s), for one write per replica",
			pluralVerb(s.recorded, "replica runs", "replicas run"), berthv1.AdmissionRecordAnnotation)
	}
	if s.waiting > 0 {
		x.line("", "%s in the queue without a Workload: berth writes nothing for a replica until it is admitted, and explains each from the queue below",
			pluralVerb(s.waiting, "replica waits", "replicas wait"))
	}
	if s.unqueued > 0 {
		x.line("", "%s created before the %s was labelled %s: not queued, outside the queue's quota until replaced",
			plural(int32(s.unqueued), "pod"), s.ref.Kind, berthv1.QueueNameLabel)
	}
	if s.unseen > 0 {
		x.line("", "%s released but on neither a Workload nor a record berth counts (%s on a pod whose %s label is its own UID): kubectl get pod -o yaml shows how",
			pluralVerb(s.unseen, "pod is", "pods are"), berthv1.AdmissionRecordAnnotation, berthv1.WorkloadLabel)
	}
	if r := s.rollout; r != nil {
		x.line("Rollout", "%s", rolloutText(r))
		x.line("", "%s", swapText(r))
	}
	if x.err != nil {
		return x.err
	}
	return tw.Flush()
}

// gangText says how berth queues the object's replicas.
func gangText(s *servingSet) string {
	switch {
	case s.wholeSet:
		return fmt.Sprintf("the whole set is one gang (%s: %s) with one Workload, owned by the StatefulSet", berthv1.GangAnnotation, berthv1.GangSet)
	case s.ref.Kind == "StatefulSet":
		return "each ordinal's pod is a gang of one, queued and admitted on its own: each is explained"
	}
	return "each replica's pod is a gang of one, queued and admitted on its own: each is explained"
}

// noWorkloadText says why a queued object has no Workload.
func noWorkloadText(s *servingSet) string {
	switch {
	case s.wanted == 0:
		return "none: it is scaled to zero, and holds no quota"
	case s.wholeSet:
		return fmt.Sprintf("none yet: berth queues the set once all its %d pods exist (podManagementPolicy Parallel creates them at once)", s.wanted)
	}
	return fmt.Sprintf("none yet: no replica is queued (kubectl get pods -n %s shows whether its pods exist)", s.namespace)
}

// workloadStatusWords are the statuses a header counts, in the order it
// says them, with the words it uses.
func workloadStatusWords() []struct{ status, words string } {
	return []struct{ status, words string }{
		{statusAdmitted, "admitted"}, {statusPending, "pending"}, {statusBooking, "booking capacity"},
		{statusEvicting, "evicting"}, {statusFinished, "finished"}, {statusDeactivated, "deactivated"}, {statusGaveUp, "gave up"},
	}
}

// workloadCounts counts the Workloads by status, "3 admitted, 2 pending
// (InsufficientQuota)"; the pending ones with their most common reason.
func workloadCounts(all []explained) string {
	if len(all) == 0 {
		return "none"
	}
	n := map[string]int{}
	for _, ex := range all {
		n[ex.item.Status]++
	}
	var parts []string
	for _, s := range workloadStatusWords() {
		if n[s.status] == 0 && s.status != statusAdmitted && s.status != statusPending {
			continue
		}
		part := fmt.Sprintf("%d %s", n[s.status], s.words)
		if s.status == statusPending && n[s.status] > 0 {
			part += " (" + pendingReasonText(all, n[s.status]) + ")"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}

// pendingReasonText is the most common reason of the pending Workloads
// (the first by name among equals), and how many share it.
func pendingReasonText(all []explained, pending int) string {
	byReason := map[string]int{}
	for _, ex := range all {
		if ex.item.Status == statusPending {
			r := ex.item.Reason
			if r == "" {
				r = "reason not known yet"
			}
			byReason[r]++
		}
	}
	reasons := make([]string, 0, len(byReason))
	for r := range byReason {
		reasons = append(reasons, r)
	}
	slices.SortFunc(reasons, func(a, b string) int {
		if byReason[a] != byReason[b] {
			return byReason[b] - byReason[a]
		}
		return strings.Compare(a, b)
	})
	top := reasons[0]
	switch {
	case pending == 1:
		return top
	case byReason[top] == pending:
		return "all " + top
	}
	return fmt.Sprintf("most %s: %d", top, byReason[top])
}

// rolloutText says how far a Deployment's rolling update is.
func rolloutText(r *rolloutState) string {
	rs := "no ReplicaSet of the Deployment's revision yet"
	if r.newRS != "" {
		rs = "ReplicaSet " + r.newRS
	}
	s := fmt.Sprintf("under way to revision %s (%s): %d of %d live pods are new", orNone(r.revision), rs, r.updated, r.total)
	if r.paused {
		s += "; paused"
	}
	return s
}

// swapText says whether berth's rollout swap is under way, and if not,
// when it would be.
func swapText(r *rolloutState) string {
	if sw := r.swap; sw != nil {
		donor := map[string]string{
			"gone":        "which berth deleted",
			"terminating": "which berth deleted and is terminating",
			"running":     "which berth deletes next",
		}[sw.donorState]
		return fmt.Sprintf("swap under way (%s): new replica %s, gated, is next in line for the quota of old replica %s, %s",
			berthv1.SwapAnnotation, sw.surge, sw.donor, donor)
	}
	switch {
	case r.recreate:
		return "no swap: the Recreate strategy deletes the old pods first"
	case r.paused:
		return "no swap while the rollout is paused"
	}
	return "no swap under way: berth swaps an old replica for a new one when a new replica waits with InsufficientQuota"
}

// pluralVerb is "1 pod has" or "3 pods have".
func pluralVerb(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
