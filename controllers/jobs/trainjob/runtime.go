package trainjob

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/berth-dev/berth/controllers/jobs"
)

// How Trainer v2.3.0 turns a TrainJob and its training runtime into the
// JobSet it runs (pkg/runtime/core and the runtime plugins), as far as
// berth needs it: which replicated jobs run how many pods, and what each
// pod asks for and where it may go. berth never builds the JobSet itself;
// it charges the gang the trainer will create.

// The names Trainer gives the steps of a TrainJob (its pkg/constants): the
// label that tells a replicated job's step, its values, and the name of
// the trainer's container and of an MPI runtime's node job.
const (
	ancestorLabel      = "trainer.kubeflow.org/trainjob-ancestor-step"
	ancestorTrainer    = "trainer"
	datasetInitializer = "dataset-initializer"
	modelInitializer   = "model-initializer"
	nodeName           = "node"
)

// runtimeRef is the runtime a TrainJob references, with the API's
// defaults (apiGroup trainer.kubeflow.org, kind ClusterTrainingRuntime).
type runtimeRef struct{ group, kind, name string }

func refOf(tj *trainer.TrainJob) runtimeRef {
	r := tj.Spec.RuntimeRef
	return runtimeRef{group: ptr.Deref(r.APIGroup, trainer.GroupVersion.Group),
		kind: ptr.Deref(r.Kind, trainer.ClusterTrainingRuntimeKind), name: r.Name}
}

// readRuntime reads the spec of the runtime tj references. What the user
// must fix (no runtime named, a kind Trainer does not run, a runtime that
// does not exist) is a *jobs.InvalidError; other errors are transient.
func readRuntime(ctx context.Context, c client.Reader, tj *trainer.TrainJob) (*trainer.TrainingRuntimeSpec, error) {
	ref := refOf(tj)
	if ref.name == "" {
		return nil, jobs.Invalid("spec.runtimeRef.name is empty: name the TrainingRuntime or ClusterTrainingRuntime the TrainJob runs")
	}
	if ref.group != trainer.GroupVersion.Group || (ref.kind != trainer.TrainingRuntimeKind && ref.kind != trainer.ClusterTrainingRuntimeKind) {
		return nil, jobs.Invalid("spec.runtimeRef names %s.%s %q, which Trainer does not run: reference a %s or %s of %s",
			ref.kind, ref.group, ref.name, trainer.TrainingRuntimeKind, trainer.ClusterTrainingRuntimeKind, trainer.GroupVersion.Group)
	}
	var (
		obj  client.Object
		spec *trainer.TrainingRuntimeSpec
		key  = client.ObjectKey{Name: ref.name}
		what = fmt.Sprintf("%s %q", ref.kind, ref.name)
	)
	if ref.kind == trainer.TrainingRuntimeKind {
		rt := &trainer.TrainingRuntime{}
		obj, spec, key.Namespace = rt, &rt.Spec, tj.Namespace
		what = fmt.Sprintf("%s %q in namespace %s", ref.kind, ref.name, tj.Namespace)
	} else {
		rt := &trainer.ClusterTrainingRuntime{}
		obj, spec = rt, &rt.Spec
	}
	err := c.Get(ctx, key, obj)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return nil, jobs.Invalid("the TrainJob's runtime, %s, does not exist: create it, or reference one that does (spec.runtimeRef)", what)
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	return spec, nil
}

// jobSetSpec is the spec of the JobSet the trainer builds for tj from rt:
// the runtime's template with tj's runtime patches merged in list order
// (skipping the one of manager skip, when not empty), each replicated
// job's pod count (parallelism and completions) and replicas as the
// trainer sets them, and the trainer node's image and resources from
// spec.trainer.
func jobSetSpec(tj *trainer.TrainJob, rt *trainer.TrainingRuntimeSpec, skip string) (*jobsetv1.JobSetSpec, error) {
	spec := rt.Template.Spec.DeepCopy()
	if err := mergePatches(spec, tj.Spec.RuntimePatches, skip); err != nil {
		return nil, err
	}
	counts := podCounts(tj, rt.MLPolicy, spec)
	for i := range spec.ReplicatedJobs {
		rj := &spec.ReplicatedJobs[i]
		ancestor := rj.Template.Labels[ancestorLabel]
		applyTrainer(tj, rt.MLPolicy, rj, ancestor)
		switch ancestor {
		case ancestorTrainer, datasetInitializer, modelInitializer:
			// The trainer runs one Job of each of these steps.
			rj.Replicas = 1
		default:
			// JobSet's API default.
			rj.Replicas = max(rj.Replicas, 1)
		}
		rj.Template.Spec.Parallelism = ptr.To(counts[i])
		rj.Template.Spec.Completions = ptr.To(counts[i])
	}
	return spec, nil
}

