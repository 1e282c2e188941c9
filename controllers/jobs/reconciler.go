package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/controllers/lifecycle/persist"
)

// Event reasons recorded on jobs.
const (
	EventSuspended       = "Suspended"
	EventStarted         = "Started"
	EventStopped         = lifecycle.EventStopped
	EventCreatedWorkload = "CreatedWorkload"
	EventInvalidJob      = "InvalidJob"
	EventFlavorNotFound  = "FlavorNotFound"
	// EventPodHeld is a pod that claims a gang but that berth keeps gated.
	EventPodHeld = "PodHeld"
	// EventFinalizerRestored is a Workload whose finalizer berth put back.
	EventFinalizerRestored = "FinalizerRestored"
)

// flavorRetry is how long to wait for a missing ResourceFlavor.
const flavorRetry = 10 * time.Second

// podsPoll is how often a job whose pods still run on quota it is to give
// back (evicted, finished or shrunk) is looked at again: berth does not
// watch a job's pods, and the job's own status may not change when the last
// of them goes.
const podsPoll = 2 * time.Second

// Reconciler keeps the jobs of one Kind and their Workloads in step.
type Reconciler struct {
	client   Store
	reader   client.Reader
	recorder events.EventRecorder
	writer   persist.Writer
	kind     Kind
	opts     Options
	// memo skips reading a gang again on events that changed neither the
	// job nor its Workload.
	memo *specMemo
	// indexed: its cache indexes are registered (Index).
	indexed bool
	// assumed are the gangs' writes the cache may not show yet (Assumer).
	assumed assumedWrites
	// created are the Workloads created that the cache may not show yet.
	created createdWorkloads
	// finishing are the finished jobs' Workloads whose running pods were
	// reported (finish.go).
	finishing finishingWorkloads
	// wakes reconcile a replica offered for admission without a Workload
	// once the engine decided (records.go).
	wakes chan event.GenericEvent
}

// NewReconciler returns the reconciler for jobs of kind; reader re-reads
// Workloads after a conflict (an uncached reader).
func NewReconciler(c Store, reader client.Reader, recorder events.EventRecorder, kind Kind, opts Options) *Reconciler {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.IncompleteGrace <= 0 {
		opts.IncompleteGrace = DefaultIncompleteGrace
	}
	return &Reconciler{client: c, reader: reader, recorder: recorder, kind: kind, opts: opts,
		writer: persist.Writer{Client: c, Reader: reader, Clock: opts.Clock}, memo: newSpecMemo(kind),
		wakes: make(chan event.GenericEvent)}
}

// +kubebuilder:rbac:groups=berth.dev,resources=workloads,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=berth.dev,resources=workloads/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=berth.dev,resources=resourceflavors,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one job and the Workloads of its gangs in step.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if res, ok := r.kind.(Resolver); ok {
		return r.reconcileResolved(ctx, res, req)
	}
	obj := r.kind.NewObject()
	if err := r.client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, r.deleteWorkloads(ctx, req.Namespace, req.Name, nil)
		}
		return reconcile.Result{}, fmt.Errorf("reading %s %s: %w", r.kind.GVK().Kind, req, err)
	}
	if _, ok := obj.GetLabels()[berthv1.QueueNameLabel]; !ok {
		return reconcile.Result{}, nil
	}
	if child, err := r.isChild(ctx, obj); err != nil || child {
		return reconcile.Result{}, err
	}
	gangs, err := r.gangs(ctx, obj)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		// A job being deleted releases its quota once its pods are gone
		// (orphan or foreground deletion can keep the object a while).
		for _, g := range gangs {
			if g.job.IsActive() {
				return reconcile.Result{}, nil
			}
		}
		return reconcile.Result{}, r.deleteWorkloads(ctx, req.Namespace, req.Name, nil)
	}
	var result reconcile.Result
	keep := map[string]bool{}
	for _, g := range gangs {
		keep[g.workload] = true
		res, err := r.reconcileGang(ctx, g)
		if err != nil {
			return reconcile.Result{}, err
		}
		if res.RequeueAfter > 0 && (result.RequeueAfter == 0 || res.RequeueAfter < result.RequeueAfter) {
			result = res
		}
	}
	if _, ok := r.kind.(Splitter); ok {
		// Gangs scaled away release their quota.
		return result, r.deleteWorkloads(ctx, req.Namespace, req.Name, keep)
	}
	return result, nil
}

