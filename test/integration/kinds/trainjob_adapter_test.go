package kinds_test

import (
	"context"
	"maps"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
)

// trainJobAdapter drives TrainJobs on a TrainingRuntime of their namespace
// with two replicated jobs: the trainer step "node", sized by the
// TrainJob's numNodes (3), and "ps" (one pod), 2 GPUs per pod. The suite
// plays the trainer (playTrainer): it builds the TrainJob's JobSet from
// the runtime and the runtime patches, resumes and suspends it with the
// TrainJob, and reports the TrainJob's Suspended condition and its Jobs'
// activity.
type trainJobAdapter struct{}

// stepLabel is the label Trainer tells a replicated job's step by.
const stepLabel = "trainer.kubeflow.org/trainjob-ancestor-step"

func (trainJobAdapter) Kind() string { return "TrainJob" }

func (trainJobAdapter) PodSets() []string { return []string{"node", "ps"} }

func (trainJobAdapter) Create(ctx context.Context, c client.Client, namespace, name, queue string) (client.Object, error) {
	tj, err := adapterTrainJob(ctx, c, namespace, name, queue)
	if err != nil {
		return nil, err
	}
	return tj, c.Create(ctx, tj)
}

func (trainJobAdapter) CreateInvalid(ctx context.Context, c client.Client, namespace, name, queue string) (client.Object, string, error) {
	tj, err := adapterTrainJob(ctx, c, namespace, name, queue)
	if err != nil {
		return nil, "", err
	}
	tj.Labels[berthv1.PriorityClassLabel] = "no-such-class"
	return tj, `PriorityClass "no-such-class" does not exist`, c.Create(ctx, tj)
}

func (trainJobAdapter) Finishes() bool { return true }

func (trainJobAdapter) Requeues() bool { return true }

func (trainJobAdapter) Delete(ctx context.Context, c client.Client, obj client.Object) error {
	return c.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground))
}

// State plays the trainer, then reports the TrainJob started when it is
// not suspended, with the node selector each replicated job's pods get
// from its JobSet.
func (trainJobAdapter) State(ctx context.Context, c client.Client, obj client.Object) (bool, map[string]map[string]string, error) {
	tj, js, err := playTrainer(ctx, c, client.ObjectKeyFromObject(obj))
	if err != nil {
		return false, nil, err
	}
	sel := map[string]map[string]string{}
	for _, rj := range js.Spec.ReplicatedJobs {
		sel[rj.Name] = rj.Template.Spec.Template.Spec.NodeSelector
	}
	return !ptr.Deref(tj.Spec.Suspend, false), sel, nil
}

// Finish marks the TrainJob Complete, as the trainer does when its JobSet
// completes.
func (trainJobAdapter) Finish(ctx context.Context, c client.Client, obj client.Object) error {
	tj := &trainer.TrainJob{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), tj); err != nil {
		return err
	}
	before := tj.DeepCopy()
	meta.SetStatusCondition(&tj.Status.Conditions, metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue,
		Reason: "AllJobsCompleted", Message: "jobset completed successfully"})
	return c.Status().Patch(ctx, tj, client.MergeFrom(before))
}

// gpuPod is a pod template of one container, name, asking for gpus GPUs.
func gpuPod(name, gpus string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
		Name: name, Image: "registry.invalid/train:latest", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{builders.GPU: resource.MustParse(gpus)},
			Limits:   corev1.ResourceList{builders.GPU: resource.MustParse(gpus)},
		}}}}}
}

// runtimeSpec is a torch runtime's spec: the trainer step "node" (the
// policy's numNodes, 1, unless the TrainJob says otherwise) and, when ps,
// a replicated job "ps" of one pod, 2 GPUs per pod.
func runtimeSpec(ps bool) trainer.TrainingRuntimeSpec {
	rjs := []jobsetv1.ReplicatedJob{{Name: "node", Replicas: 1, Template: batchv1.JobTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{stepLabel: "trainer"}},
		Spec:       batchv1.JobSpec{Template: gpuPod("node", "2")}}}}
	if ps {
		rjs = append(rjs, jobsetv1.ReplicatedJob{Name: "ps", Replicas: 1, Template: batchv1.JobTemplateSpec{
			Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](1), Template: gpuPod("ps", "2")}}})
	}
	return trainer.TrainingRuntimeSpec{
		MLPolicy: &trainer.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}},
		Template: trainer.JobSetTemplateSpec{Spec: jobsetv1.JobSetSpec{ReplicatedJobs: rjs}},
	}
}

