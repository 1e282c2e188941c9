package notify

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/controllers/metrics"
)

// settle is how long a first failure waits for its siblings before it is
// reported: the pods of a gang usually fail within seconds of each other.
const settle = 5 * time.Second

// tick is how often the notifier sends what is due and looks for pods left
// unscheduled.
const tick = time.Second

// observed is one failure as a handler saw it.
type observed struct {
	gang types.UID
	f    Failure
}

// policyState is a policy with its sink, aggregation and rate limit.
type policyState struct {
	policy Policy
	sink   Sink
	agg    *Aggregator
	rate   *rateShare
}

// Notifier turns pod and Workload changes of admitted gangs into failure
// reports for the notification policies that select them. Handlers only
// detect and hand over (a bounded channel: an event it cannot take is
// counted as dropped), so informers are never held; one goroutine
// aggregates, and the Dispatcher sends.
type Notifier struct {
	pods     client.Reader // a cache of the pods berth started
	reader   client.Reader // berth's cache: Workloads, Namespaces
	dispatch *Dispatcher
	enrich   *Enricher
	redact   *Redactor
	outcomes *outcomes
	metrics  *metrics.Metrics
	clock    clock.WithTicker
	log      logr.Logger
	incoming chan observed
	unsched  map[string]bool // "<policy>/<pod UID>" reported unscheduled
	gangsMu  sync.Mutex
	gangs    map[types.UID]Gang // by Workload UID, from the Workload informer
	policyMu sync.Mutex
	policies map[string]*policyState
	// leading is set while Start runs: only the leader aggregates, so a
	// follower's handlers hand nothing over.
	leading atomic.Bool
}

// NotifierOptions configure a Notifier.
type NotifierOptions struct {
	Dispatch DispatchOptions
	Clock    clock.WithTicker
}

// NewNotifier returns a Notifier reading pods from pods (a cache of the pods
// berth labels), Workloads and Namespaces from reader, and fetching logs
// and events with enrich.
func NewNotifier(pods, reader client.Reader, enrich *Enricher, m *metrics.Metrics, log logr.Logger, o NotifierOptions) *Notifier {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	n := &Notifier{pods: pods, reader: reader, enrich: enrich, redact: NewRedactor(), outcomes: newOutcomes(), metrics: m,
		clock: o.Clock, log: log, incoming: make(chan observed, 1024), unsched: map[string]bool{}, gangs: map[types.UID]Gang{},
		policies: map[string]*policyState{}}
	o.Dispatch.Prepare = n.prepare
	o.Dispatch.Outcome = n.outcomes.record
	n.dispatch = NewDispatcher(o.Dispatch, m, log)
	return n
}

// prepare completes a report before it is first sent: its log tail and
// events, then every free text in it redacted.
func (n *Notifier) prepare(ctx context.Context, r *Report) {
	n.enrich.Enrich(ctx, r)
	n.redact.RedactReport(r)
}

// SetPolicy adds or replaces a policy and its sink; a nil sink removes it,
// with what was kept of its deliveries, and drops (and counts) its reports
// waiting for their turn. A changed window or rate starts the policy's
// aggregation afresh; its reports waiting keep their place as far as the
// new rate's queues hold them.
func (n *Notifier) SetPolicy(p Policy, sink Sink) {
	n.policyMu.Lock()
	defer n.policyMu.Unlock()
	old := n.policies[p.Key]
	if sink == nil {
		delete(n.policies, p.Key)
		n.dispatch.Forget(p.Key)
		n.outcomes.forget(p.Key)
		if old != nil {
			for range old.rate.drain() {
				n.metrics.Notification(old.sink.Type(), metrics.NotificationDropped)
			}
		}
		return
	}
	window := time.Duration(p.Settings.DedupWindowSeconds) * time.Second
	if old != nil && old.agg.Window == window && old.rate.limiter.Limit() == perHour(p.Settings.MaxReportsPerHour) {
		old.policy, old.sink = p, sink
		return
	}
	ps := &policyState{policy: p, sink: sink, agg: NewAggregator(window, settle), rate: newRateShare(p.Settings.MaxReportsPerHour)}
	if old != nil {
		for _, r := range old.rate.drain() {
			if !ps.rate.offer(r) {
				n.metrics.Notification(sink.Type(), metrics.NotificationDropped)
			}
		}
	}
	n.policies[p.Key] = ps
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: only the
// leader reports, or every replica would.
func (n *Notifier) NeedLeaderElection() bool { return true }

// Register adds the handlers to the pod and Workload informers.
func (n *Notifier) Register(podInformer, workloadInformer cache.Informer) error {
	if _, err := podInformer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: n.podUpdated, DeleteFunc: n.gangGone}); err != nil {
		return fmt.Errorf("watching pods for failures: %w", err)
	}
	if _, err := workloadInformer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { n.workloadSeen(nil, o) },
		UpdateFunc: n.workloadSeen,
		DeleteFunc: n.gangGone,
	}); err != nil {
		return fmt.Errorf("watching Workloads for failures: %w", err)
	}
	return nil
}

func (n *Notifier) podUpdated(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Pod)
	pod, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 {
		return
	}
	uid := types.UID(pod.Labels[berthv1.WorkloadLabel])
	n.recordGang(pod)
	for _, f := range DetectPod(old, pod, n.clock.Now()) {
		n.hand(observed{gang: uid, f: f})
	}
}

