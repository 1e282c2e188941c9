package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/workloadstatus"
)

// Event reasons recorded on jobs.
const (
	EventSuspended       = "Suspended"
	EventStarted         = "Started"
	EventStopped         = "Stopped"
	EventCreatedWorkload = "CreatedWorkload"
	EventInvalidJob      = "InvalidJob"
	EventFlavorNotFound  = "FlavorNotFound"
)

// flavorRetry is how long to wait for a missing ResourceFlavor.
const flavorRetry = 10 * time.Second

// Reconciler keeps the jobs of one Kind and their Workloads in step.
type Reconciler struct {
	client   client.Client
	recorder events.EventRecorder
	kind     Kind
}

// NewReconciler returns the reconciler for jobs of kind.
func NewReconciler(c client.Client, recorder events.EventRecorder, kind Kind) *Reconciler {
	return &Reconciler{client: c, recorder: recorder, kind: kind}
}

// Name of the controller, for logs and metrics.
func (r *Reconciler) Name() string { return strings.ToLower(r.kind.GVK().Kind) }

// Register adds the reconciler to mgr: it watches labelled jobs of its kind
// and the Workloads they own.
func (r *Reconciler) Register(ctx context.Context, mgr ctrl.Manager) error {
	if err := IndexOwner(ctx, mgr, r.kind.GVK()); err != nil {
		return err
	}
	labelled := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetLabels()[berthv1.QueueNameLabel]
		return ok
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named(r.Name()).
		For(r.kind.NewObject(), builder.WithPredicates(labelled)).
		Watches(&berthv1.Workload{}, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), r.kind.NewObject(), handler.OnlyControllerOwner())).
		Complete(r)
}

// +kubebuilder:rbac:groups=berth.dev,resources=workloads,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=berth.dev,resources=workloads/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=berth.dev,resources=resourceflavors,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one job and its Workload in step.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := r.kind.NewObject()
	if err := r.client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, r.deleteWorkloads(ctx, req.Namespace, req.Name)
		}
		return reconcile.Result{}, fmt.Errorf("reading %s %s: %w", r.kind.GVK().Kind, req, err)
	}
	if _, ok := obj.GetLabels()[berthv1.QueueNameLabel]; !ok {
		return reconcile.Result{}, nil
	}
	job := r.kind.Wrap(obj)
	if !obj.GetDeletionTimestamp().IsZero() {
		// A job being deleted releases its quota once its pods are gone
		// (orphan or foreground deletion can keep the object a while).
		if job.IsActive() {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, r.deleteWorkloads(ctx, req.Namespace, req.Name)
	}
	wl := &berthv1.Workload{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: WorkloadName(r.kind.GVK().Kind, obj)}, wl)
	if apierrors.IsNotFound(err) {
		return reconcile.Result{}, r.createWorkload(ctx, job)
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("reading workload of %s: %w", req, err)
	}
	if finished, succeeded, msg := job.Finished(); finished {
		return reconcile.Result{}, r.finish(ctx, wl, succeeded, msg)
	}
	switch {
	case workloadstatus.IsEvicting(wl):
		return reconcile.Result{}, r.stop(ctx, job, wl)
	case workloadstatus.IsAdmitted(wl):
		return r.start(ctx, job, wl)
	default:
		return reconcile.Result{}, r.hold(ctx, job, wl)
	}
}

// createWorkload holds a new job and creates its Workload.
func (r *Reconciler) createWorkload(ctx context.Context, job GenericJob) error {
	obj := job.Object()
	if finished, _, _ := job.Finished(); finished || !obj.GetDeletionTimestamp().IsZero() {
		return nil
	}
	if !job.IsSuspended() {
		job.Suspend()
		if err := r.client.Update(ctx, obj); err != nil {
			return fmt.Errorf("suspending %s: %w", client.ObjectKeyFromObject(obj), err)
		}
		r.recorder.Eventf(obj, nil, corev1.EventTypeNormal, EventSuspended, "Suspend", "suspended until berth admits it")
	}
	podSets, err := job.PodSets()
	if err != nil {
		r.recorder.Eventf(obj, nil, corev1.EventTypeWarning, EventInvalidJob, "Queue", "cannot queue: %v", err)
		return nil // waits for the user to fix the job; an update requeues it
	}
	wl := &berthv1.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: WorkloadName(r.kind.GVK().Kind, obj), Namespace: obj.GetNamespace()},
		Spec: berthv1.WorkloadSpec{
			QueueName: obj.GetLabels()[berthv1.QueueNameLabel],
			PodSets:   podSets,
		},
	}
	if err := controllerutil.SetControllerReference(obj, wl, r.client.Scheme()); err != nil {
		return fmt.Errorf("owning workload: %w", err)
	}
	if err := r.client.Create(ctx, wl); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return fmt.Errorf("creating workload for %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	r.recorder.Eventf(obj, wl, corev1.EventTypeNormal, EventCreatedWorkload, "Queue", "queued as workload %s", wl.Name)
	return nil
}