// gang is one GenericJob and the name of its Workload.
type gang struct {
	job      GenericJob
	workload string
	// key of a Resolver kind's gang.
	key string
}

// gangs returns the gangs of obj: the object itself, or what its Splitter
// says.
func (r *Reconciler) gangs(ctx context.Context, obj client.Object) ([]gang, error) {
	s, ok := r.kind.(Splitter)
	if !ok {
		job, err := r.wrap(ctx, obj)
		if err != nil {
			return nil, err
		}
		return []gang{{job: job, workload: WorkloadName(r.kind.GVK().Kind, obj)}}, nil
	}
	gs, err := s.Gangs(ctx, r.client, obj)
	if err != nil {
		return nil, fmt.Errorf("reading gangs of %s %s: %w", r.kind.GVK().Kind, client.ObjectKeyFromObject(obj), err)
	}
	out := make([]gang, 0, len(gs))
	for _, g := range gs {
		out = append(out, gang{job: g, workload: GangWorkloadName(r.kind.GVK().Kind, obj, g.WorkloadSuffix())})
	}
	return out, nil
}

// wrap returns the GenericJob of obj: its kind's Wrap, or Load for a kind
// whose gang is described by more than its object (Loader).
func (r *Reconciler) wrap(ctx context.Context, obj client.Object) (GenericJob, error) {
	l, ok := r.kind.(Loader)
	if !ok {
		return r.kind.Wrap(obj), nil
	}
	job, err := l.Load(ctx, r.client, obj)
	if err != nil {
		return nil, fmt.Errorf("reading what describes the gang of %s %s: %w", r.kind.GVK().Kind, client.ObjectKeyFromObject(obj), err)
	}
	return job, nil
}

// isChild reports whether obj is controlled by an object of a kind berth
// manages as a whole (a JobSet's Job): its parent's Workload covers it.
func (r *Reconciler) isChild(ctx context.Context, obj client.Object) (bool, error) {
	parent, _, err := Workloads{Cache: r.client, API: r.reader}.ParentOf(ctx, obj, r.opts.Parents)
	return parent != nil, err
}

// reconcileGang brings one gang and its Workload in step.
func (r *Reconciler) reconcileGang(ctx context.Context, g gang) (reconcile.Result, error) {
	job, obj := g.job, g.job.Object()
	wl := &berthv1.Workload{}
	if done, err := r.recorded(ctx, g); done {
		return reconcile.Result{}, err
	}
	key := client.ObjectKey{Namespace: obj.GetNamespace(), Name: g.workload}
	err := r.client.Get(ctx, key, wl)
	if apierrors.IsNotFound(err) {
		if r.created.unseen(key, r.opts.Clock.Now()) {
			// Created a moment ago: its own event reconciles the gang.
			return reconcile.Result{RequeueAfter: createdTTL}, nil
		}
		if res, done, err := r.offer(ctx, g); done {
			return res, err
		}
		return r.createWorkload(ctx, g)
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("reading workload %s: %w", g.workload, err)
	}
	r.created.seen(key)
	if finished, succeeded, msg := job.Finished(); finished {
		return r.finishJob(ctx, job, wl, succeeded, msg)
	}
	if restored, err := r.restoreFinalizer(ctx, job, wl); err != nil || restored {
		return reconcile.Result{}, err
	}
	r.assumed.give(key, job)
	defer r.assumed.keep(key, job)
	var res reconcile.Result
	switch phase := lifecycle.PhaseOf(wl); {
	case phase == lifecycle.Evicting:
		res, err = r.stop(ctx, job, wl)
	case lifecycle.MayRun(phase) && (!job.IsSuspended() || wl.DeletionTimestamp.IsZero()):
		// A Workload being deleted keeps its quota while its job runs, but
		// a job that has not started does not start on it.
		res, err = r.start(ctx, job, wl)
	default:
		err = r.hold(ctx, job, wl)
	}
	if herr := r.reportHeld(ctx, job, wl); err == nil {
		err = herr
	}
	return res, err
}

