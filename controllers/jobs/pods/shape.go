package pods

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	flavorstore "github.com/berth-dev/berth/controllers/flavors"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// validateShape refuses a pod created ungated into an admitted gang that
// is not shaped like the pods the gang was admitted for: one that requests
// more of a resource than each pod of its pod set (or a resource the pod
// set does not request at all), or that could run outside the admission's
// flavors and domain. The count (validateBound) keeps the number of pods
// within the admission; this keeps each pod within its share, so that a
// tenant who creates a pod claiming its own Job in a place a pod left runs
// neither eight GPUs on a one-GPU place nor a flavor's pod on another
// flavor's nodes.
//
// cpu, memory and ephemeral storage are not bounded: a LimitRange adds
// them to containers that declare none, at the pod's creation, and berth
// charges what the job declares. Pod overhead (a RuntimeClass's) is left out
// for the same reason. What the pod's DRA claims cost is counted with its
// containers' requests, as berth charges a pod set for its pods' claims.
func (v Validator) validateShape(ctx context.Context, p *corev1.Pod, wl *berthv1.Workload) (field.ErrorList, error) {
	set := p.Labels[berthv1.PodSetLabel]
	var errs field.ErrorList
	for _, ps := range wl.Spec.PodSets {
		if ps.Name != set {
			continue
		}
		reqs, claimed, refused, err := v.requests(ctx, p)
		if err != nil {
			return nil, err
		}
		if errs = append(errs, refused...); refused == nil {
			errs = append(errs, exceeds(reqs, claimed, ps, wl.Name)...)
		}
	}
	flavors := flavorstore.New(v.Workloads.Cache)
	var want map[string]string
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		if psa.Name != set {
			continue
		}
		selector, _, missing, err := jobs.AdmittedPlacement(ctx, flavors, wl, psa)
		if err != nil {
			return nil, err
		}
		if missing != "" {
			return append(errs, field.Forbidden(specPath.Child("nodeSelector"), fmt.Sprintf(
				"workload %s was admitted on flavor %s, which no longer exists: its pods cannot be placed", wl.Name, missing))), nil
		}
		want = selector
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if got, ok := p.Spec.NodeSelector[k]; !ok || got != want[k] {
			errs = append(errs, field.Forbidden(specPath.Child("nodeSelector").Key(k), fmt.Sprintf(
				"the pods of workload %s run where it was admitted, with %s=%s in their node selector, as berth sets it in their job's template",
				wl.Name, k, want[k])))
		}
	}
	return append(errs, placedElsewhere(p, wl)...), nil
}

// placedElsewhere refuses what would take a pod past the admission's node
// selector: a node named outright (kube-scheduler, and with it the node
// selector's and taints' checks, is skipped), or a toleration of another
// ClusterQueue's headroom taint, which the admission's flavor labels do not
// keep it off (the engine refuses a workload for that on its template, and
// berth's release a gated pod for its own, see misplaced).
func placedElsewhere(p *corev1.Pod, wl *berthv1.Workload) field.ErrorList {
	var errs field.ErrorList
	if p.Spec.NodeName != "" {
		errs = append(errs, field.Forbidden(specPath.Child("nodeName"),
			"the pods of an admitted gang are placed by kube-scheduler on the nodes of their admission: leave spec.nodeName unset"))
	}
	if foreign := lifecycle.ForeignHeadroom(p.Spec.Tolerations, wl.Status.Admission.ClusterQueue); foreign != "" {
		errs = append(errs, field.Forbidden(specPath.Child("tolerations"), admission.ForeignHeadroomMessage(foreign, wl.Status.Admission.ClusterQueue)))
	}
	return errs
}

// requests is what p asks for as one pod of its pod set is charged: its
// containers' requests and, when berth counts DRA devices, what its
// ResourceClaims and ResourceClaimTemplates cost (claimed says which
// resources those are). A claim named by resourceClaimName is charged
// whole to the pod, as berth charges it to every pod of a job that names
// it. Claims and templates are read from the API server, so one created or
// replaced just before the pod is read as it is. A claim berth cannot count
// (one that does not exist, or asks for all devices of a class) refuses the
// pod: its devices could not be bounded by its pod set's.
func (v Validator) requests(ctx context.Context, p *corev1.Pod) (corev1.ResourceList, map[corev1.ResourceName]bool, field.ErrorList, error) {
	reqs := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{ExcludeOverhead: true})
	if len(v.DeviceClasses) == 0 || len(p.Spec.ResourceClaims) == 0 {
		return reqs, nil, nil, nil
	}
	cost, err := v.DeviceClasses.ClaimRequests(ctx, v.Workloads.API, p.Namespace, &p.Spec, nil)
	var invalid *jobs.InvalidError
	switch {
	case errors.As(err, &invalid):
		return nil, nil, field.ErrorList{field.Forbidden(specPath.Child("resourceClaims"), fmt.Sprintf(
			"berth counts the devices of the pod's claims against what each pod of its gang was admitted with, and cannot count them: %s", invalid.Error()))}, nil
	case err != nil:
		return nil, nil, nil, fmt.Errorf("counting the claims of pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	claimed := map[corev1.ResourceName]bool{}
	for name, q := range cost {
		claimed[name] = !q.IsZero()
	}
	return jobs.AddRequests(reqs, cost), claimed, nil, nil
}

// exceeds lists what a pod that requests reqs asks beyond each pod of pod
// set ps; claimed are the resources its DRA claims add to.
func exceeds(reqs corev1.ResourceList, claimed map[corev1.ResourceName]bool, ps berthv1.PodSet, workload string) field.ErrorList {
	var errs field.ErrorList
	for _, name := range slices.Sorted(maps.Keys(reqs)) {
		q := reqs[name]
		if q.IsZero() || jobs.Defaultable(name) {
			continue
		}
		if most, ok := ps.Requests[name]; !ok || q.Cmp(most) > 0 {
			path, what := specPath.Child("containers"), ""
			if claimed[name] {
				path, what = specPath.Child("resourceClaims"), " (its containers and DRA claims together)"
			}
			errs = append(errs, field.Forbidden(path, fmt.Sprintf(
				"the pod requests %s of %s%s, and each pod of pod set %s of workload %s was admitted with %s",
				q.String(), name, what, ps.Name, workload, quantityOr(ps.Requests, name))))
		}
	}
	return errs
}

// quantityOr prints list's quantity of name, or none.
func quantityOr(list corev1.ResourceList, name corev1.ResourceName) string {
	if q, ok := list[name]; ok {
		return q.String()
	}
	return "none"
}
