package scheduler

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/controllers/metrics"
)

// record is what the scheduler knows of one replica whose quota record is
// (or is to be) its pod.
type record struct {
	state lifecycle.RecordState
	ref   lifecycle.RecordRef
	// wl is the Workload the replica stands for, as fed to the engine.
	wl        *berthv1.Workload
	admission *berthv1.Admission
	// created is when the replica's pod was created: its admission wait
	// is counted from then.
	created time.Time
}

// outdatedBy reports whether the engine decides, or decided, on a spec of
// the replica other than wl's: it waits, or is admitted and not yet
// released, as a Workload that differs from wl in priority, priority class,
// pod sets, topology or queue. A replica running on its record is not:
// its record, not its pod's labels, says what it runs on (resize evicts a
// replica that grew).
func (r *record) outdatedBy(wl *berthv1.Workload) bool {
	if r.wl == nil || (r.state != lifecycle.RecordOffered && r.state != lifecycle.RecordAdmitted) {
		return false
	}
	return !equality.Semantic.DeepEqual(r.wl.Spec, wl.Spec)
}

// records are the replicas offered or admitted without a Workload, by
// engine key.
type records map[admission.WorkloadKey]*record

// shadows reports whether key is a replica whose pod holds, or is about
// to hold, its quota: no Workload of that name is the replica's.
func (rs records) shadows(key admission.WorkloadKey) bool {
	r := rs[key]
	return r != nil && (r.state == lifecycle.RecordAdmitted || r.state == lifecycle.RecordStarted)
}

