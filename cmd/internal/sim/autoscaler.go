package sim

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
)

// Reasons cluster-autoscaler writes on a request's conditions.
const (
	reasonProvisioned = "CapacityIsProvisioned"
	reasonFound       = "CapacityIsFound"
	reasonNotFound    = "CapacityIsNotFound"
	reasonExpired     = "CapacityReservationTimeExpired"
	// groupBackoff is how long cluster-autoscaler leaves a node group alone
	// after it failed to grow (--initial-node-group-backoff-duration).
	groupBackoff = 5 * time.Minute
)

// request is a ProvisioningRequest as the autoscaler model sees it: the
// pods of one gang (count, per-pod requests, the node selector of its
// templates) and the conditions it answers with.
type request struct {
	obj      autoscalingv1.ProvisioningRequest
	job      *job
	attempt  int32
	scaleUp  bool
	pods     int32
	requests amounts
	selector map[string]string
	// due is when the autoscaler looks at the request next; backoff the
	// wait after the next "no capacity".
	due     time.Duration
	backoff time.Duration
	// reserved is the capacity the request books on existing nodes;
	// nodes the nodes created for it.
	reserved map[*node]*amounts
	nodes    []*node
	done     bool
}

// condition is the request's condition of type t, nil if absent.
func (r *request) condition(t string) *metav1.Condition {
	return meta.FindStatusCondition(r.obj.Status.Conditions, t)
}

// autoscaler models cluster-autoscaler: its loop serves one
// ProvisioningRequest per scan (best-effort-atomic-scale-up: one node group
// holds the whole gang, free matching nodes first; check-capacity: free
// nodes only), scales node groups for unschedulable pods that consume no
// request (least-waste expander, one scale-up per loop, unaware of gangs),
// and removes nodes empty for its scale-down delay.
type autoscaler struct {
	model    AutoscalerModel
	c        *cluster
	q        *eventQueue
	rng      *rand.Rand
	requests []*request
	// scanAt is the next scan already scheduled (-1: none).
	scanAt time.Duration
	// answered hears every change of a request's conditions.
	answered func(r *request, now time.Duration)
	// created counts the nodes the autoscaler created.
	created int
	// logf writes the run's log.
	logf func(now time.Duration, format string, args ...any)
	// podsDirty says the unschedulable pods or the room to grow changed
	// since the last scale-up for pods was considered.
	podsDirty bool
}

func newAutoscaler(m AutoscalerModel, c *cluster, q *eventQueue, rng *rand.Rand) *autoscaler {
	return &autoscaler{model: m, c: c, q: q, rng: rng, scanAt: -1}
}

// submit queues a request; it is looked at in the next scan.
func (a *autoscaler) submit(r *request, now time.Duration) {
	r.due = now
	r.backoff = time.Duration(a.model.InitialBackoff)
	meta.SetStatusCondition(&r.obj.Status.Conditions, metav1.Condition{Type: autoscalingv1.Accepted, Status: metav1.ConditionTrue,
		Reason: "Accepted", LastTransitionTime: metav1.NewTime(epoch.Add(now))})
	a.requests = append(a.requests, r)
	a.wake(now)
}

// cancel forgets a request (its workload's attempt ended, or the
// workload is gone): the capacity it booked is free again.
func (a *autoscaler) cancel(r *request) {
	if r == nil || r.done {
		return
	}
	r.done = true
	a.release(r)
	a.requests = slices.DeleteFunc(a.requests, func(x *request) bool { return x == r })
}

// wake makes sure a scan runs at the next scan tick after now.
func (a *autoscaler) wake(now time.Duration) {
	iv := time.Duration(a.model.ScanInterval)
	next := (now/iv + 1) * iv
	if a.scanAt >= 0 && a.scanAt <= next {
		return
	}
	a.scanAt = next
	a.q.at(next, a.scan)
}

