// Package handoff hands admitted gangs to kube-scheduler's own gang
// scheduling. The job reconcilers create a scheduling.k8s.io/v1beta1
// PodGroup for each admitted gang of two or more pods before they release
// it (jobs.Options.PodGroups), with gang minCount the pods the admission
// counts, so that kube-scheduler binds all of them or none.
//
// berth's admission is the gang's first placement, and so is the
// guarantee: once kube-scheduler reports the group placed
// (PodGroupInitiallyScheduled), this package lowers its minCount to one.
// kube-scheduler does not let a pod of a group through until minCount of
// its pods exist, and it forgets pods that ended: the last pods of a Job
// whose completions exceed its parallelism, or the replacement of a
// failed pod after another succeeded, would otherwise wait forever for a
// gang that can never form again.
package handoff

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// Reconciler lowers the minCount of berth's placed PodGroups to one, and
// that of queued Jobs whose own controller made their group.
type Reconciler struct {
	client client.Client
	reader client.Reader
}

// New returns the reconciler; c reads PodGroups and Jobs from the cache,
// reader reads pods from the API server (berth caches only queued pods,
// and a Job's pods carry no queue label).
func New(c client.Client, reader client.Reader) *Reconciler {
	return &Reconciler{client: c, reader: reader}
}

// Name names the controller.
func (r *Reconciler) Name() string { return "podgroup" }

// Register watches the PodGroups berth made (labelled with their
// Workload), and those the Job controller made for Jobs, that still wait
// for a whole gang.
func (r *Reconciler) Register(_ context.Context, mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(r.Name()).
		For(&schedulingv1beta1.PodGroup{}, builder.WithPredicates(predicate.NewPredicateFuncs(NeedsRelaxing))).
		Complete(r)
}

// NeedsRelaxing reports whether o is a PodGroup berth made, or the Job
// controller made for a Job, whose gang kube-scheduler has placed and
// whose minCount is still above one.
func NeedsRelaxing(o client.Object) bool {
	pg, ok := o.(*schedulingv1beta1.PodGroup)
	if !ok || pg.Labels[berthv1.WorkloadLabel] == "" && jobOf(pg) == "" {
		return false
	}
	gang := pg.Spec.SchedulingPolicy.Gang
	return gang != nil && gang.MinCount > 1 &&
		meta.IsStatusConditionTrue(pg.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled)
}

// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=podgroups,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list

// placedPoll is how often a group whose gang is not placed again yet is
// looked at: kube-scheduler's PodGroupInitiallyScheduled condition never
// goes back to False, so a group kept for a gang's next run (see
// jobs.Reconciler) sends no event when that run is placed.
const placedPoll = 5 * time.Second

// Reconcile lowers one placed PodGroup's minCount to one, or its Job's.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pg := &schedulingv1beta1.PodGroup{}
	if err := r.client.Get(ctx, req.NamespacedName, pg); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !NeedsRelaxing(pg) {
		return reconcile.Result{}, nil
	}
	uid, job, err := r.gangOf(ctx, pg)
	if err != nil || uid == "" {
		return reconcile.Result{}, err
	}
	if placed, err := r.placed(ctx, pg, uid); err != nil || !placed {
		return reconcile.Result{RequeueAfter: placedPoll}, err
	}
	if job != nil {
		return reconcile.Result{}, r.relaxJob(ctx, pg, job)
	}
	base := pg.DeepCopy()
	pg.Spec.SchedulingPolicy.Gang.MinCount = 1
	opt := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	if err := r.client.Patch(ctx, pg, opt); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, fmt.Errorf("lowering the minCount of placed PodGroup %s: %w", req.NamespacedName, err)
	}
	return reconcile.Result{}, nil
}

