package jobs

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// Records keeps the quota of replicas whose pod is their quota record
// (berthv1.AdmissionRecordAnnotation) instead of a Workload.
// *scheduler.Scheduler implements it.
type Records interface {
	// Offer gives the engine a replica that has no Workload; wl is the
	// one it would have. It says where the replica stands. It answers
	// RecordAdmitted only when the engine admitted wl's spec as it is:
	// a replica that changed since (another priority class, other pod
	// sets) is offered again, and decided on again, as it is now.
	Offer(ctx context.Context, wl *berthv1.Workload, ref lifecycle.RecordRef) (lifecycle.RecordState, *berthv1.Admission, error)
	// Started says that the replica's pod holds its record; wl is the
	// admitted Workload the record stands for.
	Started(ctx context.Context, wl *berthv1.Workload, ref lifecycle.RecordRef) error
	// Forget says that the replica's pod has ended or is gone, or that its
	// gang no longer resolves; a record whose pod still runs is kept until
	// the pod ends or goes.
	Forget(ctx context.Context, key admission.WorkloadKey)
}

// Recordable is a gang of one pod that may run on a record on its pod
// instead of a Workload: a Deployment replica or a StatefulSet ordinal.
type Recordable interface {
	// RecordPod is the gang's pod, and whether the gang may be recorded
	// on it (it is a queued replica).
	RecordPod() (*corev1.Pod, bool)
}

// recordPod is the pod of a gang that may hold its own record.
func (r *Reconciler) recordPod(g gang) (*corev1.Pod, bool) {
	rec, ok := g.job.(Recordable)
	if !ok || r.opts.Records == nil {
		return nil, false
	}
	return rec.RecordPod()
}

// ref names a replica's pod for the scheduler, with a wake-up that
// reconciles the replica again.
func (r *Reconciler) ref(p *corev1.Pod) lifecycle.RecordRef {
	obj := p.DeepCopy()
	return lifecycle.RecordRef{Pod: client.ObjectKeyFromObject(p), UID: p.UID, Wake: func() {
		go func() { r.wakes <- event.GenericEvent{Object: obj} }()
	}}
}

// recorded handles a replica whose pod carries a record: it runs on it
// while the pod lives, whatever Workload of its name exists (tenants create
// none), and gives its quota back when the pod ends. A record that cannot
// be trusted is not counted; the replica is then what its Workload says.
func (r *Reconciler) recorded(ctx context.Context, g gang) (bool, error) {
	p, ok := r.recordPod(g)
	if !ok {
		return false, nil
	}
	rec, has, err := lifecycle.RecordOf(p)
	if !has {
		return false, nil
	}
	if err != nil {
		log.FromContext(ctx).Info("pod record not counted", "error", err.Error())
		return false, nil
	}
	wl := lifecycle.RecordedWorkload(p, rec)
	if !lifecycle.Holds(p) {
		r.opts.Records.Forget(ctx, lifecycle.KeyOf(wl))
		return true, nil
	}
	if err := r.opts.Records.Started(ctx, wl, r.ref(p)); err != nil {
		return true, err
	}
	// A replica that grew under its record (a resized pod) is a larger
	// gang: the engine evicts it, as it evicts a Workload's.
	_, err = r.resize(ctx, g.job, wl)
	return true, err
}

// offer queues a gated replica without a Workload, and reports whether it
// took the replica: once a cycle admits it, it is released with its record;
// one that needs a status of its own (a booking, a reason to act on) is
// queued with a Workload, as every other gang.
func (r *Reconciler) offer(ctx context.Context, g gang) (reconcile.Result, bool, error) {
	p, ok := r.recordPod(g)
	if !ok || !r.opts.OfferReplicas || !g.job.IsSuspended() || !p.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, false, nil
	}
	if finished, _, _ := g.job.Finished(); finished {
		return reconcile.Result{}, false, nil
	}
	wl, res, err := r.newWorkload(ctx, g)
	if wl == nil {
		return res, true, err
	}
	wl.UID, wl.CreationTimestamp = p.UID, p.CreationTimestamp
	ref := r.ref(p)
	state, adm, err := r.opts.Records.Offer(ctx, wl, ref)
	if err != nil {
		return reconcile.Result{}, true, fmt.Errorf("offering replica %s: %w", ref.Pod, err)
	}
	switch state {
	case lifecycle.RecordNeedsWorkload:
		return reconcile.Result{}, false, nil
	case lifecycle.RecordAdmitted:
		// The engine admitted this very spec (see Records.Offer): the
		// record startRecorded writes charges, and keeps the priority of,
		// exactly what was admitted.
		wl.Status.Admission = adm
		res, err := r.startRecorded(ctx, g.job, wl, ref)
		return res, true, err
	}
	return reconcile.Result{}, true, nil // the cycle wakes it, or its pod holds the record
}

// startRecorded releases an admitted replica with its record: one patch
// of its pod, the only write such a replica costs.
func (r *Reconciler) startRecorded(ctx context.Context, job GenericJob, wl *berthv1.Workload, ref lifecycle.RecordRef) (reconcile.Result, error) {
	scheduling, missing, err := r.admittedScheduling(ctx, job, wl)
	if err != nil {
		return reconcile.Result{}, err
	}
	if missing != "" {
		r.recorder.Eventf(job.Object(), nil, corev1.EventTypeWarning, EventFlavorNotFound, "Start",
			"ResourceFlavor %q of the admission does not exist: create it so the job can start", missing)
		return reconcile.Result{RequeueAfter: flavorRetry}, nil
	}
	enc, err := lifecycle.EncodeRecord(lifecycle.Record{Workload: wl.Name, Spec: wl.Spec, Admission: *wl.Status.Admission})
	if err != nil {
		return reconcile.Result{}, err
	}
	for i := range scheduling {
		scheduling[i].Annotations = SetAnnotations(scheduling[i].Annotations, map[string]string{berthv1.AdmissionRecordAnnotation: enc})
	}
	job.SetScheduling(scheduling)
	job.Resume()
	if err := r.write(ctx, job); err != nil {
		return reconcile.Result{}, fmt.Errorf("starting replica %s: %w", ref.Pod, err)
	}
	if rel, ok := job.(Releaser); ok && rel.Released() == 0 {
		// Held (it would run outside its admission): no Workload carries
		// a PodsHeld condition yet, so the events alone say why.
		for _, h := range rel.Held() {
			r.reportHeldPod(job, nil, h)
		}
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, r.opts.Records.Started(ctx, wl, ref)
}