// hold keeps a job whose workload is not admitted suspended, and keeps the
// workload's pod sets in step with the job while it waits.
func (r *Reconciler) hold(ctx context.Context, job GenericJob, wl *berthv1.Workload) error {
	obj := job.Object()
	if !job.IsSuspended() {
		restoreScheduling(job)
		job.Suspend()
		if err := r.client.Update(ctx, obj); err != nil {
			return fmt.Errorf("suspending %s: %w", client.ObjectKeyFromObject(obj), err)
		}
		r.recorder.Eventf(obj, wl, corev1.EventTypeNormal, EventSuspended, "Suspend", "suspended until berth admits it")
		return nil
	}
	if wl.Status.Admission != nil || workloadstatus.IsFinished(wl) {
		return nil
	}
	podSets, err := job.PodSets()
	if err != nil {
		r.recorder.Eventf(obj, wl, corev1.EventTypeWarning, EventInvalidJob, "Queue", "cannot queue: %v", err)
		return nil
	}
	if equality.Semantic.DeepEqual(podSets, wl.Spec.PodSets) {
		return nil
	}
	wl.Spec.PodSets = podSets
	if err := r.client.Update(ctx, wl); err != nil {
		return fmt.Errorf("updating pod sets of workload %s: %w", wl.Name, err)
	}
	return nil
}

// start runs an admitted job on the flavors of its admission.
func (r *Reconciler) start(ctx context.Context, job GenericJob, wl *berthv1.Workload) (reconcile.Result, error) {
	if !job.IsSuspended() {
		return reconcile.Result{}, nil
	}
	obj := job.Object()
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
	job.SetScheduling(scheduling)
	job.Resume()
	if err := r.client.Update(ctx, obj); err != nil {
		return reconcile.Result{}, fmt.Errorf("starting %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	r.recorder.Eventf(obj, wl, corev1.EventTypeNormal, EventStarted, "Start", "%s",
		workloadMessage(wl, berthv1.ConditionAdmitted, "admitted"))
	return reconcile.Result{}, nil
}

// stop suspends a job whose workload is being evicted and, once its pods
// are gone, releases the workload's quota so it queues again.
func (r *Reconciler) stop(ctx context.Context, job GenericJob, wl *berthv1.Workload) error {
	obj := job.Object()
	if !job.IsSuspended() {
		restoreScheduling(job)
		job.Suspend()
		if err := r.client.Update(ctx, obj); err != nil {
			return fmt.Errorf("suspending evicted %s: %w", client.ObjectKeyFromObject(obj), err)
		}
		r.recorder.Eventf(obj, wl, corev1.EventTypeNormal, EventStopped, "Stop", "%s",
			workloadMessage(wl, berthv1.ConditionEvicted, "evicted"))
		return nil
	}
	if job.IsActive() {
		return nil // the job's controller deletes the pods; their updates requeue us
	}
	_, err := workloadstatus.Patch(ctx, r.client, r.client, wl, func(w *berthv1.Workload) bool {
		if !workloadstatus.IsEvicting(w) {
			return false
		}
		workloadstatus.Requeue(w, "evicted and stopped; waiting for admission again")
		return true
	})
	return err
}

// finish records that the job ended, which releases its quota.
func (r *Reconciler) finish(ctx context.Context, wl *berthv1.Workload, succeeded bool, msg string) error {
	reason := berthv1.ReasonSucceeded
	if !succeeded {
		reason = berthv1.ReasonFailed
	}
	_, err := workloadstatus.Patch(ctx, r.client, r.client, wl, func(w *berthv1.Workload) bool {
		return workloadstatus.SetCondition(w, berthv1.ConditionFinished, metav1.ConditionTrue, reason, msg)
	})
	return err
}

// deleteWorkloads deletes the workloads of a job that no longer exists. On a
// cluster with a garbage collector owner references do the same; this also
// covers clusters where it lags.
func (r *Reconciler) deleteWorkloads(ctx context.Context, namespace, name string) error {
	wls := &berthv1.WorkloadList{}
	if err := r.client.List(ctx, wls, client.InNamespace(namespace), client.MatchingFields{OwnerIndexKey(r.kind.GVK()): name}); err != nil {
		return fmt.Errorf("listing workloads of deleted %s %s/%s: %w", r.kind.GVK().Kind, namespace, name, err)
	}
	for i := range wls.Items {
		if err := r.client.Delete(ctx, &wls.Items[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting workload %s/%s: %w", namespace, wls.Items[i].Name, err)
		}
		log.FromContext(ctx).V(2).Info("deleted workload of deleted job", "workload", wls.Items[i].Name)
	}
	return nil
}

// WorkloadName is the deterministic name of the Workload of a job: kind,
// job name and a hash of the job's UID, so a job re-created under the same
// name gets a new Workload.
func WorkloadName(kind string, obj client.Object) string {
	sum := sha256.Sum256([]byte(obj.GetUID()))
	suffix := hex.EncodeToString(sum[:])[:5]
	prefix := strings.ToLower(kind) + "-" + obj.GetName()
	const maxLen = 253 - 6
	if len(prefix) > maxLen {
		prefix = prefix[:maxLen]
	}
	return prefix + "-" + suffix
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

// restoreScheduling puts back the job's own node selectors and tolerations.
func restoreScheduling(job GenericJob) {
	obj := job.Object()
	raw, ok := obj.GetAnnotations()[berthv1.OriginalSchedulingAnnotation]
	if !ok {
		return
	}
	var orig []PodSetScheduling
	if err := json.Unmarshal([]byte(raw), &orig); err == nil {
		job.SetScheduling(orig)
	}
	ann := obj.GetAnnotations()
	delete(ann, berthv1.OriginalSchedulingAnnotation)
	obj.SetAnnotations(ann)
}
