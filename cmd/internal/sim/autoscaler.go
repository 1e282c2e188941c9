package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"

	"github.com/berth-dev/berth/cmd/internal/autoscale"
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
	// due is when the autoscaler looks at the request next; retries
	// counts its answers "no capacity", which set the backoff.
	due     time.Duration
	retries int
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

// class is the request's provisioning class.
func (r *request) class() string {
	if r.scaleUp {
		return autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp
	}
	return autoscalingv1.ProvisioningClassCheckCapacity
}

// autoscaler models cluster-autoscaler: its loop serves one
// ProvisioningRequest per scan, scales node groups for unschedulable pods
// that consume no request (one scale-up per loop, unaware of gangs), and
// removes nodes empty for its scale-down delay. What it decides — the
// answer to a request, the fit, the expander — is the shared model's
// (cmd/internal/autoscale), the stand-in autoscaler's too; this is the
// loop, the clock and the cloud around it.
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
	// keepers are the services whose headroom the autoscaler keeps as
	// capacity buffers (buffer.go).
	keepers []*keeper
	// slots and slotRefs are placeOnFree's buffers.
	slots    []slot
	slotRefs []*slot
}

func newAutoscaler(m AutoscalerModel, c *cluster, q *eventQueue, rng *rand.Rand) *autoscaler {
	return &autoscaler{model: m, c: c, q: q, rng: rng, scanAt: -1}
}

