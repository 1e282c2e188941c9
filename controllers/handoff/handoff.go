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

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// Reconciler lowers the minCount of berth's placed PodGroups to one.
type Reconciler struct {
	client client.Client
}

// New returns the reconciler; c reads PodGroups from the cache.
func New(c client.Client) *Reconciler { return &Reconciler{client: c} }

// Name names the controller.
func (r *Reconciler) Name() string { return "podgroup" }

// Register watches the PodGroups berth made (labelled with their
// Workload) that still wait for a whole gang.
func (r *Reconciler) Register(_ context.Context, mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(r.Name()).
		For(&schedulingv1beta1.PodGroup{}, builder.WithPredicates(predicate.NewPredicateFuncs(NeedsRelaxing))).
		Complete(r)
}

// NeedsRelaxing reports whether o is a PodGroup berth made whose gang
// kube-scheduler has placed and whose minCount is still above one.
func NeedsRelaxing(o client.Object) bool {
	pg, ok := o.(*schedulingv1beta1.PodGroup)
	if !ok || pg.Labels[berthv1.WorkloadLabel] == "" {
		return false
	}
	gang := pg.Spec.SchedulingPolicy.Gang
	return gang != nil && gang.MinCount > 1 &&
		meta.IsStatusConditionTrue(pg.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled)
}

// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=podgroups,verbs=get;list;watch;patch

// Reconcile lowers one placed PodGroup's minCount to one.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pg := &schedulingv1beta1.PodGroup{}
	if err := r.client.Get(ctx, req.NamespacedName, pg); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !NeedsRelaxing(pg) {
		return reconcile.Result{}, nil
	}
	base := pg.DeepCopy()
	pg.Spec.SchedulingPolicy.Gang.MinCount = 1
	opt := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	if err := r.client.Patch(ctx, pg, opt); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, fmt.Errorf("lowering the minCount of placed PodGroup %s: %w", req.NamespacedName, err)
	}
	return reconcile.Result{}, nil
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