// adapterTrainJob is a TrainJob of 3 nodes on the namespace's
// TrainingRuntime "torch-ps", which it creates when it is missing.
func adapterTrainJob(ctx context.Context, c client.Client, namespace, name, queue string) (*trainer.TrainJob, error) {
	rt := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "torch-ps"}, Spec: runtimeSpec(true)}
	if err := c.Create(ctx, rt); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	return &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{berthv1.QueueNameLabel: queue}},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: rt.Name, Kind: ptr.To(trainer.TrainingRuntimeKind)},
			Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](3)}},
	}, nil
}

// playTrainer does for the TrainJob of key what the trainer does when it
// reconciles it: it builds the TrainJob's JobSet (trainerJobSet), creates
// it, or rebuilds it while the TrainJob or the JobSet is suspended, and
// reports the TrainJob's Suspended condition and its Jobs' activity.
// Status is written with merge patches, which never conflict with berth's
// writes.
func playTrainer(ctx context.Context, c client.Client, key client.ObjectKey) (*trainer.TrainJob, *jobsetv1.JobSet, error) {
	tj := &trainer.TrainJob{}
	if err := c.Get(ctx, key, tj); err != nil {
		return nil, nil, err
	}
	want, err := trainerJobSet(ctx, c, tj)
	if err != nil {
		return nil, nil, err
	}
	js := &jobsetv1.JobSet{}
	switch err := c.Get(ctx, key, js); {
	case apierrors.IsNotFound(err):
		js = want
		if err := c.Create(ctx, js); err != nil {
			return nil, nil, err
		}
	case err != nil:
		return nil, nil, err
	case ptr.Deref(tj.Spec.Suspend, false) || ptr.Deref(js.Spec.Suspend, false):
		before := js.DeepCopy()
		js.Labels, js.Spec = want.Labels, want.Spec
		if err := c.Patch(ctx, js, client.MergeFrom(before)); err != nil {
			return nil, nil, err
		}
	}
	// The status is written on a copy: berth may have suspended the
	// TrainJob since it was read, and the caller must see the TrainJob
	// whose state was reported, so that it asks again.
	return tj, js, reportTrainJob(ctx, c, tj.DeepCopy())
}

// reportTrainJob writes the trainer's status of tj: Suspended True while
// it is suspended (False once it is resumed), and each replicated job's
// one Job active while it runs.
func reportTrainJob(ctx context.Context, c client.Client, tj *trainer.TrainJob) error {
	before := tj.DeepCopy()
	suspended := ptr.Deref(tj.Spec.Suspend, false)
	status, reason, active := metav1.ConditionFalse, trainer.TrainJobResumedReason, int32(1)
	if suspended {
		status, reason, active = metav1.ConditionTrue, trainer.TrainJobSuspendedReason, 0
	}
	if suspended || meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobSuspended) {
		meta.SetStatusCondition(&tj.Status.Conditions, metav1.Condition{Type: trainer.TrainJobSuspended, Status: status, Reason: reason, Message: reason})
	}
	tj.Status.JobsStatus = nil
	for _, name := range []string{"node", "ps"} {
		tj.Status.JobsStatus = append(tj.Status.JobsStatus, trainer.JobStatus{Name: name, Active: ptr.To(active),
			Ready: ptr.To[int32](0), Succeeded: ptr.To[int32](0), Failed: ptr.To[int32](0), Suspended: ptr.To(1 - active)})
	}
	return c.Status().Patch(ctx, tj, client.MergeFrom(before))
}