// submit queues a request; it is looked at in the next scan.
func (a *autoscaler) submit(r *request, now time.Duration) {
	r.due = now
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
	if a.keepHeadroom(now) {
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
	at := epoch.Add(now)
	if r.condition(autoscalingv1.Accepted) == nil {
		// Accepted when a loop first picks the request.
		meta.SetStatusCondition(&r.obj.Status.Conditions, autoscale.Accepted(at))
	}
	onFree, left := a.placeOnFree(r)
	look := autoscale.Look{Class: r.class(), FitsFree: left == 0}
	var g *group
	var count int32
	if left > 0 && autoscale.ScalesUp(look.Class) {
		probe := &pod{requests: r.requests, selector: r.selector, headroom: r.job.headroomPool}
		g, count, look.Chosen = a.bestGroupFor(probe, left, now)
	}
	outcome := autoscale.Decide(look)
	if outcome != autoscale.Found && outcome != autoscale.Provisioned {
		if outcome == autoscale.StockedOut {
			g.backoffUntil = now + autoscale.NodeGroupBackoff
		}
		meta.SetStatusCondition(&r.obj.Status.Conditions, outcome.Condition(fmt.Sprintf("%d pods fit nowhere", left), at))
		r.due = now + autoscale.Backoff(time.Duration(a.model.InitialBackoff), time.Duration(a.model.MaxBackoff), r.retries)
		r.retries++
		a.logf(now, "autoscaler: %s: no capacity for %d pods (%v); retry at %s", r.obj.Name, left, r.selector, r.due)
		a.answered(r, now)
		return
	}
	r.reserved = onFree
	for n, amt := range onFree {
		n.caReserved.add(amt, 1)
	}
	for range count {
		n := a.createNode(g, now, r.job.spec.ID)
		n.booked = r.obj.Name // booked for the request until it expires
		r.nodes = append(r.nodes, n)
	}
	c := outcome.Condition("", at)
	a.logf(now, "autoscaler: %s: %s, %d new nodes", r.obj.Name, c.Reason, count)
	meta.SetStatusCondition(&r.obj.Status.Conditions, c)
	a.answered(r, now)
	a.q.at(now+time.Duration(a.model.BookingExpiry), func(t time.Duration) { a.expire(r, t) })
}

// expire ends r's booking.
func (a *autoscaler) expire(r *request, now time.Duration) {
	if r.done {
		return
	}
	a.release(r)
	meta.SetStatusCondition(&r.obj.Status.Conditions, autoscale.BookingExpired(epoch.Add(now)))
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

// slot is a node's room as the autoscaler's fit sees it, and what a
// request's pods took of it.
type slot struct {
	n          *node
	free, took amounts
}

// take places one pod of req in the slot if it fits.
func (s *slot) take(req *amounts) bool {
	if !s.free.fits(req) {
		return false
	}
	s.free.add(req, -1)
	s.took.add(req, 1)
	return true
}

// placeOnFree places r's pods first fit on ready nodes' capacity that is
// neither used nor booked, and returns what it took per node and how many
// pods are left.
func (a *autoscaler) placeOnFree(r *request) (map[*node]*amounts, int32) {
	probe := &pod{requests: r.requests, selector: r.selector, headroom: r.job.headroomPool}
	// The slots are reused from answer to answer: this runs once per
	// request per loop. The pods are alike, so first fit fills the slots
	// in order and needs none past those that hold them all.
	a.slots, a.slotRefs = a.slots[:0], a.slotRefs[:0]
	room := int64(0)
	for _, n := range a.c.sorted {
		if room >= int64(r.pods) {
			break
		}
		if !probe.matchesLabels(n) || (n.booked != "" && n.booked != r.obj.Name) {
			continue // not its labels, or booked for another request
		}
		s := slot{n: n, free: n.free}
		s.free.add(&n.caReserved, -1)
		if s.free.fits(&r.requests) {
			k := podsPerNode(&s.free, &r.requests)
			a.slots = append(a.slots, s)
			room += k
		}
	}
	for i := range a.slots {
		a.slotRefs = append(a.slotRefs, &a.slots[i])
	}
	took := map[*node]*amounts{}
	left := int32(0)
	for _, at := range autoscale.FirstFit(podsOf(r.requests, r.pods), a.slotRefs, (*slot).take) {
		if at < 0 {
			left++
			continue
		}
		s := a.slotRefs[at]
		if took[s.n] == nil {
			took[s.n] = &amounts{}
		}
		took[s.n].add(&r.requests, 1)
	}
	return took, left
}

// podsPerNode is how many pods of req fit in free, which holds one.
func podsPerNode(free, req *amounts) int64 {
	n := int64(math.MaxInt32)
	for r, v := range req {
		if v > 0 {
			n = min(n, free[r]/v)
		}
	}
	return n
}

// podsOf is count pods of req, for the shared fit.
func podsOf(req amounts, count int32) []*amounts {
	pods := make([]*amounts, count)
	for i := range pods {
		pods[i] = &req
	}
	return pods
}

// bestGroupFor is the node group, and how many new nodes of it, that the
// expander chooses for count pods like probe, each group holding all of
// them or none (best-effort-atomic-scale-up); nil when no group can.
// Groups out of room or backing off are not options.
func (a *autoscaler) bestGroupFor(probe *pod, count int32, now time.Duration) (*group, int32, *autoscale.Option) {
	pods := podsOf(probe.requests, count)
	var options []autoscale.Option
	var groups []*group
	for _, g := range a.c.groups {
		if g.backoffUntil > now || !probe.matchesTemplate(g) {
			continue
		}
		nodes, _, ok := autoscale.Estimate(pods, a.opener(g), (*slot).take, true)
		if !ok {
			continue
		}
		options = append(options, a.optionOf(g, len(nodes), pods, now))
		groups = append(groups, g)
	}
	best := autoscale.Best(options)
	if best < 0 {
		return nil, 0, nil
	}
	return groups[best], int32(options[best].Nodes), &options[best]
}

// opener opens new nodes of g for the shared estimator, within its room.
func (a *autoscaler) opener(g *group) func(int) (*slot, bool) {
	room := int(g.room())
	return func(i int) (*slot, bool) {
		if i >= room {
			return nil, false
		}
		return &slot{free: g.alloc}, true
	}
}

// optionOf is the expander's view of nodes new nodes of g holding pods,
// at now.
func (a *autoscaler) optionOf(g *group, nodes int, pods []*amounts, now time.Duration) autoscale.Option {
	o := autoscale.Option{Group: g.pool.Name, Nodes: nodes, Pods: len(pods), OutOfStock: g.stockedOut(now),
		NodeCPU: g.alloc[a.c.cpuIdx], NodeMemory: g.alloc[a.c.memIdx]}
	for _, p := range pods {
		o.CPU += p[a.c.cpuIdx]
		o.Memory += p[a.c.memIdx]
	}
	return o
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
		if n.booked != "" || n.headroom || n.group.nodes <= n.group.pool.Spec.MinNodes {
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

// whyUnanswered says why r has no answer yet, for the decisions log when
// berth's answer timeout fires. The engine's own message asks whether
// cluster-autoscaler runs with ProvisioningRequests enabled, which is the
// likely cause on a real cluster; the modelled autoscaler always runs, so
// here the cause is known: it serves one request per scan and had not
// reached r behind the requests queued before it.
func (a *autoscaler) whyUnanswered(r *request, now time.Duration) string {
	ahead, backingOff := 0, 0
	for _, x := range a.requests {
		if x == r {
			break
		}
		if c := x.condition(autoscalingv1.Provisioned); x.done || (c != nil && c.Status == metav1.ConditionTrue) {
			continue
		}
		ahead++
		if x.due > now {
			backingOff++
		}
	}
	if r.condition(autoscalingv1.Accepted) != nil {
		return fmt.Sprintf("the simulated cluster-autoscaler picked %s up but has not answered it yet", r.obj.Name)
	}
	return fmt.Sprintf("the simulated cluster-autoscaler is backlogged, not misconfigured: it serves one ProvisioningRequest per %s scan "+
		"and had not reached %s, with %d requests queued ahead of it (%d of them backing off after no capacity); "+
		"a longer answerTimeoutSeconds or fewer bookings at once avoid the retry",
		time.Duration(a.model.ScanInterval), r.obj.Name, ahead, backingOff)
}