// gangOf returns the UID of the Workload whose pods join pg and, for a
// group the Job controller made, the queued Job whose gang minCount is to
// be lowered; an empty UID when there is nothing of berth's to lower.
func (r *Reconciler) gangOf(ctx context.Context, pg *schedulingv1beta1.PodGroup) (string, *batchv1.Job, error) {
	if uid := pg.Labels[berthv1.WorkloadLabel]; uid != "" {
		return uid, nil, nil
	}
	job := &batchv1.Job{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: pg.Namespace, Name: jobOf(pg)}, job); err != nil {
		return "", nil, client.IgnoreNotFound(err)
	}
	if _, queued := job.Labels[berthv1.QueueNameLabel]; !queued || !metav1.IsControlledBy(pg, job) || gangMinCount(job) <= 1 {
		return "", nil, nil
	}
	return job.Spec.Template.Labels[berthv1.WorkloadLabel], job, nil
}

// placed reports whether as many pods of Workload uid that join pg are
// bound as pg's minCount asks: the group's current run is placed, not only
// an earlier one. Pods that failed or are being deleted do not count.
func (r *Reconciler) placed(ctx context.Context, pg *schedulingv1beta1.PodGroup, uid string) (bool, error) {
	pods := &corev1.PodList{}
	if err := r.reader.List(ctx, pods, client.InNamespace(pg.Namespace), client.MatchingLabels{berthv1.WorkloadLabel: uid}); err != nil {
		return false, fmt.Errorf("listing the pods of PodGroup %s/%s: %w", pg.Namespace, pg.Name, err)
	}
	var bound int32
	for _, p := range pods.Items {
		if g := p.Spec.SchedulingGroup; g != nil && ptr.Deref(g.PodGroupName, "") == pg.Name &&
			p.Spec.NodeName != "" && p.DeletionTimestamp.IsZero() && p.Status.Phase != corev1.PodFailed {
			bound++
		}
	}
	return bound >= pg.Spec.SchedulingPolicy.Gang.MinCount, nil
}

// jobOf names the batch Job that controls pg, "" when none does.
func jobOf(pg *schedulingv1beta1.PodGroup) string {
	if ref := metav1.GetControllerOf(pg); ref != nil && ref.Kind == "Job" && ref.APIVersion == batchv1.SchemeGroupVersion.String() {
		return ref.Name
	}
	return ""
}

// gangMinCount is the gang minCount of the Job's spec.scheduling, 0 when
// it asks for none.
func gangMinCount(job *batchv1.Job) int32 {
	if s := job.Spec.Scheduling; s != nil && s.SchedulingPolicy != nil && s.SchedulingPolicy.Gang != nil {
		return ptr.Deref(s.SchedulingPolicy.Gang.MinCount, 0)
	}
	return 0
}

// relaxJob lowers the gang minCount of a queued Job whose controller made
// pg (see jobs.OwnGang): the Job controller sets its group's minCount from
// the Job's spec.scheduling on every sync, so the Job's spec is where it
// is lowered. berth sets it back to the whole gang when it starts the Job
// again. A Job berth does not queue keeps what its owner asked for.
func (r *Reconciler) relaxJob(ctx context.Context, pg *schedulingv1beta1.PodGroup, job *batchv1.Job) error {
	base := job.DeepCopy()
	job.Spec.Scheduling.SchedulingPolicy.Gang.MinCount = ptr.To[int32](1)
	opt := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	if err := r.client.Patch(ctx, job, opt); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("lowering the gang minCount of Job %s/%s, whose PodGroup %s is placed: %w", job.Namespace, job.Name, pg.Name, err)
	}
	return nil
}

// Served reports whether the cluster serves scheduling.k8s.io/v1beta1
// PodGroups, and says what to change when it does not.
func Served(mapper meta.RESTMapper) error {
	gvk := schedulingv1beta1.SchemeGroupVersion.WithKind("PodGroup")
	if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
		return fmt.Errorf("PodGroups (%s) are not served: start kube-apiserver with --runtime-config=%s=true and "+
			"--feature-gates=GenericWorkload=true, and kube-scheduler with --feature-gates=GenericWorkload=true, or start berth without --pod-groups: %w",
			gvk.GroupVersion(), gvk.GroupVersion(), err)
	}
	return nil
}
