package oracle

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// actionable are the reasons of a Workload that waits until someone
// changes something: a Workload stuck for one of them, with a Warning
// event, has told its user what to fix and is not lost.
var actionable = []berthv1.WorkloadReason{
	berthv1.ReasonLocalQueueNotFound, berthv1.ReasonClusterQueueNotFound, berthv1.ReasonClusterQueueStopped,
	berthv1.ReasonNamespaceNotAllowed, berthv1.ReasonInvalidSpec, berthv1.ReasonUnsupportedResource,
	berthv1.ReasonExceedsMaxQuota, berthv1.ReasonNoMatchingFlavor, berthv1.ReasonUnknownTopologyLevel, berthv1.ReasonExceedsDomainCapacity,
	berthv1.ReasonProvisioningGaveUp, berthv1.ReasonHeadroomNotAllowed,
}

func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, berthv1.AddToScheme, autoscalingv1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("building the oracle's scheme: %w", err)
		}
	}
	return s, nil
}

// Settled waits up to within until, in the namespaces, no job is lost and
// no object is orphaned, and returns what is still wrong when it gives up:
//   - every labelled batch Job has a Workload;
//   - every Workload is Finished, or waits for a reason that asks for a
//     change (a missing queue, an invalid spec, ...) and a Warning event
//     about it or its job says so;
//   - every Workload, PodTemplate and ProvisioningRequest has a live owner
//     (an owner with its UID exists).
func Settled(ctx context.Context, c client.Client, namespaces []string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		var problems []string
		for _, ns := range namespaces {
			p, err := unsettled(ctx, c, ns)
			if err != nil {
				return err
			}
			problems = append(problems, p...)
		}
		if len(problems) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w after %s:\n%s", errNotSettled, within, strings.Join(problems, "\n"))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w:\n%s", errNotSettled, ctx.Err(), strings.Join(problems, "\n"))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// unsettled lists what is not settled in one namespace.
func unsettled(ctx context.Context, c client.Client, ns string) ([]string, error) {
	wls := &berthv1.WorkloadList{}
	if err := c.List(ctx, wls, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing Workloads of %s: %w", ns, err)
	}
	evs := &eventsv1.EventList{}
	if err := c.List(ctx, evs, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing events of %s: %w", ns, err)
	}
	warned := map[types.UID]bool{}
	for _, e := range evs.Items {
		if e.Type == corev1.EventTypeWarning {
			warned[e.Regarding.UID] = true
		}
	}
	var out []string
	owners := map[types.UID]bool{}
	for i := range wls.Items {
		wl := &wls.Items[i]
		for _, ref := range wl.OwnerReferences {
			owners[ref.UID] = true
		}
		if p := lost(wl, warned); p != "" {
			out = append(out, p)
		}
	}
	jobs := &batchv1.JobList{}
	if err := c.List(ctx, jobs, client.InNamespace(ns), client.HasLabels{berthv1.QueueNameLabel}); err != nil {
		return nil, fmt.Errorf("listing Jobs of %s: %w", ns, err)
	}
	for _, j := range jobs.Items {
		if !owners[j.UID] {
			out = append(out, fmt.Sprintf("Job %s/%s is labelled for berth but has no Workload", ns, j.Name))
		}
	}
	orphans, err := orphans(ctx, c, ns, wls)
	return append(out, orphans...), err
}

// lost describes a Workload that is neither finished nor waiting for a
// stated, fixable reason; "" when it is neither lost.
func lost(wl *berthv1.Workload, warned map[types.UID]bool) string {
	if meta.IsStatusConditionTrue(wl.Status.Conditions, berthv1.ConditionFinished) {
		return ""
	}
	c := meta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionQuotaReserved)
	if c != nil && c.Status == metav1.ConditionFalse && slices.Contains(actionable, berthv1.WorkloadReason(c.Reason)) {
		job := metav1.GetControllerOf(wl)
		if warned[wl.UID] || (job != nil && warned[job.UID]) {
			return ""
		}
		return fmt.Sprintf("Workload %s/%s waits for %s with no Warning event saying so", wl.Namespace, wl.Name, c.Reason)
	}
	state := "no QuotaReserved condition"
	if c != nil {
		state = fmt.Sprintf("QuotaReserved=%s %s: %s", c.Status, c.Reason, c.Message)
	}
	return fmt.Sprintf("Workload %s/%s has not finished (%s)", wl.Namespace, wl.Name, state)
}

// Orphans lists the Workloads, PodTemplates and ProvisioningRequests of
// namespace ns none of whose owners is alive: what a bound on cleanup
// checks while jobs still run (Settled also wants every job finished).
func Orphans(ctx context.Context, c client.Client, ns string) ([]string, error) {
	wls := &berthv1.WorkloadList{}
	if err := c.List(ctx, wls, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing Workloads of %s: %w", ns, err)
	}
	return orphans(ctx, c, ns, wls)
}

// orphans lists the Workloads, PodTemplates and ProvisioningRequests of
// the namespace none of whose owners is alive.
func orphans(ctx context.Context, c client.Client, ns string, wls *berthv1.WorkloadList) ([]string, error) {
	var objs []client.Object
	for i := range wls.Items {
		objs = append(objs, &wls.Items[i])
	}
	pts := &corev1.PodTemplateList{}
	if err := c.List(ctx, pts, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing PodTemplates of %s: %w", ns, err)
	}
	for i := range pts.Items {
		objs = append(objs, &pts.Items[i])
	}
	prs := &autoscalingv1.ProvisioningRequestList{}
	switch err := c.List(ctx, prs, client.InNamespace(ns)); {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		// No ProvisioningRequest API in this plane: nothing to orphan.
	case err != nil:
		return nil, fmt.Errorf("listing ProvisioningRequests of %s: %w", ns, err)
	default:
		for i := range prs.Items {
			objs = append(objs, &prs.Items[i])
		}
	}
	var out []string
	for _, o := range objs {
		live, err := hasLiveOwner(ctx, c, o)
		if err != nil {
			return nil, err
		}
		if !live {
			out = append(out, fmt.Sprintf("%T %s/%s has no live owner (owners %v)", o, ns, o.GetName(), ownerNames(o)))
		}
	}
	return out, nil
}

// hasLiveOwner reports whether an owner of o exists with the UID o names.
func hasLiveOwner(ctx context.Context, c client.Client, o client.Object) (bool, error) {
	for _, ref := range o.GetOwnerReferences() {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			return false, fmt.Errorf("owner of %s/%s: %w", o.GetNamespace(), o.GetName(), err)
		}
		owner := &metav1.PartialObjectMetadata{}
		owner.SetGroupVersionKind(gv.WithKind(ref.Kind))
		err = c.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: ref.Name}, owner)
		switch {
		case err == nil && owner.UID == ref.UID:
			return true, nil
		case err == nil, apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		default:
			return false, fmt.Errorf("reading owner %s %s of %s/%s: %w", ref.Kind, ref.Name, o.GetNamespace(), o.GetName(), err)
		}
	}
	return false, nil
}

func ownerNames(o client.Object) []string {
	var out []string
	for _, ref := range o.GetOwnerReferences() {
		out = append(out, ref.Kind+"/"+ref.Name)
	}
	return out
}