// restoreFinalizer puts berth's finalizer back on the Workload of a live
// job that lost it, and reports whether it did. The finalizer keeps the
// Workload, and its quota, until the job's pods are gone: without it,
// deleting the job would free the quota while its pods still run out
// their grace period. Tenants cannot remove it (the tenant Workload
// policy); this covers whoever else did.
func (r *Reconciler) restoreFinalizer(ctx context.Context, job GenericJob, wl *berthv1.Workload) (bool, error) {
	if !wl.DeletionTimestamp.IsZero() || lifecycle.IsFinished(wl) || controllerutil.ContainsFinalizer(wl, berthv1.WorkloadFinalizer) {
		return false, nil
	}
	controllerutil.AddFinalizer(wl, berthv1.WorkloadFinalizer)
	if err := r.client.Update(ctx, wl); err != nil {
		return false, fmt.Errorf("restoring the finalizer of workload %s: %w", wl.Name, err)
	}
	r.recorder.Eventf(job.Object(), wl, corev1.EventTypeWarning, EventFinalizerRestored, "Protect",
		"workload %s had lost finalizer %s: restored, so that its quota stays held until the job's pods are gone", wl.Name, berthv1.WorkloadFinalizer)
	return true, nil
}

// reportHeld says which pods that claim the gang berth keeps gated, and
// why — pods beyond the admitted count, or that are not the gang's own —
// in a Warning event per pod and in the Workload's PodsHeld condition,
// which it removes once none is held.
func (r *Reconciler) reportHeld(ctx context.Context, job GenericJob, wl *berthv1.Workload) error {
	rel, ok := job.(Releaser)
	if !ok {
		return nil
	}
	held := rel.Held()
	pods := make([]lifecycle.HeldPod, 0, len(held))
	for _, h := range held {
		r.reportHeldPod(job, wl, h)
		pods = append(pods, lifecycle.HeldPod{Name: h.Name, Why: h.Why})
	}
	if len(pods) == 0 && lifecycle.Condition(wl, berthv1.ConditionPodsHeld) == nil {
		return nil
	}
	if _, err := r.writer.Write(ctx, wl, lifecycle.HoldPods{Pods: pods}); err != nil {
		return fmt.Errorf("recording the held pods of workload %s: %w", wl.Name, err)
	}
	return nil
}

// reportHeldPod records a PodHeld warning about the held pod itself (kubectl
// describe shows it there), related to the Workload when there is one, else
// to the job. Events about one object with one reason form one series that
// keeps its first note, so several held pods reported on the job alone
// would have shown only the first pod's reason.
func (r *Reconciler) reportHeldPod(job GenericJob, wl *berthv1.Workload, h ExcludedPod) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: job.Object().GetNamespace(), Name: h.Name, UID: h.UID}}
	var related runtime.Object = job.Object()
	if wl != nil {
		related = wl
	}
	r.recorder.Eventf(pod, related, corev1.EventTypeWarning, EventPodHeld, "Release", "pod %s stays gated: %s", h.Name, h.Why)
}

// write persists the in-memory changes of a job.
func (r *Reconciler) write(ctx context.Context, job GenericJob) error {
	if w, ok := job.(Writer); ok {
		return w.Write(ctx, r.client)
	}
	return r.client.Update(ctx, job.Object())
}