// recordGang learns the gang of a replica that runs on the record on its
// pod (berth.dev/admission-record) instead of a Workload: the record says
// what a Workload would, and the replica is reported as its pod.
func (n *Notifier) recordGang(p *corev1.Pod) {
	rec, has, err := lifecycle.RecordOf(p)
	if !has || err != nil {
		return
	}
	n.gangsMu.Lock()
	defer n.gangsMu.Unlock()
	if _, ok := n.gangs[p.UID]; ok {
		return
	}
	g := GangOf(lifecycle.RecordedWorkload(p, rec))
	g.JobKind, g.JobName, g.JobAPIVersion, g.JobUID = "Pod", p.Name, "v1", string(p.UID)
	n.gangs[p.UID] = g
}

func (n *Notifier) workloadSeen(oldObj, newObj any) {
	wl, ok := newObj.(*berthv1.Workload)
	if !ok {
		return
	}
	g := GangOf(wl)
	n.gangsMu.Lock()
	if prev, ok := n.gangs[wl.UID]; ok && g.ClusterQueue == "" {
		// Requeued: the admission is gone, but the report is about where
		// the gang ran.
		g.ClusterQueue, g.Flavor, g.Domain, g.Booking = prev.ClusterQueue, prev.Flavor, prev.Domain, prev.Booking
	}
	n.gangs[wl.UID] = g
	n.gangsMu.Unlock()
	old, _ := oldObj.(*berthv1.Workload)
	for _, f := range DetectWorkload(old, wl, n.clock.Now()) {
		n.hand(observed{gang: wl.UID, f: f})
	}
}

// gangGone forgets the gang of a deleted Workload, or of a deleted pod
// that ran on its record (a gang keyed by the pod's UID).
func (n *Notifier) gangGone(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if o, ok := obj.(metav1.Object); ok {
		n.gangsMu.Lock()
		delete(n.gangs, o.GetUID())
		n.gangsMu.Unlock()
	}
}

// hand passes a failure to the aggregating goroutine without waiting.
func (n *Notifier) hand(o observed) {
	if !n.leading.Load() {
		return
	}
	select {
	case n.incoming <- o:
	default:
		n.metrics.Notification("notifier", metrics.NotificationDropped)
	}
}

// Start aggregates and sends until ctx ends.
func (n *Notifier) Start(ctx context.Context) error {
	n.leading.Store(true)
	defer n.leading.Store(false)
	go n.dispatch.Run(ctx)
	t := n.clock.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case o := <-n.incoming:
			n.add(ctx, o)
		case <-t.C():
			n.unscheduled(ctx)
			n.flush()
		}
	}
}

// add records a failure with every policy that selects its gang.
func (n *Notifier) add(ctx context.Context, o observed) {
	n.gangsMu.Lock()
	g, ok := n.gangs[o.gang]
	n.gangsMu.Unlock()
	if !ok || g.ClusterQueue == "" {
		return // not a gang berth admitted (or no longer one)
	}
	nsLabels := n.namespaceLabels(ctx, g.Namespace)
	n.policyMu.Lock()
	defer n.policyMu.Unlock()
	for _, ps := range n.policies {
		if ps.policy.Selects(g, o.f.Kind, nsLabels) {
			ps.agg.Add(g, o.f, n.clock.Now())
		}
	}
}

// flush sends the reports that are due, within each policy's rate, which
// the namespaces a policy selects take in turns: a due report first waits
// behind its namespace's (dropped and counted when those fill its queue),
// then the rate lets out what it allows, in turn (rateShare).
func (n *Notifier) flush() {
	n.policyMu.Lock()
	defer n.policyMu.Unlock()
	now := n.clock.Now()
	for _, ps := range n.policies {
		for _, r := range ps.agg.Due(now) {
			if !ps.rate.offer(r) {
				n.metrics.Notification(ps.sink.Type(), metrics.NotificationDropped)
			}
		}
		for _, r := range ps.rate.release(now) {
			r.LogLines, r.LogBytes = int64(ps.policy.logLines()), int64(ps.policy.Settings.LogBytes)
			n.dispatch.Enqueue(ps.policy.Key, ps.sink, r)
		}
	}
}

// unscheduled reports, to each policy that selects its gang, a pod of an
// admitted gang still not bound the policy's grace after it asked to be
// scheduled; once per pod and policy.
func (n *Notifier) unscheduled(ctx context.Context) {
	pods := &corev1.PodList{}
	if err := n.pods.List(ctx, pods); err != nil {
		n.log.Error(err, "Listing berth's pods for unscheduled ones")
		return
	}
	now := n.clock.Now()
	seen := map[string]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		n.recordGang(p)
		n.gangsMu.Lock()
		g, ok := n.gangs[types.UID(p.Labels[berthv1.WorkloadLabel])]
		n.gangsMu.Unlock()
		if !ok || g.ClusterQueue == "" {
			continue
		}
		n.policyMu.Lock()
		for key, ps := range n.policies {
			id := key + "/" + string(p.UID)
			grace := time.Duration(ps.policy.Settings.UnschedulableAfterSeconds) * time.Second
			f := Unscheduled(p, grace, now)
			if f == nil {
				continue
			}
			seen[id] = true
			if !n.unsched[id] && ps.policy.Selects(g, Unschedulable, n.namespaceLabels(ctx, g.Namespace)) {
				ps.agg.Add(g, *f, now)
			}
		}
		n.policyMu.Unlock()
	}
	n.unsched = seen
}

// namespaceLabels are the labels of a namespace, empty when it is not
// known (a cluster policy's selector then does not match it).
func (n *Notifier) namespaceLabels(ctx context.Context, name string) labels.Set {
	ns := &corev1.Namespace{}
	if err := n.reader.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		return labels.Set{}
	}
	return ns.Labels
}