// Offer gives the engine a replica that has no Workload: wl is the Workload
// it would have, not created. It is queued like any workload; once a cycle
// admits it, the replica is released with its record (RecordAdmitted, with
// the admission), and if it needs a status to live in it is taken out of the
// engine and needs its Workload (RecordNeedsWorkload): see settleOffers.
// Either way ref.Wake is called. Asked again, Offer returns where the
// replica stands. Offers made while the scheduler loads wait for its first
// cycle, which comes after the load.
//
// The replica is released with the Workload it is offered as, and its
// record charges it for that spec and keeps its priority while its pod
// lives. So the engine must have decided on that very spec: a replica
// offered again as another Workload — its pod relabelled with another
// priority class, or its pod set changed — while it waits or is admitted
// but not yet released, is withdrawn (an admission it got is given back)
// and offered as it is now, checked as a new offer is (its LocalQueue may
// refuse its new priority class). It is never released on an admission
// decided for a spec it no longer has.
func (s *Scheduler) Offer(ctx context.Context, wl *berthv1.Workload, ref lifecycle.RecordRef) (lifecycle.RecordState, *berthv1.Admission, error) {
	key := lifecycle.KeyOf(wl)
	s.mu.Lock()
	if r := s.records[key]; r != nil && !r.outdatedBy(wl) {
		s.mu.Unlock()
		return r.state, r.admission, nil
	}
	s.mu.Unlock()
	q, err := ResolveQueue(ctx, s.client, wl)
	if err != nil {
		return 0, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.records[key]; r != nil {
		if !r.outdatedBy(wl) {
			return r.state, r.admission, nil
		}
		log.FromContext(ctx).V(1).Info("replica offered again as it is now: it changed since the engine last decided on it",
			"workload", key, "was", r.state)
		s.forgetLocked(key, r)
	}
	if err := s.upsertLocked(wl, q); err != nil {
		// Its Workload reports what is wrong with it.
		s.records[key] = &record{state: lifecycle.RecordNeedsWorkload, ref: ref}
		return lifecycle.RecordNeedsWorkload, nil, nil //nolint:nilerr // reported on the Workload
	}
	s.records[key] = &record{state: lifecycle.RecordOffered, ref: ref, wl: wl, created: wl.CreationTimestamp.Time}
	return lifecycle.RecordOffered, nil, nil
}

// Started tells the scheduler that a replica's pod holds its record: wl is
// the admitted Workload the record stands for (lifecycle.RecordedWorkload).
// A restarted scheduler learns its records so, as well as from its load.
func (s *Scheduler) Started(ctx context.Context, wl *berthv1.Workload, ref lifecycle.RecordRef) error {
	key := lifecycle.KeyOf(wl)
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.records[key]; r != nil && r.state == lifecycle.RecordStarted {
		return nil
	}
	s.mu.Unlock()
	q, err := ResolveQueue(ctx, s.client, wl)
	s.mu.Lock()
	if err != nil {
		return err
	}
	if err := s.upsertLocked(wl, q); err != nil {
		return fmt.Errorf("replica %s: %w", ref.Pod, err)
	}
	s.records[key] = &record{state: lifecycle.RecordStarted, ref: ref, wl: wl, admission: wl.Status.Admission}
	log.FromContext(ctx).V(2).Info("replica runs on its record", "workload", key)
	return nil
}

// ResyncRecords feeds the engine again, with their queue's facts as they
// are now, the replicas of LocalQueue queue in namespace that wait or run
// without a Workload: the workload controller does so for Workloads when a
// queue changes. A waiting replica of a queue that is gone or stopped is
// then held, and queued with a Workload, where the reason is written; a
// running one of a queue drained with HoldAndDrain is evicted.
func (s *Scheduler) ResyncRecords(ctx context.Context, namespace, queue string) error {
	s.mu.Lock()
	var wls []*berthv1.Workload
	for key, r := range s.records {
		if key.Namespace == namespace && r.wl != nil && r.wl.Spec.QueueName == queue &&
			(r.state == lifecycle.RecordOffered || r.state == lifecycle.RecordStarted) {
			wls = append(wls, r.wl)
		}
	}
	s.mu.Unlock()
	for _, wl := range wls {
		q, err := ResolveQueue(ctx, s.client, wl)
		if err != nil {
			return err
		}
		s.mu.Lock()
		r := s.records[lifecycle.KeyOf(wl)]
		if r != nil && r.wl == wl {
			err = s.upsertLocked(wl, q)
		}
		s.mu.Unlock()
		if err != nil {
			return fmt.Errorf("replica %s: %w", r.ref.Pod, err)
		}
	}
	return nil
}

// Forget tells the scheduler that a replica's pod has ended or is gone, or
// that its gang no longer resolves: a quota its record held is given back.
// A record whose pod still runs is kept, whatever its gang: a tenant who
// changes a running replica's ReplicaSet selector label makes the
// ReplicaSet let the pod go (and create another), and the pod runs on,
// through a grace period the tenant chose, on the quota of its record.
// sweepRecords forgets it once its pod is gone or has ended.
func (s *Scheduler) Forget(ctx context.Context, key admission.WorkloadKey) {
	s.mu.Lock()
	r := s.records[key]
	s.mu.Unlock()
	if r == nil || (r.state == lifecycle.RecordStarted && s.podHolds(ctx, r.ref)) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.records[key] == r {
		s.forgetLocked(key, r)
	}
}

func (s *Scheduler) forgetLocked(key admission.WorkloadKey, r *record) {
	delete(s.records, key)
	if r.state != lifecycle.RecordNeedsWorkload {
		s.deleteLocked(key)
	}
}

// podHolds reports whether the pod of ref, by UID, still holds its
// record's quota as the cache shows it: it exists and has not ended. A
// read that fails keeps the quota: the next sweep reads again.
func (s *Scheduler) podHolds(ctx context.Context, ref lifecycle.RecordRef) bool {
	p := &corev1.Pod{}
	if err := s.client.Get(ctx, ref.Pod, p); err != nil {
		return !apierrors.IsNotFound(err)
	}
	return p.UID == ref.UID && lifecycle.Holds(p)
}

// sweepRecords forgets the records whose pod is gone or has ended. A
// replica's reconciler forgets its record when it sees its pod end or go;
// a pod that left its gang while it ran (see Forget), or whose gang a
// restarted berth no longer resolves, is seen by no reconciler of the
// record's key, and only this sweep, on every resync, gives its quota back.
func (s *Scheduler) sweepRecords(ctx context.Context) {
	s.mu.Lock()
	started := map[admission.WorkloadKey]*record{}
	for key, r := range s.records {
		if r.state == lifecycle.RecordStarted {
			started[key] = r
		}
	}
	s.mu.Unlock()
	for key, r := range started {
		if s.podHolds(ctx, r.ref) {
			continue
		}
		s.mu.Lock()
		if s.records[key] == r {
			s.forgetLocked(key, r)
		}
		s.mu.Unlock()
	}
}

// settleOffers applies a cycle's result to the offered replicas, with s.mu
// held, and returns the admissions that are Workloads' to write; it drops
// from res the bookings of offered replicas. An offered replica the cycle
// admitted on existing capacity is to be released with its record. One that
// waits its turn — for quota, behind others, for victims to go — stays in
// the engine, without a Workload: why it waits is the engine's to explain
// (the visibility API, kubectl berth explain). One that needs a status to
// live in — a booking, a pin to a node that does not exist yet, a reason
// that asks someone to act — is taken out of the engine and queued with a
// Workload, as every other gang is.
func (s *Scheduler) settleOffers(res *admission.Result) []admission.Admitted {
	out := res.Admitted[:0:0]
	var woken []func()
	toWorkload := func(key admission.WorkloadKey, r *record) {
		r.state = lifecycle.RecordNeedsWorkload
		s.deleteLocked(key)
		woken = append(woken, r.ref.Wake)
	}
	for _, a := range res.Admitted {
		r := s.records[a.Key]
		if r == nil || r.state != lifecycle.RecordOffered {
			out = append(out, a)
			continue
		}
		if a.Admission.Provisioning != nil || a.Admission.Topology.AwaitsNode() {
			toWorkload(a.Key, r)
			continue
		}
		_, r.admission = lifecycle.AdmissionTransition(a.Admission)
		r.state = lifecycle.RecordAdmitted
		woken = append(woken, r.ref.Wake)
		s.queues.admit(a.Key)
		s.opts.Metrics.Admission(metrics.ResultAdmitted)
		s.opts.Metrics.Queues.Admitted(a.Admission.ClusterQueue)
		s.opts.Metrics.ObserveAdmissionWait(a.Admission.ClusterQueue, metrics.PathExisting, s.now().Sub(r.created))
	}
	bookings := res.Bookings[:0:0]
	for _, d := range res.Bookings {
		if r := s.records[d.Key]; r != nil && r.state == lifecycle.RecordOffered {
			toWorkload(d.Key, r)
			continue
		}
		bookings = append(bookings, d)
	}
	res.Bookings = bookings
	for _, p := range res.Pending {
		if r := s.records[p.Key]; r != nil && r.state == lifecycle.RecordOffered && (actionable(p.Reason) || capacityWait(p)) {
			toWorkload(p.Key, r)
		}
	}
	for _, w := range woken {
		w()
	}
	return out
}

// evictRecord carries out a preemption or an eviction of a replica whose
// pod holds its record: the pod is deleted (one write), and its quota is
// given back once the pod is gone (Forget). Its controller creates a new,
// gated pod, a new replica that queues again. It reports whether key was
// such a replica.
func (s *Scheduler) evictRecord(ctx context.Context, key admission.WorkloadKey, why string) bool {
	s.mu.Lock()
	r := s.records[key]
	s.mu.Unlock()
	if r == nil || (r.state != lifecycle.RecordStarted && r.state != lifecycle.RecordAdmitted) {
		return false
	}
	pod := &corev1.Pod{}
	pod.Namespace, pod.Name = r.ref.Pod.Namespace, r.ref.Pod.Name
	err := s.client.Delete(ctx, pod, client.Preconditions{UID: &r.ref.UID})
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		// That pod is gone already, whatever the cache still shows.
		s.mu.Lock()
		if s.records[key] == r {
			s.forgetLocked(key, r)
		}
		s.mu.Unlock()
	case err != nil:
		logWriteError(ctx, err, "deleting the pod of an evicted replica", key)
		s.undo(key)
	default:
		log.FromContext(ctx).V(1).Info("evicted a replica by deleting its pod", "workload", key, "pod", r.ref.Pod, "why", why)
	}
	return true
}

// loadRecords feeds the engine every replica whose pod holds its record,
// before the first cycle: their quota is counted as a Workload's is.
func (s *Scheduler) loadRecords(ctx context.Context) error {
	list := &corev1.PodList{}
	if err := s.client.List(ctx, list, client.HasLabels{berthv1.WorkloadLabel, berthv1.QueueNameLabel}); err != nil {
		return fmt.Errorf("listing released pods: %w", err)
	}
	for i := range list.Items {
		p := &list.Items[i]
		rec, ok, err := lifecycle.RecordOf(p)
		if !ok || !lifecycle.Holds(p) {
			continue
		}
		if err != nil {
			log.FromContext(ctx).Info("pod record not counted", "error", err.Error())
			continue
		}
		ref := lifecycle.RecordRef{Pod: client.ObjectKeyFromObject(p), UID: p.UID, Wake: func() {}}
		if err := s.Started(ctx, lifecycle.RecordedWorkload(p, rec), ref); err != nil {
			return err
		}
	}
	return nil
}
