package headroom

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// errWaiting is a reason the headroom cannot be kept that its policy's
// Ready condition reports; the policy is looked at again later.
type errWaiting struct{ reason, msg string }

func (e errWaiting) Error() string { return e.reason + ": " + e.msg }

// clusterQueueOf is the ClusterQueue t is admitted from, through its
// LocalQueue.
func clusterQueueOf(ctx context.Context, c client.Reader, namespace string, t target) (*berthv1.ClusterQueue, error) {
	if t.queue == "" {
		return nil, errWaiting{"NotQueued", fmt.Sprintf("the target is not labelled %s: headroom is kept for a queued workload, within its ClusterQueue's quota", berthv1.QueueNameLabel)}
	}
	var lq berthv1.LocalQueue
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: t.queue}, &lq); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil, errWaiting{"QueueNotFound", fmt.Sprintf("LocalQueue %s/%s does not exist", namespace, t.queue)}
		}
		return nil, fmt.Errorf("reading LocalQueue %s/%s: %w", namespace, t.queue, err)
	}
	var cq berthv1.ClusterQueue
	if err := c.Get(ctx, types.NamespacedName{Name: lq.Spec.ClusterQueue}, &cq); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil, errWaiting{"QueueNotFound", fmt.Sprintf("ClusterQueue %s of LocalQueue %s/%s does not exist", lq.Spec.ClusterQueue, namespace, t.queue)}
		}
		return nil, fmt.Errorf("reading ClusterQueue %s: %w", lq.Spec.ClusterQueue, err)
	}
	return &cq, nil
}

// admissible is how many more replicas of t the ClusterQueue's quota —
// its nominal quota plus borrowing limit, over every flavor, of each
// resource a replica asks for that the queue covers — could ever admit
// beyond the replicas t has; -1 when the queue covers none of them.
func admissible(cq *berthv1.ClusterQueue, t target) int32 {
	per := t.replicaRequests()
	limit := int64(-1)
	for name, q := range per {
		if q.IsZero() {
			continue
		}
		var total int64
		covered := false
		for _, rg := range cq.Spec.ResourceGroups {
			for _, f := range rg.Flavors {
				for _, r := range f.Resources {
					if r.Name != name {
						continue
					}
					covered = true
					total += r.NominalQuota.MilliValue()
					if r.BorrowingLimit != nil {
						total += r.BorrowingLimit.MilliValue()
					}
				}
			}
		}
		if !covered {
			continue
		}
		if n := total / q.MilliValue(); limit < 0 || n < limit {
			limit = n
		}
	}
	if limit < 0 {
		return -1
	}
	return int32(max(0, limit-int64(t.replicas)))
}

// sizingPolicy is the policy's sizing in the sizing package's terms.
func sizingPolicy(s berthv1.HeadroomSizing) Policy {
	p := Policy{Mode: Mode(s.Mode), Min: s.Min, Max: s.Max}
	if s.Replicas != nil {
		p.Replicas = *s.Replicas
	}
	if s.Percent != nil {
		p.Percent = *s.Percent
	}
	if d := s.Demand; d != nil {
		p.Demand = DemandRule{Window: d.Window.Duration, Latency: d.ProvisioningLatency.Duration, Percentile: d.Percentile}
		if d.Period != nil {
			p.Demand.Period, p.Demand.Lead = d.Period.Duration, d.ProvisioningLatency.Duration
			if d.Lead != nil {
				p.Demand.Lead = d.Lead.Duration
			}
		}
	}
	return p
}

// observe adds the target's replica count at now to the policy's history,
// keeping what the Demand rule reads, and returns it as a History.
func observe(hp *berthv1.HeadroomPolicy, replicas int32, now time.Time) *History {
	p := sizingPolicy(hp.Spec.Sizing)
	h := &History{keep: p.Demand.Window + p.Demand.Latency}
	if p.Mode != Demand {
		h.keep = time.Nanosecond // nothing but the last count is needed
	}
	for _, o := range hp.Status.History {
		h.Observe(o.Time.Time, o.Replicas)
	}
	h.Observe(now, replicas)
	hp.Status.History = hp.Status.History[:0]
	for _, o := range h.obs {
		hp.Status.History = append(hp.Status.History, berthv1.HeadroomObservation{Time: metaTime(o.At), Replicas: o.Replicas})
	}
	// The API bounds the list; a window of a week of changes every few
	// minutes could exceed it: the oldest go first.
	if n := len(hp.Status.History); n > maxHistory {
		hp.Status.History = slices.Delete(hp.Status.History, 0, n-maxHistory)
	}
	return h
}

// maxHistory is the status's bound on the history.
const maxHistory = 512

// spread places size replicas over the domains, one at a time in name
// order, so that a domain out of stock holds as little of it as possible.
func spread(size int32, domains []string) []berthv1.HeadroomDomain {
	if len(domains) == 0 || size <= 0 {
		return nil
	}
	out := make([]berthv1.HeadroomDomain, min(int(size), len(domains)))
	for i := range out {
		out[i].Name = domains[i]
	}
	for i := range size {
		out[int(i)%len(out)].Replicas++
	}
	return out
}