// trainerJobSet is the JobSet the trainer builds for tj, as far as this
// suite's runtimes need: the runtime's replicated jobs, the trainer step
// sized by numNodes (else the policy's) with resourcesPerNode on its
// container, one Job per step, and what the
// runtime patches give the JobSet's labels and, in list order, each
// replicated job's pods (node selector, tolerations, labels, annotations).
// It is owned by tj and named after it, suspended as tj is.
func trainerJobSet(ctx context.Context, c client.Client, tj *trainer.TrainJob) (*jobsetv1.JobSet, error) {
	spec, err := runtimeOf(ctx, c, tj)
	if err != nil {
		return nil, err
	}
	js := &jobsetv1.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: tj.Namespace, Name: tj.Name, Labels: map[string]string{},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind, Name: tj.Name,
			UID: tj.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: *spec.Template.Spec.DeepCopy()}
	js.Spec.Suspend = ptr.To(ptr.Deref(tj.Spec.Suspend, false))
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		n := ptr.Deref(rj.Template.Spec.Parallelism, 1)
		if rj.Template.Labels[stepLabel] == "trainer" {
			rj.Replicas, n = 1, ptr.Deref(spec.MLPolicy.NumNodes, 1)
			if t := tj.Spec.Trainer; t != nil {
				n = ptr.Deref(t.NumNodes, n)
				if r := t.ResourcesPerNode; r != nil {
					ctr := &rj.Template.Spec.Template.Spec.Containers[0]
					ctr.Resources.Requests = merged(ctr.Resources.Requests, r.Requests)
					ctr.Resources.Limits = merged(ctr.Resources.Limits, r.Limits)
				}
			}
		}
		rj.Template.Spec.Parallelism, rj.Template.Spec.Completions = ptr.To(n), ptr.To(n)
	}
	for _, p := range tj.Spec.RuntimePatches {
		if p.TrainingRuntimeSpec == nil || p.TrainingRuntimeSpec.Template == nil {
			continue
		}
		if m := p.TrainingRuntimeSpec.Template.Metadata; m != nil {
			maps.Copy(js.Labels, m.Labels)
		}
		if s := p.TrainingRuntimeSpec.Template.Spec; s != nil {
			for _, rp := range s.ReplicatedJobs {
				patchPods(js, rp)
			}
		}
	}
	return js, nil
}

// patchPods applies a runtime patch's pod template entries to the pods of
// the replicated job it names.
func patchPods(js *jobsetv1.JobSet, rp trainer.ReplicatedJobPatch) {
	if rp.Template == nil || rp.Template.Spec == nil || rp.Template.Spec.Template == nil {
		return
	}
	pt := rp.Template.Spec.Template
	for i := range js.Spec.ReplicatedJobs {
		if js.Spec.ReplicatedJobs[i].Name != rp.Name {
			continue
		}
		t := &js.Spec.ReplicatedJobs[i].Template.Spec.Template
		if m := pt.Metadata; m != nil {
			t.Labels, t.Annotations = merged(t.Labels, m.Labels), merged(t.Annotations, m.Annotations)
		}
		if s := pt.Spec; s != nil {
			t.Spec.NodeSelector = merged(t.Spec.NodeSelector, s.NodeSelector)
			if s.Tolerations != nil {
				t.Spec.Tolerations = s.Tolerations
			}
		}
	}
}

// merged is dst with src's entries.
func merged[K comparable, V any, M ~map[K]V](dst, src M) M {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = M{}
	}
	maps.Copy(dst, src)
	return dst
}

// runtimeOf reads the spec of the runtime tj references.
func runtimeOf(ctx context.Context, c client.Client, tj *trainer.TrainJob) (*trainer.TrainingRuntimeSpec, error) {
	name := tj.Spec.RuntimeRef.Name
	if ptr.Deref(tj.Spec.RuntimeRef.Kind, trainer.ClusterTrainingRuntimeKind) == trainer.TrainingRuntimeKind {
		rt := &trainer.TrainingRuntime{}
		err := c.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: name}, rt)
		return &rt.Spec, err
	}
	rt := &trainer.ClusterTrainingRuntime{}
	err := c.Get(ctx, client.ObjectKey{Name: name}, rt)
	return &rt.Spec, err
}
