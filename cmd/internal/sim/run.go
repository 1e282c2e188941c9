package sim

import (
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/cmd/internal/sim/trace"
	"github.com/berth-dev/berth/controllers/headroom"
)

// epoch is the wall-clock time simulated time 0 stands for; the engine and
// the Workload conditions need absolute times.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// jobState is where a job stands.
type jobState uint8

const (
	jobWaiting jobState = iota
	jobRunning
	jobDone
	// jobGaveUp: berth gave its bookings up; it waits for someone to act.
	jobGaveUp
)

// job is one job of the trace during a run.
type job struct {
	spec     trace.Job
	requests amounts
	gpus     int64 // of the whole gang
	state    jobState
	pods     []*pod
	bound    int
	// domain holds, per label key its pods must share, the value of the
	// first pod bound.
	domain map[string]string
	// firstAdmit is when the job was first admitted (-1: never);
	// firstStart when the whole gang first ran (-1: never); runs counts
	// starts (more than one after evictions).
	firstAdmit time.Duration
	firstStart time.Duration
	runs       int
	// runID tells the finish of the current run from a stale one.
	runID int
	// shell is the policy's own state of the job.
	shell any
	// headroomPool is the headroom pools' taint value its pods tolerate
	// ("" for none): it is a replica of a service with headroom.
	headroomPool string
}

// policy is one way of running the trace's jobs on the cluster.
type policy interface {
	// submit hears that j was submitted.
	submit(j *job, now time.Duration)
	// settle decides what it can at now; it says whether it changed
	// anything (pods created or removed, capacity booked).
	settle(now time.Duration) bool
	// started hears that every pod of j runs; finished that j ended.
	started(j *job, now time.Duration)
	finished(j *job, now time.Duration)
}

// run is one policy's simulation of a trace.
type run struct {
	sc   Scenario
	q    eventQueue
	c    *cluster
	as   *autoscaler
	pol  policy
	jobs []*job
	m    *meter
	end  time.Duration
	// log, when set, hears what happens, one line per step.
	log io.Writer
	// timeline asks the result for each job's admission and start.
	timeline bool
	// tenants maps LocalQueues to their ClusterQueues.
	tenants map[types.NamespacedName]string
	// keepers size each service's headroom (Model.Headroom).
	keepers []*keeper
}

// newRun builds the cluster of sc for tr, with the nodes of the start
// ready at time 0.
func newRun(sc Scenario, tr trace.Trace, gpu corev1.ResourceName, seed uint64) *run {
	r := &run{sc: sc, c: newCluster(sc, gpu)}
	r.m = newMeter(r, time.Duration(sc.Model.SampleEvery))
	r.c.listener = r
	r.as = newAutoscaler(sc.Model.Autoscaler, r.c, &r.q, rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)))
	r.as.logf = r.logf
	for _, g := range r.c.groups {
		for range g.existing() {
			n := r.c.newNode(g, 0, "")
			r.c.join(n, 0)
		}
	}
	var last time.Duration
	for i := range tr.Jobs {
		spec := tr.Jobs[i]
		j := &job{spec: spec, requests: r.c.res.amountsOf(spec.Requests), firstAdmit: -1, firstStart: -1}
		j.gpus = j.requests[r.c.gpuIdx] * int64(spec.Pods) / 1000
		r.jobs = append(r.jobs, j)
		last = max(last, spec.Submit)
	}
	r.end = last + time.Duration(sc.Model.Drain)
	return r
}

// simulate runs the trace to its end and returns the measures.
func (r *run) simulate(name string) (PolicyResult, error) {
	keepers, err := r.newKeepers()
	if err != nil {
		return PolicyResult{}, err
	}
	r.keepers, r.as.keepers = keepers, keepers
	for _, k := range keepers {
		if k.size > 0 {
			r.as.wake(0)
		}
		if k.model.Policy != nil && k.model.Policy.Mode == headroom.Demand {
			r.resizeEvery(k, 0)
		}
	}
	for _, j := range r.jobs {
		r.q.at(j.spec.Submit, func(now time.Duration) {
			r.m.submitted(j)
			r.replicasChanged(j, 1, now)
			r.pol.submit(j, now)
		})
	}
	for {
		t, ok := r.q.next()
		if !ok || t > r.end {
			break
		}
		r.m.advance(t)
		for {
			if nt, ok := r.q.next(); !ok || nt != t {
				break
			}
			r.q.pop().do(t)
		}
		if err := r.settle(t); err != nil {
			return PolicyResult{}, fmt.Errorf("%s at %s: %w", name, t, err)
		}
		if r.m.done == len(r.jobs) {
			// Every job ended: the run ends once the autoscaler had time
			// to remove the nodes they left empty.
			r.end = min(r.end, t+time.Duration(r.sc.Model.Autoscaler.ScaleDownDelay)+time.Duration(r.sc.Model.Autoscaler.ScanInterval))
		}
	}
	r.m.advance(r.end)
	if w, ok := r.pol.(interface{ explainWaiting(now time.Duration) }); ok {
		w.explainWaiting(r.end)
	}
	return r.m.result(name), nil
}