// mergePatches merges the JobSet spec patches of patches into spec as the
// trainer does: a strategic merge patch each, in list order, then the
// replicated jobs back in the runtime's order. The patch of manager skip
// is left out.
func mergePatches(spec *jobsetv1.JobSetSpec, patches []trainer.RuntimePatch, skip string) error {
	order := map[string]int{}
	for i, rj := range spec.ReplicatedJobs {
		order[rj.Name] = i
	}
	for _, p := range patches {
		if p.Manager == skip && skip != "" {
			continue
		}
		if p.TrainingRuntimeSpec == nil || p.TrainingRuntimeSpec.Template == nil || p.TrainingRuntimeSpec.Template.Spec == nil {
			continue
		}
		src, err := json.Marshal(spec)
		if err != nil {
			return fmt.Errorf("encoding the runtime's JobSet template: %w", err)
		}
		patch, err := json.Marshal(p.TrainingRuntimeSpec.Template.Spec)
		if err != nil {
			return fmt.Errorf("encoding runtime patch %s: %w", p.Manager, err)
		}
		merged, err := strategicpatch.StrategicMergePatch(src, patch, jobsetv1.JobSetSpec{})
		if err != nil {
			return jobs.Invalid("runtime patch %s cannot be applied to the runtime's JobSet template: %v", p.Manager, err)
		}
		*spec = jobsetv1.JobSetSpec{}
		if err := json.Unmarshal(merged, spec); err != nil {
			return fmt.Errorf("decoding the patched JobSet template: %w", err)
		}
	}
	slices.SortStableFunc(spec.ReplicatedJobs, func(a, b jobsetv1.ReplicatedJob) int { return order[a.Name] - order[b.Name] })
	return nil
}

// podCounts is the number of pods of each replicated job's Job: its
// parallelism (1 when unset); for the trainer step of a runtime with an ML
// policy, the policy's numNodes. spec.trainer.numNodes overrides the
// trainer step's (for an MPI policy, the "node" job's, one less when the
// launcher runs as a node). A count below 1 is raised to 1, as the
// trainer does, except for the override, which it takes as it is.
func podCounts(tj *trainer.TrainJob, policy *trainer.MLPolicy, spec *jobsetv1.JobSetSpec) []int32 {
	counts := make([]int32, len(spec.ReplicatedJobs))
	trainerStep := -1
	for i := range spec.ReplicatedJobs {
		rj := &spec.ReplicatedJobs[i]
		n := ptr.Deref(rj.Template.Spec.Parallelism, 1)
		if rj.Template.Labels[ancestorLabel] == ancestorTrainer {
			if trainerStep < 0 {
				trainerStep = i
			}
			if policy != nil {
				n = ptr.Deref(policy.NumNodes, 1)
			}
		}
		counts[i] = max(n, 1)
	}
	nodes := tj.Spec.Trainer
	if nodes == nil || nodes.NumNodes == nil {
		return counts
	}
	if policy != nil && policy.MPI != nil {
		for i := range spec.ReplicatedJobs {
			if spec.ReplicatedJobs[i].Name != nodeName {
				continue
			}
			counts[i] = *nodes.NumNodes
			if ptr.Deref(policy.MPI.RunLauncherAsNode, false) {
				counts[i] = max(*nodes.NumNodes-1, 1)
			}
			break
		}
		return counts
	}
	if trainerStep >= 0 {
		counts[trainerStep] = *nodes.NumNodes
	}
	return counts
}

// applyTrainer gives a replicated job's "node" container what
// spec.trainer sets that decides where and at what cost it runs: the
// image, on the trainer step, and resourcesPerNode merged into its
// resources, on the trainer step of a runtime with an ML policy (and on
// the "node" job of an MPI policy whose launcher runs as a node).
func applyTrainer(tj *trainer.TrainJob, policy *trainer.MLPolicy, rj *jobsetv1.ReplicatedJob, ancestor string) {
	t := tj.Spec.Trainer
	if t == nil {
		return
	}
	isTrainer := ancestor == ancestorTrainer
	launcherAsNode := policy != nil && policy.MPI != nil && ptr.Deref(policy.MPI.RunLauncherAsNode, false) && rj.Name == nodeName
	ctrs := rj.Template.Spec.Template.Spec.Containers
	for i := range ctrs {
		if ctrs[i].Name != nodeName {
			continue
		}
		if isTrainer && t.Image != nil {
			ctrs[i].Image = *t.Image
		}
		if t.ResourcesPerNode != nil && ((isTrainer && policy != nil) || launcherAsNode) {
			ctrs[i].Resources = mergeResources(ctrs[i].Resources, *t.ResourcesPerNode)
		}
		break
	}
}

// mergeResources is base with override's requests, limits and claims
// merged in, key by key (claims by name), as the trainer merges
// resourcesPerNode.
func mergeResources(base, override corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := *base.DeepCopy()
	merge := func(dst, src corev1.ResourceList) corev1.ResourceList {
		if len(src) == 0 {
			return dst
		}
		if dst == nil {
			dst = corev1.ResourceList{}
		}
		maps.Copy(dst, src)
		return dst
	}
	out.Requests = merge(out.Requests, override.Requests)
	out.Limits = merge(out.Limits, override.Limits)
	for _, c := range override.Claims {
		i := slices.IndexFunc(out.Claims, func(b corev1.ResourceClaim) bool { return b.Name == c.Name })
		if i < 0 {
			out.Claims = append(out.Claims, c)
		} else {
			out.Claims[i] = c
		}
	}
	return out
}
