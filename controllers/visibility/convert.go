package visibility

import (
	"context"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	visv1 "github.com/berth-dev/berth/apis/visibility/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/controllers/scheduler"
)

// summary turns an engine page into the API's object, naming each
// workload's job from the cached Workload. viewer is the namespace of a
// LocalQueue's line ("" for a ClusterQueue's): workloads of other
// namespaces that the entries mention are not named to it.
func (p *pending) summary(ctx context.Context, page admission.PendingPage, viewer string) (runtime.Object, error) {
	out := &visv1.PendingWorkloadsSummary{
		Total: int64(page.Total),
		FairShare: visv1.FairShare{Cohort: page.FairShare.Cohort, WeightedShare: weightedShare(page.FairShare.DominantResourceShare),
			ClusterQueuesAhead: int32(page.FairShare.TenantsAhead)},
		Items: make([]visv1.PendingWorkload, 0, len(page.Items)),
	}
	for _, it := range page.Items {
		item := pendingItem(it)
		if viewer != "" {
			redact(&item, it.Explanation.Mentions, viewer)
		}
		wl := &berthv1.Workload{}
		if err := p.reader.Get(ctx, client.ObjectKey{Namespace: it.Key.Namespace, Name: it.Key.Name}, wl); err == nil {
			item.CreationTimestamp, item.UID = wl.CreationTimestamp, wl.UID
			if ref := metav1.GetControllerOf(wl); ref != nil {
				item.Job = visv1.JobReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name}
			}
		}
		out.Items = append(out.Items, item)
	}
	return out, nil
}

func pendingItem(it admission.PendingWorkload) visv1.PendingWorkload {
	ex := it.Explanation
	item := visv1.PendingWorkload{
		ObjectMeta: metav1.ObjectMeta{Namespace: it.Key.Namespace, Name: it.Key.Name},
		LocalQueue: it.LocalQueue, Priority: it.Priority,
		PositionInClusterQueue: int32(it.PositionInClusterQueue), PositionInLocalQueue: int32(it.PositionInLocalQueue),
		Reason: string(ex.Reason), Message: ex.Message,
		Preemption: visv1.Preemption{Possible: ex.Preemption.Possible, Message: ex.Preemption.Message},
	}
	for _, s := range ex.Shortfalls {
		item.Shortfalls = append(item.Shortfalls, visv1.Shortfall{Flavor: s.Flavor, Resource: string(s.Resource),
			Requested: lifecycle.Quantity(s.Resource, s.Requested), Available: lifecycle.Quantity(s.Resource, s.Available)})
	}
	for _, v := range ex.Preemption.Victims {
		item.Preemption.Victims = append(item.Preemption.Victims, v.Victim.String())
	}
	if bk := it.Booking; bk != nil {
		b := &visv1.Booking{Attempt: bk.Attempt, Failures: bk.Failures, State: string(bk.State), Flavor: bk.Flavor}
		if bk.Domain != nil {
			b.Domain = bk.Domain.Domain
		}
		for _, d := range bk.FailedDomains {
			b.FailedDomains = append(b.FailedDomains, d.Domain)
		}
		if bk.RetryAfter > 0 {
			t := metav1.NewTime(time.Unix(0, bk.RetryAfter))
			b.RetryAfter = &t
		}
		item.Booking = b
	}
	return item
}

// weightedShare writes the engine's share as a decimal ("+Inf" when a queue
// of weight 0 borrows).
func weightedShare(drs int64) string {
	return strconv.FormatFloat(scheduler.WeightedShare(drs), 'f', -1, 64)
}

// Redacted stands in a LocalQueue's line for a workload of another
// namespace: the line is readable by anyone who may read the LocalQueue,
// and the names of other teams' workloads are not theirs to see. It is
// admission.Redacted: every text berth writes for a namespace to read
// follows the one rule, admission.Redact.
const Redacted = admission.Redacted

// redact replaces, in an entry of a LocalQueue's line in namespace viewer,
// the names of the mentioned workloads of other namespaces — the StrictFIFO
// head it waits behind, preemption victims, a preemptor it waits for — with
// Redacted.
func redact(item *visv1.PendingWorkload, mentions []admission.WorkloadKey, viewer string) {
	item.Message = admission.Redact(item.Message, mentions, viewer)
	item.Preemption.Message = admission.Redact(item.Preemption.Message, mentions, viewer)
	for _, k := range mentions {
		for i, v := range item.Preemption.Victims {
			if v == k.String() {
				item.Preemption.Victims[i] = admission.Shown(k, viewer)
			}
		}
	}
}