// invalid reports a job that cannot be queued as it is; an update of the
// job requeues it.
func (r *Reconciler) invalid(job GenericJob, wl *berthv1.Workload, err error) error {
	if !isInvalid(err) {
		return err
	}
	var related runtime.Object // a nil *Workload in the interface would not be nil
	if wl != nil {
		related = wl
	}
	reason := EventInvalidJob
	var ie *InvalidError
	if errors.As(err, &ie) && ie.reason != "" {
		reason = ie.reason
	}
	r.recorder.Eventf(job.Object(), related, corev1.EventTypeWarning, reason, "Queue", "cannot queue: %v", err)
	return nil
}

// hold keeps a job whose workload is not admitted suspended, and keeps the
// workload's pod sets and priority in step with the job while it waits.
func (r *Reconciler) hold(ctx context.Context, job GenericJob, wl *berthv1.Workload) error {
	obj := job.Object()
	if mustStop(job) {
		// The API accepts a changed pod template only once the job is
		// suspended: its own scheduling is restored by the next pass.
		job.Suspend()
		if err := r.write(ctx, job); err != nil {
			return fmt.Errorf("suspending %s: %w", client.ObjectKeyFromObject(obj), err)
		}
		r.recorder.Eventf(obj, wl, corev1.EventTypeNormal, EventSuspended, "Suspend", "suspended until berth admits it")
		return nil
	}
	if wl.Status.Admission != nil || lifecycle.IsFinished(wl) || !wl.DeletionTimestamp.IsZero() {
		return nil
	}
	if restoreScheduling(job) {
		if err := r.write(ctx, job); err != nil {
			return fmt.Errorf("restoring the scheduling of %s: %w", client.ObjectKeyFromObject(obj), err)
		}
		return nil
	}
	_, err := r.syncSpec(ctx, job, wl)
	return err
}

// syncSpec updates the workload's pod sets and priority to the job's, or
// dequeues the workload of a job that cannot be queued as it is now, and
// reports whether it did that.
func (r *Reconciler) syncSpec(ctx context.Context, job GenericJob, wl *berthv1.Workload) (bool, error) {
	if r.memo.unchanged(job, wl) {
		return false, nil
	}
	spec, err := r.spec(ctx, job)
	if err != nil {
		r.memo.forget(wl.Namespace, wl.Name)
		return true, r.dequeue(ctx, job, wl, err)
	}
	if spec.equals(&wl.Spec) {
		r.memo.inStepNow(job, wl)
		return false, nil
	}
	wl.Spec.PodSets, wl.Spec.Priority, wl.Spec.PriorityClassName = spec.podSets, spec.priority, spec.priorityClassName
	wl.Spec.Topology = spec.topology
	if err := r.client.Update(ctx, wl); err != nil {
		r.memo.forget(wl.Namespace, wl.Name)
		return false, fmt.Errorf("updating pod sets of workload %s: %w", wl.Name, err)
	}
	r.memo.inStepNow(job, wl) // the update set wl's new generation
	return false, nil
}

// start runs an admitted job on the flavors of its admission. A job that
// changed since its Workload was admitted is not started on that admission:
// it is queued again as it is now.
func (r *Reconciler) start(ctx context.Context, job GenericJob, wl *berthv1.Workload) (reconcile.Result, error) {
	if !job.IsSuspended() {
		_, wait, err := r.resizeRunning(ctx, job, wl)
		return reconcile.Result{RequeueAfter: wait}, err
	}
	var wait time.Duration
	if job.IsActive() {
		// A started gang of pods with a new gated member (a replacement):
		// the new pod is released on the running admission unless the gang
		// grew.
		stopped, w, err := r.resizeRunning(ctx, job, wl)
		if err != nil || stopped {
			return reconcile.Result{}, err
		}
		wait = w
	} else if changed, err := r.changedSince(ctx, job, wl); err != nil || changed {
		return reconcile.Result{}, err
	}
	res, err := r.resume(ctx, job, wl)
	if wait > 0 && (res.RequeueAfter == 0 || wait < res.RequeueAfter) {
		res.RequeueAfter = wait // a shrink waits for its removed pods to end
	}
	return res, err
}

