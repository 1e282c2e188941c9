package sim

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// maxResources is how many distinct resources a simulation may name.
const maxResources = 16

// amounts are resource amounts in milli-units, indexed by the run's
// resource index: a fixed array, because fitting pods on nodes is the
// simulator's innermost loop.
type amounts [maxResources]int64

// resourceIndex numbers the resources of a run.
type resourceIndex struct {
	names []corev1.ResourceName
	index map[corev1.ResourceName]int
}

// of returns r's number, adding it; ok is false when there are too many.
func (x *resourceIndex) of(r corev1.ResourceName) (int, bool) {
	if i, ok := x.index[r]; ok {
		return i, true
	}
	if len(x.names) == maxResources {
		return 0, false
	}
	x.index[r] = len(x.names)
	x.names = append(x.names, r)
	return len(x.names) - 1, true
}

// amountsOf is rl in the index's numbering (resources beyond the index's
// capacity are dropped; Simulate refuses such inputs first).
func (x *resourceIndex) amountsOf(rl corev1.ResourceList) amounts {
	var out amounts
	for n, q := range rl {
		if i, ok := x.of(n); ok {
			out[i] = milliOf(q)
		}
	}
	return out
}

// fits says whether req fits in a.
func (a *amounts) fits(req *amounts) bool {
	for i := range a {
		if a[i] < req[i] {
			return false
		}
	}
	return true
}

func (a *amounts) add(b *amounts, sign int64) {
	for i := range a {
		a[i] += sign * b[i]
	}
}

// node is one node of the cluster: booting until readyAt, then
// allocatable.
type node struct {
	name   string
	group  *group
	labels map[string]string
	taints []corev1.Taint
	alloc  amounts
	free   amounts
	// caReserved is what provisioned requests book on the node, as the
	// autoscaler counts it.
	caReserved amounts
	pods       int
	// ready: the node registered and is allocatable; created is when the
	// autoscaler asked for it (it costs from then on).
	ready          bool
	created        time.Duration
	emptySince     time.Duration
	scaleDownTimer bool
	// trigger is the job whose pods or booking made the autoscaler create
	// the node ("" for nodes of the start); triggerUsed says a pod of it ran
	// there while its whole gang was running, triggerBound that one was
	// bound there, otherUsed that a pod of another job ran there while its
	// whole gang was running.
	trigger                              string
	triggerUsed, triggerBound, otherUsed bool
	// counted and readyCounted say the meter counts the node and its GPUs.
	counted, readyCounted bool
	// booked is the request whose capacity the node is, until it expires.
	booked string
	// headroom: the autoscaler keeps the node's room for a headroom
	// buffer, and does not remove it.
	headroom bool
}

// group is a node group: a CapacityPool and its cloud model.
type group struct {
	pool  *berthv1.CapacityPool
	model GroupModel
	// alloc is what a node of the group offers.
	alloc amounts
	// nodes counts the group's nodes, booting ones included (the target
	// size the autoscaler has asked for).
	nodes    int32
	nextRack int
	seq      int
	// backoffUntil: the autoscaler saw the group fail to grow (a stockout)
	// and leaves it alone until then.
	backoffUntil time.Duration
}

// stockedOut says whether the cloud has no instances of g at t.
func (g *group) stockedOut(t time.Duration) bool {
	for _, w := range g.model.Stockouts {
		if t >= time.Duration(w.From) && t < time.Duration(w.To) {
			return true
		}
	}
	return false
}

// room is how many more nodes g may have.
func (g *group) room() int32 { return max(0, g.pool.Spec.MaxNodes-g.nodes) }

