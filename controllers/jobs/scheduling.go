package jobs

import (
	"context"
	"fmt"
	"maps"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	flavorstore "github.com/berth-dev/berth/controllers/flavors"
)

// admittedScheduling computes each pod set's node selector and tolerations
// for an admitted job: the job's own (as recorded before berth first changed
// them) plus the labels and tolerations of every flavor assigned to the pod
// set, the flavors' labels and the domain winning over the job's, and the
// booking's annotations when it was admitted on provisioned capacity. It
// returns the name of a flavor that does not exist, if any.
func (r *Reconciler) admittedScheduling(ctx context.Context, job GenericJob, wl *berthv1.Workload) ([]PodSetScheduling, string, error) {
	byName := ownScheduling(job)
	flavors := flavorstore.New(r.client).Memo()
	out := make([]PodSetScheduling, 0, len(wl.Status.Admission.PodSetAssignments))
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		s := byName[psa.Name]
		s.Name, s.Count = psa.Name, psa.Count
		selector, tolerations, missing, err := AdmittedPlacement(ctx, flavors, wl, psa)
		if err != nil || missing != "" {
			return nil, missing, err
		}
		s.NodeSelector = mergeLabels(maps.Clone(s.NodeSelector), selector)
		s.Placement, s.ClusterQueue = selector, wl.Status.Admission.ClusterQueue
		s.Tolerations = AddTolerations(append([]corev1.Toleration(nil), s.Tolerations...), tolerations)
		s.Labels = map[string]string{berthv1.WorkloadLabel: string(wl.UID), berthv1.PodSetLabel: psa.Name}
		if wl.Status.Admission.Topology != nil {
			s.Labels[berthv1.PlacementLabel] = string(wl.UID)
		}
		s.Annotations = SetAnnotations(maps.Clone(s.Annotations), bookingAnnotations(wl))
		out = append(out, s)
	}
	return out, "", nil
}

// FlavorReader reads ResourceFlavors by name (flavors.Store, flavors.Memo).
type FlavorReader interface {
	Get(ctx context.Context, name string) (*berthv1.ResourceFlavor, bool, error)
}

// AdmittedPlacement is what berth adds to the pods of pod set psa of an
// admitted workload so that they run where it was admitted: the node
// labels of every flavor assigned to it and the admission's topology
// domain as node selector, and the flavors' tolerations. The job
// reconciler writes it into the job's template; the pod webhook requires
// it of a pod created into the gang. missing names a flavor that does not
// exist.
func AdmittedPlacement(ctx context.Context, flavors FlavorReader, wl *berthv1.Workload, psa berthv1.PodSetAssignment) (
	selector map[string]string, tolerations []corev1.Toleration, missing string, err error) {
	for _, name := range AssignedFlavors(psa.Flavors) {
		rf, ok, err := flavors.Get(ctx, name)
		if err != nil {
			return nil, nil, "", err
		}
		if !ok {
			return nil, nil, name, nil
		}
		selector = mergeLabels(selector, rf.Spec.NodeLabels)
		tolerations = AddTolerations(tolerations, rf.Spec.Tolerations)
	}
	if t := wl.Status.Admission.Topology; t != nil {
		selector = mergeLabels(selector, t.NodeSelector())
	}
	return selector, tolerations, "", nil
}

// releasable reports whether the admission names every label value its
// pods are pinned to. A gang that must fit one node booked on a new one is
// released only once pinned to that node by hostname (lifecycle.Provision
// writes the node, and refuses a start without it): released on its rack
// alone, kube-scheduler could bind one pod to any node of the rack with
// room for one, and the other to the new node.
func releasable(wl *berthv1.Workload) bool { return !wl.Status.Admission.Topology.AwaitsNode() }

// bookingAnnotations are the annotations that make the pods of a workload
// admitted on provisioned capacity consume its booking; nil otherwise.
func bookingAnnotations(wl *berthv1.Workload) map[string]string {
	p := wl.Status.Provisioning
	if p == nil || p.State != berthv1.ProvisioningProvisioned || p.RequestName == "" {
		return nil
	}
	return map[string]string{
		autoscalingv1.ProvisioningRequestPodAnnotationKey: p.RequestName,
		autoscalingv1.ProvisioningClassPodAnnotationKey:   string(p.ClassName),
	}
}

// AssignedFlavors are the flavors a pod set's assignment names, sorted,
// once each.
func AssignedFlavors(m map[corev1.ResourceName]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range m {
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}

func mergeLabels(dst, src map[string]string) map[string]string {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(map[string]string, len(src))
	}
	maps.Copy(dst, src)
	return dst
}

// AddTolerations appends to dst the tolerations of src it does not hold
// yet.
func AddTolerations(dst, src []corev1.Toleration) []corev1.Toleration {
	for _, t := range src {
		dup := false
		for _, d := range dst {
			if d.MatchToleration(&t) && d.Value == t.Value && d.TolerationSeconds == t.TolerationSeconds {
				dup = true
				break
			}
		}
		if !dup {
			dst = append(dst, t)
		}
	}
	return dst
}

// OwnerIndexKey is the field index of Workloads by the name of their
// controlling owner of the given kind.
func OwnerIndexKey(gvk schema.GroupVersionKind) string {
	return ".metadata.controller." + gvk.Group + "/" + gvk.Kind
}

// IndexOwner registers OwnerIndexKey(gvk) with the manager's cache.
func IndexOwner(ctx context.Context, mgr ctrl.Manager, gvk schema.GroupVersionKind) error {
	apiVersion := gvk.GroupVersion().String()
	err := mgr.GetFieldIndexer().IndexField(ctx, &berthv1.Workload{}, OwnerIndexKey(gvk), func(o client.Object) []string {
		ref := metav1.GetControllerOf(o)
		if ref == nil || ref.APIVersion != apiVersion || ref.Kind != gvk.Kind {
			return nil
		}
		return []string{ref.Name}
	})
	if err != nil {
		return fmt.Errorf("indexing workloads by %s owner: %w", gvk.Kind, err)
	}
	return nil
}