// resume starts an admitted job, or releases the gated pods of a gang, on
// the flavors of its admission.
func (r *Reconciler) resume(ctx context.Context, job GenericJob, wl *berthv1.Workload) (reconcile.Result, error) {
	obj := job.Object()
	if !releasable(wl) {
		return reconcile.Result{}, nil // started again once pinned to its node
	}
	scheduling, missing, err := r.admittedScheduling(ctx, job, wl)
	if err != nil {
		return reconcile.Result{}, err
	}
	if missing != "" {
		r.recorder.Eventf(obj, wl, corev1.EventTypeWarning, EventFlavorNotFound, "Start",
			"ResourceFlavor %q of the admission does not exist: create it so the job can start", missing)
		return reconcile.Result{RequeueAfter: flavorRetry}, nil
	}
	if err := saveOriginalScheduling(job); err != nil {
		return reconcile.Result{}, err
	}
	if scheduling, err = r.handOff(ctx, job, wl, scheduling); err != nil {
		return reconcile.Result{}, err
	}
	job.SetScheduling(scheduling)
	job.Resume()
	if err := r.write(ctx, job); err != nil {
		return reconcile.Result{}, fmt.Errorf("starting %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	if rel, ok := job.(Releaser); ok && rel.Released() == 0 {
		return reconcile.Result{}, nil // every gated pod is held back (see reportHeld)
	}
	if !quiet(job) {
		r.recorder.Eventf(obj, wl, corev1.EventTypeNormal, EventStarted, "Start", "%s",
			workloadMessage(wl, berthv1.ConditionAdmitted, "admitted"))
	}
	return reconcile.Result{}, nil
}

// stop suspends a job whose workload is being evicted and, once its pods
// are gone, releases the workload's quota so it queues again.
func (r *Reconciler) stop(ctx context.Context, job GenericJob, wl *berthv1.Workload) (reconcile.Result, error) {
	obj := job.Object()
	if mustStop(job) {
		job.Suspend()
		if err := r.write(ctx, job); err != nil {
			return reconcile.Result{}, fmt.Errorf("suspending evicted %s: %w", client.ObjectKeyFromObject(obj), err)
		}
		r.recorder.Eventf(obj, wl, corev1.EventTypeNormal, EventStopped, "Stop", "%s",
			workloadMessage(wl, berthv1.ConditionEvicted, "evicted"))
		return reconcile.Result{}, r.dropPodGroup(ctx, job, wl, false)
	}
	if job.IsActive() {
		return reconcile.Result{}, nil // the job's controller deletes the pods; their updates requeue us
	}
	// A job's status can say it is stopped while its pods still terminate
	// and hold their GPUs (a JobSet counts a child Job whose pods terminate
	// as inactive): the pods themselves decide.
	if n, err := persist.PodsRunning(ctx, r.reader, wl); err != nil || n > 0 {
		return reconcile.Result{RequeueAfter: podsPoll}, err
	}
	// A job that grew is queued again at its new size: the pod sets change
	// before the quota is released, so it is never admitted at the old one.
	if dequeued, err := r.syncSpec(ctx, job, wl); err != nil || dequeued {
		return reconcile.Result{}, err
	}
	_, err := r.writer.Write(ctx, wl, lifecycle.Requeue{Message: "evicted and stopped; waiting for admission again"})
	return reconcile.Result{}, err
}

// deleteWorkloads deletes the workloads of a job that no longer exists, or,
// with keep, those of its gangs that no longer exist. On a cluster with a
// garbage collector owner references do the former; this also covers
// clusters where it lags.
func (r *Reconciler) deleteWorkloads(ctx context.Context, namespace, name string, keep map[string]bool) error {
	wls := &berthv1.WorkloadList{}
	if err := r.client.List(ctx, wls, client.InNamespace(namespace), client.MatchingFields{OwnerIndexKey(r.kind.GVK()): name}); err != nil {
		return fmt.Errorf("listing workloads of %s %s/%s: %w", r.kind.GVK().Kind, namespace, name, err)
	}
	for i := range wls.Items {
		if keep[wls.Items[i].Name] {
			continue
		}
		r.memo.forget(namespace, wls.Items[i].Name)
		r.assumed.forget(client.ObjectKeyFromObject(&wls.Items[i]))
		r.created.seen(client.ObjectKeyFromObject(&wls.Items[i]))
		r.finishing.forget(&wls.Items[i])
		if err := r.client.Delete(ctx, &wls.Items[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting workload %s/%s: %w", namespace, wls.Items[i].Name, err)
		}
		log.FromContext(ctx).V(2).Info("deleted workload of deleted job or gang", "workload", wls.Items[i].Name)
	}
	return nil
}

// mustStop reports whether a job that may not run must be stopped: it is
// not suspended, or (for gangs of pods, which are released pod by pod) some
// of its pods run.
func mustStop(job GenericJob) bool {
	if !job.IsSuspended() {
		return true
	}
	_, pods := job.(Writer)
	return pods && job.IsActive()
}

// ctrlSetController makes owner the controller of wl.
func ctrlSetController(owner client.Object, wl *berthv1.Workload, c interface{ Scheme() *runtime.Scheme }) error {
	return controllerutil.SetControllerReference(owner, wl, c.Scheme())
}

func workloadMessage(wl *berthv1.Workload, condType, fallback string) string {
	for _, c := range wl.Status.Conditions {
		if c.Type == condType && c.Message != "" {
			return c.Message
		}
	}
	return fallback
}

// saveOriginalScheduling records the job's own node selectors and
// tolerations before berth changes them, once.
func saveOriginalScheduling(job GenericJob) error {
	if _, pods := job.(Writer); pods {
		return nil // released pods are never gated again: nothing to restore
	}
	obj := job.Object()
	if _, ok := obj.GetAnnotations()[berthv1.OriginalSchedulingAnnotation]; ok {
		return nil
	}
	raw, err := json.Marshal(job.Scheduling())
	if err != nil {
		return fmt.Errorf("recording original scheduling: %w", err)
	}
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[berthv1.OriginalSchedulingAnnotation] = string(raw)
	obj.SetAnnotations(ann)
	return nil
}

// restoreScheduling puts back the job's own node selectors and
// tolerations, and reports whether berth had changed them.
func restoreScheduling(job GenericJob) bool {
	if _, pods := job.(Writer); pods {
		return false
	}
	obj := job.Object()
	raw, ok := obj.GetAnnotations()[berthv1.OriginalSchedulingAnnotation]
	if !ok {
		return false
	}
	var orig []PodSetScheduling
	if err := json.Unmarshal([]byte(raw), &orig); err == nil {
		job.SetScheduling(orig)
	}
	ann := obj.GetAnnotations()
	delete(ann, berthv1.OriginalSchedulingAnnotation)
	obj.SetAnnotations(ann)
	return true
}

// incompleteWait is how much longer a gang that lacks members (err) waits
// before it is reported: its grace from the creation of the object its
// events are recorded on. Zero for any other error, or once the grace is
// over.
func (r *Reconciler) incompleteWait(obj client.Object, err error) time.Duration {
	if !isIncomplete(err) {
		return 0
	}
	return max(0, r.opts.IncompleteGrace-r.opts.Clock.Since(obj.GetCreationTimestamp().Time))
}

// quiet reports whether the job's routine events are left out (Quiet).
func quiet(job GenericJob) bool {
	q, ok := job.(Quiet)
	return ok && q.QuietEvents()
}