// templateLabels are the labels a new node of g gets, before its rack is
// drawn.
func (g *group) templateLabels() map[string]string {
	l := maps.Clone(g.pool.Spec.NodeTemplate.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l[berthv1.CapacityPoolLabel] = g.pool.Name
	return l
}

// pod is one pod of a job.
type pod struct {
	job      *job
	index    int
	requests amounts
	selector map[string]string
	// together is a label key the gang's pods must share a value of
	// (required pod affinity among the gang's pods on the topology level);
	// "" for none.
	together string
	// booking is the request the pod consumes ("" for none).
	booking string
	// placed: berth placed the pod's gang in a domain and reserves its
	// capacity itself (the berth.dev/placement label).
	placed  bool
	node    *node
	created time.Duration
	// failedIn is the capacity epoch the pod last found no node in (0:
	// not tried yet; epochs start at 1).
	failedIn uint64
	// headroom is the value of the berth.dev/headroom taint the pod
	// tolerates ("" for none): its service's headroom pools.
	headroom string
}

// tolerates says whether p tolerates taints: every taint but the
// headroom taint is a flavor's, which berth's pods tolerate (and the other
// policies' pods are given the same tolerations); the headroom taint only
// its service's pods tolerate.
func (p *pod) tolerates(taints []corev1.Taint) bool {
	v := headroomTaint(taints)
	return v == "" || v == p.headroom
}

// cluster is the nodes, node groups and pods of one simulation.
type cluster struct {
	groups  []*group
	byPool  map[string]*group
	nodes   map[string]*node
	sorted  []*node // ready nodes by name, for deterministic scans
	booting []*node // nodes being created, in the order they were asked for
	pending []*pod  // unbound pods, in creation order
	scoring string
	res     *resourceIndex
	// gpuIdx, cpuIdx and memIdx number the GPU resource, cpu and memory.
	gpuIdx, cpuIdx, memIdx int
	// epoch counts the times capacity grew (a pod gone, a node joined): a
	// pod that found no node is tried again only in a later epoch.
	epoch uint64
	// gpu is the resource the report counts.
	gpu corev1.ResourceName
	// listener hears of every node and pod change (the meter, and the
	// engine shell's capacity feed).
	listener clusterListener
}

// clusterListener hears what changes in the cluster.
type clusterListener interface {
	nodeChanged(n *node, now time.Duration)
	nodeRemoved(n *node, now time.Duration)
	podBound(p *pod, now time.Duration)
	podRemoved(p *pod, now time.Duration)
}

func newCluster(s Scenario, gpu corev1.ResourceName) *cluster {
	c := &cluster{byPool: map[string]*group{}, nodes: map[string]*node{}, scoring: s.Model.Scheduler.Scoring, gpu: gpu, epoch: 1,
		res: &resourceIndex{index: map[corev1.ResourceName]int{}}}
	c.gpuIdx, _ = c.res.of(gpu)
	c.cpuIdx, _ = c.res.of(corev1.ResourceCPU)
	c.memIdx, _ = c.res.of(corev1.ResourceMemory)
	for i := range s.Pools {
		p := &s.Pools[i]
		g := &group{pool: p, model: s.Model.group(p.Name), alloc: c.res.amountsOf(p.Spec.NodeTemplate.Allocatable)}
		c.groups = append(c.groups, g)
		c.byPool[p.Name] = g
	}
	slices.SortFunc(c.groups, func(a, b *group) int { return cmp.Compare(a.pool.Name, b.pool.Name) })
	return c
}

// existing is how many nodes g has at the start.
func (g *group) existing() int32 {
	if g.model.Existing != nil {
		return min(*g.model.Existing, g.pool.Spec.MaxNodes)
	}
	return g.pool.Spec.MinNodes
}

// newNode adds a booting node to g, created at now for trigger.
func (c *cluster) newNode(g *group, now time.Duration, trigger string) *node {
	g.seq++
	g.nodes++
	labels := g.templateLabels()
	if len(g.model.Racks) > 0 {
		labels[g.model.RackLabel] = g.model.Racks[g.nextRack%len(g.model.Racks)]
		g.nextRack++
	}
	name := fmt.Sprintf("%s-%d", g.pool.Name, g.seq)
	labels[corev1.LabelHostname] = name
	n := &node{name: name, group: g, labels: labels, taints: g.pool.Spec.NodeTemplate.Taints, alloc: g.alloc,
		free: g.alloc, created: now, emptySince: now, trigger: trigger}
	c.nodes[name] = n
	c.booting = append(c.booting, n)
	return n
}

// unboot takes n off the list of nodes being created.
func (c *cluster) unboot(n *node) {
	c.booting = slices.DeleteFunc(c.booting, func(x *node) bool { return x == n })
}

// join makes n allocatable at now.
func (c *cluster) join(n *node, now time.Duration) {
	n.ready = true
	n.emptySince = now
	c.epoch++
	c.unboot(n)
	i, _ := slices.BinarySearchFunc(c.sorted, n.name, func(x *node, name string) int { return cmp.Compare(x.name, name) })
	c.sorted = slices.Insert(c.sorted, i, n)
	c.listener.nodeChanged(n, now)
}

// remove deletes an empty node.
func (c *cluster) remove(n *node, now time.Duration) {
	delete(c.nodes, n.name)
	n.group.nodes--
	if n.ready {
		i, ok := slices.BinarySearchFunc(c.sorted, n.name, func(x *node, name string) int { return cmp.Compare(x.name, name) })
		if ok {
			c.sorted = slices.Delete(c.sorted, i, i+1)
		}
	} else {
		c.unboot(n)
	}
	c.listener.nodeRemoved(n, now)
}

// matches says whether pod p may run on n, ignoring resources: its node
// selector, the taints it does not tolerate (berth's pods tolerate their
// flavor's taints; the simulated pods of other policies are given the same
// tolerations) and its gang's affinity.
func (p *pod) matches(n *node) bool {
	if !p.tolerates(n.taints) {
		return false
	}
	for k, v := range p.selector {
		if n.labels[k] != v {
			return false
		}
	}
	if p.together != "" {
		if want, ok := p.job.domain[p.together]; ok && n.labels[p.together] != want {
			return false
		}
		if _, ok := n.labels[p.together]; !ok {
			return false
		}
	}
	return true
}

// schedule binds pending pods where they fit, one by one in creation order,
// as kube-scheduler does: each pod on the feasible node its scoring likes
// best. It returns how many it bound.
func (c *cluster) schedule(now time.Duration) int {
	bound := 0
	kept := c.pending[:0]
	for _, p := range c.pending {
		if p.failedIn != c.epoch {
			if n := c.bestNode(p); n != nil {
				c.bind(p, n, now)
				bound++
				continue
			}
			// Nothing but more capacity can change that: binding others
			// only takes capacity.
			p.failedIn = c.epoch
		}
		kept = append(kept, p)
	}
	clear(c.pending[len(kept):])
	c.pending = kept
	return bound
}

// bestNode is the feasible ready node kube-scheduler would pick for p.
func (c *cluster) bestNode(p *pod) *node {
	var best *node
	bestScore := int64(-1)
	for _, n := range c.sorted {
		if !n.free.fits(&p.requests) || !p.matches(n) {
			continue
		}
		s := c.score(n, p)
		if s > bestScore {
			best, bestScore = n, s
		}
	}
	return best
}

// score is n's score for p in parts per million: the share of n's GPUs (or,
// for pods without GPUs, CPU) left free after p (LeastAllocated), or used
// (MostAllocated).
func (c *cluster) score(n *node, p *pod) int64 {
	r := c.gpuIdx
	if p.requests[r] == 0 {
		r = c.cpuIdx
	}
	total := n.alloc[r]
	if total == 0 {
		return 0
	}
	left := (n.free[r] - p.requests[r]) * 1_000_000 / total
	if c.scoring == MostAllocated {
		return 1_000_000 - left
	}
	return left
}

func (c *cluster) bind(p *pod, n *node, now time.Duration) {
	p.node = n
	n.free.add(&p.requests, -1)
	n.pods++
	if p.together != "" && p.job.domain == nil {
		p.job.domain = map[string]string{}
	}
	if p.together != "" {
		p.job.domain[p.together] = n.labels[p.together]
	}
	c.listener.podBound(p, now)
}

// addPod queues p for binding.
func (c *cluster) addPod(p *pod) { c.pending = append(c.pending, p) }

// removePods deletes the pods of j, bound or not.
func (c *cluster) removePods(j *job, now time.Duration) {
	for _, p := range j.pods {
		if p.node != nil {
			n := p.node
			n.free.add(&p.requests, 1)
			n.pods--
			c.epoch++
			if n.pods == 0 {
				n.emptySince = now
			}
			c.listener.podRemoved(p, now)
			p.node = nil
		}
	}
	c.pending = slices.DeleteFunc(c.pending, func(p *pod) bool { return p.job == j })
	j.pods = nil
	j.domain = nil
}

// nodeObject is n as the API server would show it, for berth's flavor
// matching.
func (n *node) nodeObject() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: n.labels}, Spec: corev1.NodeSpec{Taints: n.taints}}
}
