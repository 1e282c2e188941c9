package sim

import (
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// engineShell runs jobs through berth's admission engine, as the
// controller does: the same engine, the same translations of berth's
// objects (scheduler, capacity), the same Workload lifecycle transitions
// and the same reading of the autoscaler's answers (provisioning). It
// replaces the API server with objects in memory and applies every
// decision at once, so it measures the decisions, not the API's latency.
//
// With quotaOnly it models a queue that admits by quota and fair share and
// then books unpinned capacity for every admission, as Kueue's
// ProvisioningRequest admission check does: the engine is told neither the
// nodes, nor the pools, nor the flavors' topology, and every booking
// flavor books every admission, single pods too; a gang's topology
// becomes required pod affinity among its pods, which is what a user
// writes without a queue that places gangs.
type engineShell struct {
	r         *run
	eng       *admission.Engine
	quotaOnly bool
	flavors   map[string]*berthv1.ResourceFlavor
	queues    map[types.NamespacedName]lifecycle.QueueRef
	pools     map[string]*berthv1.CapacityPool
	byKey     map[admission.WorkloadKey]*job
	// engineNodes are the nodes the engine was told of, with the free
	// capacity last told.
	engineNodes map[*node]*amounts
	// nodeFlavors are the flavors each node is of (capacity.Matches).
	nodeFlavors map[*node][]string
	wakeAt      time.Duration
	err         error
}

// shellJob is the shell's state of one job: its Workload and the request
// of its current booking.
type shellJob struct {
	wl  *berthv1.Workload
	req *request
	// booked: the current run started on a provisioned booking.
	booked bool
}

func newEngineShell(r *run, quotaOnly bool) (*engineShell, error) {
	eng, err := admission.New(r.sc.Model.Controller.engineOptions())
	if err != nil {
		return nil, fmt.Errorf("creating the engine: %w", err)
	}
	s := &engineShell{r: r, eng: eng, quotaOnly: quotaOnly, flavors: map[string]*berthv1.ResourceFlavor{},
		queues: map[types.NamespacedName]lifecycle.QueueRef{}, pools: map[string]*berthv1.CapacityPool{},
		byKey: map[admission.WorkloadKey]*job{}, engineNodes: map[*node]*amounts{}, nodeFlavors: map[*node][]string{}, wakeAt: -1}
	r.as.answered = s.answered
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

// load gives the engine the scenario's flavors, queues and pools.
func (s *engineShell) load() error {
	sc := s.r.sc
	for i := range sc.Flavors {
		rf := &sc.Flavors[i]
		s.flavors[rf.Name] = rf
		f := lifecycle.FlavorToEngine(rf)
		if s.quotaOnly {
			f.Levels = nil
			if f.Provisioning.Mode == admission.ProvisionIfNeeded {
				f.Provisioning.Mode = admission.ProvisionAlways
			}
			if f.Provisioning.Mode == admission.ProvisionAlways {
				// Kueue's ProvisioningRequest check books every workload,
				// single pods too.
				f.Provisioning.SinglePodJobs = admission.SinglePodBook
			}
		}
		if err := s.eng.UpsertFlavor(f); err != nil {
			return fmt.Errorf("ResourceFlavor %s: %w", rf.Name, err)
		}
	}
	labels := map[string]map[string]string{}
	for i := range sc.Flavors {
		labels[sc.Flavors[i].Name] = sc.Flavors[i].Spec.NodeLabels
	}
	for i := range sc.ClusterQueues {
		cq := &sc.ClusterQueues[i]
		if err := s.eng.UpsertClusterQueue(lifecycle.ClusterQueueToEngine(cq, labels)); err != nil {
			return fmt.Errorf("ClusterQueue %s: %w", cq.Name, err)
		}
	}
	for i := range sc.LocalQueues {
		lq := &sc.LocalQueues[i]
		s.queues[types.NamespacedName{Namespace: lq.Namespace, Name: lq.Name}] = lifecycle.QueueOf(lq)
	}
	for i := range sc.Pools {
		p := &sc.Pools[i]
		s.pools[p.Name] = p
		if !s.quotaOnly {
			if err := s.updatePool(p.Name); err != nil {
				return err
			}
		}
	}
	if !s.quotaOnly {
		for _, n := range s.r.c.sorted {
			s.nodeChanged(n, 0)
		}
	}
	return s.err
}

// updatePool tells the engine how many more nodes a pool can create, from
// the nodes of it that exist, as berth counts them.
func (s *engineShell) updatePool(name string) error {
	var existing int32
	for _, n := range s.r.c.sorted {
		if n.group.pool.Name == name {
			existing++
		}
	}
	if err := s.eng.UpsertPool(lifecycle.PoolToEngine(s.pools[name], existing)); err != nil {
		return fmt.Errorf("CapacityPool %s: %w", name, err)
	}
	return nil
}

// submit creates j's Workload, as the job's adapter would, and queues it.
func (s *engineShell) submit(j *job, now time.Duration) {
	wl := workloadOf(j.spec.ID, j, now)
	if s.quotaOnly {
		wl.Spec.Topology = nil
	}
	j.shell = &shellJob{wl: wl}
	s.byKey[lifecycle.KeyOf(wl)] = j
	s.upsert(j)
}

// upsert gives the engine j's Workload as it stands, as the controller's
// Workload watch does.
func (s *engineShell) upsert(j *job) {
	wl := j.shell.(*shellJob).wl
	phase := lifecycle.PhaseOf(wl)
	if phase == lifecycle.Finished || phase == lifecycle.GaveUp {
		s.eng.DeleteWorkload(lifecycle.KeyOf(wl))
		return
	}
	q := s.queues[types.NamespacedName{Namespace: wl.Namespace, Name: wl.Spec.QueueName}]
	if err := s.eng.UpsertWorkload(lifecycle.WorkloadToEngine(wl, q)); err != nil && s.err == nil {
		s.err = fmt.Errorf("job %s: %w", j.spec.ID, err)
	}
}

// apply carries out t on j's Workload at now; a refusal is a bug of the
// shell, reported as the run's error.
func (s *engineShell) apply(j *job, t lifecycle.Transition, now time.Duration) bool {
	if err := lifecycle.Apply(j.shell.(*shellJob).wl, t, metav1.NewTime(epoch.Add(now))); err != nil {
		if s.err == nil {
			s.err = fmt.Errorf("job %s: %w", j.spec.ID, err)
		}
		return false
	}
	return true
}

// settle runs an admission cycle and applies its decisions.
func (s *engineShell) settle(now time.Duration) bool {
	res := s.eng.Cycle(epoch.Add(now))
	for _, a := range res.Admitted {
		s.admit(a, now)
	}
	for _, p := range res.Preemptions {
		s.preempt(p, now)
	}
	for _, d := range res.Bookings {
		s.decideBooking(d, now)
	}
	if next := s.eng.NextWake(); next != 0 {
		at := time.Duration(next - epoch.UnixNano())
		if at > now && (s.wakeAt <= now || at < s.wakeAt) {
			s.wakeAt = at
			s.r.q.at(at, func(time.Duration) {})
		}
	}
	return len(res.Admitted)+len(res.Preemptions)+len(res.Bookings) > 0
}

func (s *engineShell) admit(a admission.Admitted, now time.Duration) {
	j := s.byKey[a.Key]
	t, _ := lifecycle.AdmissionTransition(a.Admission)
	if !s.apply(j, t, now) {
		s.eng.Rollback(a.Key)
		return
	}
	s.upsert(j)
	s.r.admitted(j, now)
	sj := j.shell.(*shellJob)
	s.r.logf(now, "%s: %s", j.spec.ID, conditionMessage(sj.wl))
	if a.Admission.Provisioning == nil {
		s.start(j, "", now)
		return
	}
	p := sj.wl.Status.Provisioning
	r := &request{job: j, attempt: p.Attempt, scaleUp: a.Admission.Provisioning.Class == admission.ClassAtomicScaleUp, pods: j.spec.Pods,
		requests: j.requests, selector: s.selectorOf(j)}
	if pool := lifecycle.NewNodePool(sj.wl.Status.Admission); pool != "" {
		// As the provisioning controller pins the request of a gang that
		// must fit one node to the pool of its node.
		r.selector[berthv1.CapacityPoolLabel] = pool
	}
	r.obj.Name = p.RequestName
	r.obj.CreationTimestamp = metav1.NewTime(epoch.Add(now))
	sj.req = r
	s.r.as.submit(r, now)
	s.answered(r, now)
}

func (s *engineShell) preempt(p admission.Preemption, now time.Duration) {
	j := s.byKey[p.Victim]
	sj := j.shell.(*shellJob)
	waiting := lifecycle.PhaseOf(sj.wl) == lifecycle.Reserved
	if !s.apply(j, lifecycle.PreemptionTransition(p), now) {
		s.eng.Rollback(p.Victim)
		return
	}
	s.r.logf(now, "%s: %s", j.spec.ID, lifecycle.PreemptionTransition(p).Message)
	s.r.as.cancel(sj.req)
	sj.req = nil
	if !waiting {
		// The job's adapter stops the job; once its pods are gone the
		// quota is released.
		s.r.requeue(j, now)
		s.apply(j, lifecycle.Requeue{Message: "the preempted job's pods are gone"}, now)
	}
	s.upsert(j)
}

func (s *engineShell) decideBooking(d admission.BookingDecision, now time.Duration) {
	j := s.byKey[d.Key]
	sj := j.shell.(*shellJob)
	if !s.apply(j, lifecycle.BookingTransition(d), now) {
		s.eng.Rollback(d.Key)
		return
	}
	msg := sj.wl.Status.Provisioning.Message
	if d.State == admission.BookingNoAnswer && sj.req != nil {
		// The engine cannot tell a backlog from a missing autoscaler; the
		// model can, and the log should say which it was.
		msg = fmt.Sprintf("no answer within the answer timeout: %s", s.r.as.whyUnanswered(sj.req, now))
	}
	s.r.logf(now, "%s: booking attempt %d: %s", j.spec.ID, d.Attempt, msg)
	switch d.Action {
	case admission.BookingStart:
		s.upsert(j)
		s.start(j, sj.req.obj.Name, now)
		return
	case admission.BookingEvict:
		s.r.requeue(j, now)
		s.apply(j, lifecycle.Requeue{Message: "the evicted job's pods are gone"}, now)
	}
	s.r.as.cancel(sj.req)
	sj.req = nil
	if d.GaveUp {
		j.state = jobGaveUp
		s.r.m.done++
	}
	s.upsert(j)
}

// start creates j's pods as its adapter does when it is admitted: the
// job's node selector, the flavors' labels and the domain's; booking names
// the request they consume.
func (s *engineShell) start(j *job, booking string, now time.Duration) {
	sj := j.shell.(*shellJob)
	sj.booked = booking != ""
	together := ""
	if s.quotaOnly && j.spec.Topology.Mode == "Required" {
		together = j.spec.Topology.Level
	}
	s.r.createPods(j, s.selectorOf(j), together, booking, now)
	placed := sj.wl.Status.Admission.Topology != nil
	for _, p := range j.pods {
		p.placed = placed
	}
	if rf := s.bookedFlavor(sj.wl); booking != "" && rf != nil && rf.Spec.Provisioning.PodsReadySeconds > 0 {
		attempt := sj.wl.Status.Provisioning.Attempt
		deadline := now + time.Duration(rf.Spec.Provisioning.PodsReadySeconds)*time.Second
		s.r.q.at(deadline, func(t time.Duration) { s.checkPodsReady(j, attempt, t) })
	}
}

// checkPodsReady is the controller's check, at the deadline, that every
// pod of a gang started on booked capacity runs.
func (s *engineShell) checkPodsReady(j *job, attempt int32, now time.Duration) {
	sj := j.shell.(*shellJob)
	p := sj.wl.Status.Provisioning
	if p == nil || p.Attempt != attempt || lifecycle.PhaseOf(sj.wl) != lifecycle.Admitted {
		return
	}
	if j.state == jobRunning {
		s.apply(j, lifecycle.PodsReady{Total: j.spec.Pods}, now)
		s.upsert(j)
		return
	}
	s.eng.ReportBooking(lifecycle.KeyOf(sj.wl), admission.BookingReport{Attempt: attempt, Answer: admission.AnswerPodsNotReady,
		Message: fmt.Sprintf("%d of %d pods were Ready in time", j.bound, j.spec.Pods)})
}

func (s *engineShell) bookedFlavor(wl *berthv1.Workload) *berthv1.ResourceFlavor {
	if p := wl.Status.Provisioning; p != nil {
		return s.flavors[p.Flavor]
	}
	return nil
}

// selectorOf is the node selector of j's pods once admitted.
func (s *engineShell) selectorOf(j *job) map[string]string {
	wl := j.shell.(*shellJob).wl
	sel := maps.Clone(j.spec.NodeSelector)
	if sel == nil {
		sel = map[string]string{}
	}
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		for _, f := range psa.Flavors {
			if rf := s.flavors[f]; rf != nil {
				maps.Copy(sel, rf.Spec.NodeLabels)
			}
		}
	}
	if t := wl.Status.Admission.Topology; t != nil {
		maps.Copy(sel, t.NodeSelector())
	}
	return sel
}

// answered reports an answer of the autoscaler to the engine, as the
// provisioning controller does: the first "no capacity" is recorded on the
// Workload; a gang that started hears only of the end of its booking.
func (s *engineShell) answered(r *request, now time.Duration) {
	j := r.job
	sj := j.shell.(*shellJob)
	if sj.req != r {
		return
	}
	rep := lifecycle.Report(sj.wl, &r.obj, epoch.Add(now))
	phase := lifecycle.PhaseOf(sj.wl)
	if phase != lifecycle.Reserved {
		if rep.Answer != admission.AnswerExpired && rep.Answer != admission.AnswerRevoked {
			return
		}
		rep.Consumed = j.bound > 0
	}
	if rep.Answer == admission.AnswerCapacityNotFound && sj.wl.Status.Provisioning.CapacityNotFoundSince == nil {
		since := metav1.NewTime(epoch.Add(now))
		s.apply(j, lifecycle.NoteBooking{Attempt: r.attempt, CapacityNotFoundSince: &since, Message: rep.Message}, now)
		s.upsert(j)
	}
	s.eng.ReportBooking(lifecycle.KeyOf(sj.wl), rep)
}

// started implements policy.
func (s *engineShell) started(*job, time.Duration) {}

// finished releases j's quota, as the job's adapter does when it ends.
func (s *engineShell) finished(j *job, now time.Duration) {
	sj := j.shell.(*shellJob)
	s.apply(j, lifecycle.Finish{Succeeded: true, Message: "the job ran its time"}, now)
	s.r.as.cancel(sj.req)
	sj.req = nil
	s.upsert(j)
}

// workloadOf is the Workload the job's adapter creates for j.
func workloadOf(name string, j *job, now time.Duration) *berthv1.Workload {
	wl := &berthv1.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: j.spec.Namespace, UID: types.UID(j.spec.ID), Generation: 1,
			CreationTimestamp: metav1.NewTime(epoch.Add(now))},
		Spec: berthv1.WorkloadSpec{QueueName: j.spec.LocalQueue, Priority: j.spec.Priority, PodSets: []berthv1.PodSet{{
			Name: "main", Count: j.spec.Pods, Requests: j.spec.Requests,
			Template: &berthv1.PodSetTemplate{Spec: corev1.PodSpec{NodeSelector: j.spec.NodeSelector}},
		}}},
	}
	if j.headroomPool != "" {
		wl.Spec.PodSets[0].Template.Spec.Tolerations = []corev1.Toleration{{Key: berthv1.HeadroomLabel, Operator: corev1.TolerationOpEqual,
			Value: j.headroomPool, Effect: corev1.TaintEffectNoSchedule}}
	}
	if t := j.spec.Topology; t.Mode != "" {
		wl.Spec.Topology = &berthv1.TopologyRequest{Mode: berthv1.TopologyMode(t.Mode), Level: t.Level}
	}
	return wl
}

// conditionMessage is what the Workload's status says of it now.
func conditionMessage(wl *berthv1.Workload) string {
	for _, t := range []string{berthv1.ConditionAdmitted, berthv1.ConditionQuotaReserved} {
		if c := lifecycle.Condition(wl, t); c != nil {
			return c.Reason + ": " + c.Message
		}
	}
	return string(lifecycle.PhaseOf(wl))
}

// explainWaiting logs, for every job still waiting at the end, what the
// engine says of it.
func (s *engineShell) explainWaiting(now time.Duration) {
	for _, j := range s.r.jobs {
		if j.state != jobWaiting || j.shell == nil {
			continue
		}
		wl := j.shell.(*shellJob).wl
		if x, ok := s.eng.Explain(lifecycle.KeyOf(wl)); ok {
			s.r.logf(now, "%s: still waiting, position %d: %s: %s", j.spec.ID, x.Position, x.Reason, x.Message)
			continue
		}
		s.r.logf(now, "%s: still %s: %s", j.spec.ID, lifecycle.PhaseOf(wl), conditionMessage(wl))
	}
}