// scan is one loop of the autoscaler.
func (a *autoscaler) scan(now time.Duration) {
	a.scanAt = -1
	more := a.serveOne(now)
	if a.scaleUpForPods(now) {
		more = true
	}
	if more {
		a.wake(now)
	}
}

// serveOne answers the first due request; it says whether any request
// still waits for an answer.
func (a *autoscaler) serveOne(now time.Duration) bool {
	waiting := false
	for _, r := range a.requests {
		if r.condition(autoscalingv1.Provisioned) != nil && r.condition(autoscalingv1.Provisioned).Status == metav1.ConditionTrue {
			continue
		}
		if r.due > now {
			waiting = true
			continue
		}
		a.answer(r, now)
		return true
	}
	return waiting
}

// answer provisions r, or says no capacity was found and retries later.
func (a *autoscaler) answer(r *request, now time.Duration) {
	onFree, left := a.placeOnFree(r, r.pods)
	var g *group
	var count int32
	if left > 0 && r.scaleUp {
		g, count = a.bestGroupFor(r.selector, r.requests, left, nil, now)
	}
	at := metav1.NewTime(epoch.Add(now))
	if left > 0 && (g == nil || g.stockedOut(now)) {
		if g != nil {
			g.backoffUntil = now + groupBackoff
		}
		meta.SetStatusCondition(&r.obj.Status.Conditions, metav1.Condition{Type: autoscalingv1.Provisioned, Status: metav1.ConditionFalse,
			Reason: reasonNotFound, Message: "no node group can hold the request", LastTransitionTime: at})
		r.due = now + r.backoff
		r.backoff = min(2*r.backoff, time.Duration(a.model.MaxBackoff))
		a.logf(now, "autoscaler: %s: no capacity for %d pods (%v); retry at %s", r.obj.Name, left, r.selector, r.due)
		a.answered(r, now)
		return
	}
	r.reserved = onFree
	for n, amt := range onFree {
		n.caReserved.add(amt, 1)
	}
	reason := reasonFound
	for range count {
		n := a.createNode(g, now, r.job.spec.ID)
		n.booked = r.obj.Name // booked for the request until it expires
		r.nodes = append(r.nodes, n)
		reason = reasonProvisioned
	}
	a.logf(now, "autoscaler: %s: %s, %d new nodes", r.obj.Name, reason, count)
	meta.SetStatusCondition(&r.obj.Status.Conditions, metav1.Condition{Type: autoscalingv1.Provisioned, Status: metav1.ConditionTrue,
		Reason: reason, Message: "capacity is provisioned", LastTransitionTime: at})
	a.answered(r, now)
	a.q.at(now+time.Duration(a.model.BookingExpiry), func(t time.Duration) { a.expire(r, t) })
}

// expire ends r's booking.
func (a *autoscaler) expire(r *request, now time.Duration) {
	if r.done {
		return
	}
	a.release(r)
	meta.SetStatusCondition(&r.obj.Status.Conditions, metav1.Condition{Type: autoscalingv1.BookingExpired, Status: metav1.ConditionTrue,
		Reason: reasonExpired, Message: "the booking expired", LastTransitionTime: metav1.NewTime(epoch.Add(now))})
	a.answered(r, now)
}

// release returns what r booked.
func (a *autoscaler) release(r *request) {
	for n, amt := range r.reserved {
		n.caReserved.add(amt, -1)
	}
	r.reserved = nil
	for _, n := range r.nodes {
		if n.booked == r.obj.Name {
			n.booked = ""
			if n.pods == 0 && n.ready {
				a.armScaleDown(n, n.emptySince)
			}
		}
	}
}