// settle lets the scheduler and the policy act until nothing changes.
func (r *run) settle(now time.Duration) error {
	for range 64 {
		bound := r.c.schedule(now)
		changed := r.pol.settle(now)
		if bound == 0 && !changed {
			if len(r.c.pending) > 0 && r.as.podsDirty {
				r.as.wake(now)
			}
			return nil
		}
	}
	return fmt.Errorf("the scheduler and the policy did not settle in 64 rounds")
}

// createPods creates the pods of j, unbound; booking names the request
// they consume ("" for none).
func (r *run) createPods(j *job, selector map[string]string, together, booking string, now time.Duration) {
	j.pods = make([]*pod, j.spec.Pods)
	j.bound = 0
	for i := range j.pods {
		p := &pod{job: j, index: i, requests: j.requests, selector: selector, together: together, booking: booking, created: now,
			headroom: j.headroomPool}
		j.pods[i] = p
		r.c.addPod(p)
	}
	r.as.podsDirty = true
}

// stop deletes j's pods: it was evicted or it finished. The caller moves
// j on (done, or waiting again through requeue).
func (r *run) stop(j *job, now time.Duration) {
	r.c.removePods(j, now)
	j.bound = 0
	j.runID++
	r.as.podsDirty = true
}

// requeue returns an evicted job to the queue.
func (r *run) requeue(j *job, now time.Duration) {
	wasRunning, hadPods := j.state == jobRunning, len(j.pods) > 0
	r.stop(j, now)
	j.state = jobWaiting
	r.m.requeued(j, wasRunning, hadPods)
}

// nodeChanged implements clusterListener.
func (r *run) nodeChanged(n *node, now time.Duration) {
	r.m.nodeChanged(n)
	if l, ok := r.pol.(clusterListener); ok {
		l.nodeChanged(n, now)
	}
}

// nodeRemoved implements clusterListener.
func (r *run) nodeRemoved(n *node, now time.Duration) {
	r.m.nodeRemoved(n)
	r.as.podsDirty = true
	if l, ok := r.pol.(clusterListener); ok {
		l.nodeRemoved(n, now)
	}
}

// podBound implements clusterListener: a gang whose last pod is bound runs.
func (r *run) podBound(p *pod, now time.Duration) {
	j := p.job
	j.bound++
	r.m.podBound(p)
	if p.node.labels[berthv1.HeadroomLabel] != "" {
		r.as.wake(now) // a headroom node's room was taken: restore it
	}
	if l, ok := r.pol.(clusterListener); ok {
		l.podBound(p, now)
	}
	if j.bound < len(j.pods) || j.state != jobWaiting {
		return
	}
	j.state = jobRunning
	j.runs++
	if j.firstStart < 0 {
		j.firstStart = now
	}
	r.m.started(j)
	r.pol.started(j, now)
	id := j.runID
	r.q.at(now+j.spec.RunTime, func(t time.Duration) {
		if j.runID != id || j.state != jobRunning {
			return
		}
		r.stop(j, t)
		j.state = jobDone
		r.m.finished(j)
		r.replicasChanged(j, -1, t)
		r.pol.finished(j, t)
	})
}

// resizeEvery sizes k's headroom again every minute from at on, as
// berth's controller looks at a policy every minute: the Demand rule's
// window slides (and its Period brings earlier days' bursts back) without
// a replica changing.
func (r *run) resizeEvery(k *keeper, at time.Duration) {
	r.q.at(at, func(now time.Duration) {
		if k.replicasChanged(0, now) {
			r.as.wake(now)
		}
		if now+time.Minute <= r.end {
			r.resizeEvery(k, now+time.Minute)
		}
	})
}

// replicasChanged tells the headroom of j's service, if it has one, that
// j was submitted (+1) or ended (-1); a new size wakes the autoscaler.
func (r *run) replicasChanged(j *job, delta int32, now time.Duration) {
	if k := r.keeperOf(j); k != nil && k.replicasChanged(delta, now) {
		r.as.wake(now)
	}
}

// admitted records that the policy admitted j at now: its quota is
// reserved, or, without a queue, its pods are created.
func (r *run) admitted(j *job, now time.Duration) {
	if j.firstAdmit < 0 {
		j.firstAdmit = now
	}
}

// podRemoved implements clusterListener.
func (r *run) podRemoved(p *pod, now time.Duration) {
	r.m.podRemoved(p)
	if p.node.pods == 0 {
		r.as.nodeEmptied(p.node, now)
	}
	if l, ok := r.pol.(clusterListener); ok {
		l.podRemoved(p, now)
	}
}

// logf writes one line of the run's log, stamped with the simulated time.
func (r *run) logf(now time.Duration, format string, args ...any) {
	if r.log == nil {
		return
	}
	fmt.Fprintf(r.log, "%10s  %s\n", now.Truncate(time.Second), fmt.Sprintf(format, args...))
}