// placeOnFree places up to count pods of r on ready nodes' capacity that is
// neither used nor booked, and returns what it took per node and how many
// pods are left.
func (a *autoscaler) placeOnFree(r *request, count int32) (map[*node]*amounts, int32) {
	took := map[*node]*amounts{}
	probe := &pod{requests: r.requests, selector: r.selector}
	for _, n := range a.c.sorted {
		if count == 0 {
			break
		}
		if !probe.matchesLabels(n) || (n.booked != "" && n.booked != r.obj.Name) {
			continue // not its labels, or booked for another request
		}
		free := n.free
		free.add(&n.caReserved, -1)
		for count > 0 && free.fits(&r.requests) {
			free.add(&r.requests, -1)
			if took[n] == nil {
				took[n] = &amounts{}
			}
			took[n].add(&r.requests, 1)
			count--
		}
	}
	return took, count
}

// bestGroupFor is the node group, and how many new nodes of it, that the
// least-waste expander picks for count pods of requests with selector;
// fits narrows the groups further (nil: any). Groups out of room or backing
// off are not options.
func (a *autoscaler) bestGroupFor(selector map[string]string, req amounts, count int32, fits func(*group) bool, now time.Duration) (*group, int32) {
	var best *group
	var bestNodes int32
	bestWaste := math.Inf(1)
	probe := &pod{requests: req, selector: selector}
	for _, g := range a.c.groups {
		if g.backoffUntil > now || (fits != nil && !fits(g)) || !probe.matchesTemplate(g) {
			continue
		}
		perNode := podsPerNode(&g.alloc, &req)
		if perNode == 0 {
			continue
		}
		nodes := (count + perNode - 1) / perNode
		if nodes > g.room() {
			continue
		}
		var used amounts
		for range count {
			used.add(&req, 1)
		}
		if w := optionWaste(&g.alloc, &used, int(nodes)); w < bestWaste {
			best, bestNodes, bestWaste = g, nodes, w
		}
	}
	return best, bestNodes
}

// podsPerNode is how many pods of req fit one empty node of alloc.
func podsPerNode(alloc, req *amounts) int32 {
	n := int64(math.MaxInt32)
	for r, v := range req {
		if v == 0 {
			continue
		}
		n = min(n, alloc[r]/v)
	}
	return int32(n)
}

// createNode asks the cloud for a node of g; it joins after the group's
// latency.
func (a *autoscaler) createNode(g *group, now time.Duration, trigger string) *node {
	n := a.c.newNode(g, now, trigger)
	a.created++
	a.c.listener.nodeChanged(n, now)
	a.q.at(now+g.model.Latency.draw(a.rng), func(t time.Duration) {
		if _, ok := a.c.nodes[n.name]; !ok {
			return
		}
		a.c.join(n, t)
		a.armScaleDown(n, t)
	})
	return n
}

// armScaleDown removes n once it has been empty and unbooked for the
// scale-down delay, if its group is above its minimum then.
func (a *autoscaler) armScaleDown(n *node, from time.Duration) {
	if n.scaleDownTimer {
		return
	}
	n.scaleDownTimer = true
	a.q.at(from+time.Duration(a.model.ScaleDownDelay), func(t time.Duration) {
		n.scaleDownTimer = false
		if _, ok := a.c.nodes[n.name]; !ok || n.pods > 0 {
			return
		}
		if n.booked != "" || n.group.nodes <= n.group.pool.Spec.MinNodes {
			return
		}
		if t-n.emptySince < time.Duration(a.model.ScaleDownDelay) {
			a.armScaleDown(n, n.emptySince)
			return
		}
		a.c.remove(n, t)
	})
}

// nodeEmptied hears that n has no pod any more.
func (a *autoscaler) nodeEmptied(n *node, now time.Duration) { a.armScaleDown(n, now) }

// draw is a duration from d.
func (d Distribution) draw(rng *rand.Rand) time.Duration {
	if d.Fixed > 0 {
		return time.Duration(d.Fixed)
	}
	v := time.Duration(float64(d.Median) * math.Exp(d.Sigma*rng.NormFloat64()))
	if d.Min > 0 {
		v = max(v, time.Duration(d.Min))
	}
	if d.Max > 0 {
		v = min(v, time.Duration(d.Max))
	}
	return v
}
