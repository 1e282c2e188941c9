// Package trainjob adapts Kubeflow Trainer v2 TrainJobs
// (trainer.kubeflow.org/v1alpha1, Trainer v2.3.0) to berth: a whole
// TrainJob is one gang, with one pod set per replicated job of the JobSet
// the trainer builds for it from the training runtime it references (a
// TrainingRuntime of its namespace or a ClusterTrainingRuntime), each of
// replicas × parallelism pods; spec.trainer.numNodes and resourcesPerNode
// size and charge the trainer step as the trainer does. berth holds and
// releases it through spec.suspend, and places it the way Trainer lets an
// external queue place a TrainJob: an entry of its own, manager
// berth.dev/manager, in spec.runtimePatches, which carries each replicated
// job's node selector, tolerations and berth's pod labels while the
// TrainJob runs and is emptied when it is suspended again. The same entry
// labels the JobSet with the TrainJob's queue, so that berth's JobSet
// webhooks guard it as the TrainJob's child: the JobSet is neither held nor
// queued on its own, cannot run before the TrainJob's Workload is
// admitted, nor grow beyond it.
package trainjob

import (
	"context"
	"errors"
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/jobs/jobset"
)

const (
	// Manager is the manager of berth's entry in a TrainJob's
	// spec.runtimePatches.
	Manager = "berth.dev/manager"
	// trainerController is the spec.managedBy of the TrainJobs the
	// trainer's own controller runs (its default).
	trainerController = "trainer.kubeflow.org/trainjob-controller"
	// maxPodSets is the Workload API's limit on pod sets.
	maxPodSets = 8
)

// Kind is the jobs.Kind of TrainJobs.
type Kind struct{}

var (
	_ jobs.Kind          = Kind{}
	_ jobs.Loader        = Kind{}
	_ jobs.ChildVerifier = Kind{}
	_ jobs.Watcher       = Kind{}
)

// GVK of trainer.kubeflow.org/v1alpha1 TrainJob.
func (Kind) GVK() schema.GroupVersionKind { return trainer.GroupVersion.WithKind(trainer.TrainJobKind) }

// NewObject returns an empty TrainJob.
func (Kind) NewObject() client.Object { return &trainer.TrainJob{} }

// Wrap returns the GenericJob of a TrainJob without its runtime: enough to
// hold, start and stop it, not to describe its gang (see Load).
func (Kind) Wrap(obj client.Object) jobs.GenericJob {
	return &TrainJob{TrainJob: obj.(*trainer.TrainJob)}
}

// Load returns the GenericJob of a TrainJob with the runtime it references
// read through c, and, while it runs, the JobSet the trainer runs for it.
func (Kind) Load(ctx context.Context, c client.Reader, obj client.Object) (jobs.GenericJob, error) {
	j, err := load(ctx, c, obj.(*trainer.TrainJob))
	if err != nil {
		return nil, err
	}
	if err := j.readRunning(ctx, c); err != nil {
		return nil, err
	}
	return j, nil
}

// IsChild reports whether child is the JobSet the trainer makes for the
// TrainJob parent: a JobSet named after it (ParentOf has checked that
// parent controls it, by UID). Nothing else a TrainJob controls is its
// gang's, and only one JobSet can take the name, which the trainer holds.
func (Kind) IsChild(parent, child client.Object) bool {
	tj, ok := parent.(*trainer.TrainJob)
	return ok && isJobSet(child) && child.GetName() == tj.Name
}

// isJobSet reports whether obj is a JobSet, typed or as metadata only.
func isJobSet(obj client.Object) bool {
	switch o := obj.(type) {
	case *jobsetv1.JobSet:
		return true
	case *metav1.PartialObjectMetadata:
		return o.GroupVersionKind().GroupKind() == jobset.Kind{}.GVK().GroupKind()
	}
	return false
}

// Watch requeues the queued TrainJobs of a training runtime that changed:
// their gang is the runtime's, and the TrainJob itself did not change.
func (Kind) Watch(_ context.Context, mgr ctrl.Manager, b *builder.Builder) error {
	c := mgr.GetClient()
	enqueue := func(kind string) handler.EventHandler {
		return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, rt client.Object) []reconcile.Request {
			return referencing(ctx, c, kind, rt)
		})
	}
	b.Watches(&trainer.TrainingRuntime{}, enqueue(trainer.TrainingRuntimeKind)).
		Watches(&trainer.ClusterTrainingRuntime{}, enqueue(trainer.ClusterTrainingRuntimeKind))
	return nil
}

// referencing returns the queued TrainJobs that reference the runtime rt
// of kind: in its namespace for a TrainingRuntime, anywhere for a
// ClusterTrainingRuntime. Runtimes change rarely; the TrainJobs are read
// from the cache.
func referencing(ctx context.Context, c client.Reader, kind string, rt client.Object) []reconcile.Request {
	list := &trainer.TrainJobList{}
	if err := c.List(ctx, list, client.InNamespace(rt.GetNamespace())); err != nil {
		log.FromContext(ctx).Error(err, "listing the TrainJobs of a changed runtime", "kind", kind, "runtime", rt.GetName())
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		tj := &list.Items[i]
		ref := refOf(tj)
		if _, queued := tj.Labels[berthv1.QueueNameLabel]; queued && ref.group == trainer.GroupVersion.Group && ref.kind == kind && ref.name == rt.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(tj)})
		}
	}
	return out
}

// TrainJob is a TrainJob seen as a GenericJob.
type TrainJob struct {
	*trainer.TrainJob
	// runtime is the spec of the runtime it references; nil until loaded.
	runtime *trainer.TrainingRuntimeSpec
	// spec is the JobSet the trainer builds for it, without berth's
	// placement: its own gang.
	spec *jobsetv1.JobSetSpec
	// placed is spec with every runtime patch, berth's included: what its
	// pods get.
	placed *jobsetv1.JobSetSpec
	// invalid says why berth cannot queue it as it is.
	invalid error
	// running are the pod sets of the JobSet the trainer runs for it, while
	// it runs.
	running []berthv1.PodSet
}

// load reads the runtime tj references and builds its JobSet spec. What
// the user must fix is recorded for PodSets to report; only transient
// errors are returned.
func load(ctx context.Context, c client.Reader, tj *trainer.TrainJob) (*TrainJob, error) {
	j := &TrainJob{TrainJob: tj}
	if err := j.ownShape(); err != nil {
		j.invalid = err
		return j, nil
	}
	rt, err := readRuntime(ctx, c, tj)
	if err == nil {
		j.runtime = rt
		err = j.build()
	}
	var invalid *jobs.InvalidError
	if errors.As(err, &invalid) {
		j.invalid = err
		return j, nil
	}
	return j, err
}

// build computes spec and placed from the runtime.
func (j *TrainJob) build() error {
	var err error
	if j.spec, err = jobSetSpec(j.TrainJob, j.runtime, Manager); err != nil {
		return err
	}
	j.placed, err = jobSetSpec(j.TrainJob, j.runtime, "")
	return err
}

// ownShape reports what in the TrainJob itself keeps berth from queueing
// it, in words a user can act on.
func (j *TrainJob) ownShape() error {
	if m := ptr.Deref(j.Spec.ManagedBy, trainerController); m != trainerController {
		return jobs.Invalid("spec.managedBy is %q: the trainer leaves such a TrainJob to that controller, which berth cannot hold; remove spec.managedBy to queue it with berth", m)
	}
	if t := j.Spec.Trainer; t != nil && t.NumNodes != nil && *t.NumNodes < 1 {
		return jobs.Invalid("spec.trainer.numNodes is %d: the trainer step would run no pods; set it to 1 or more", *t.NumNodes)
	}
	return nil
}

// readRunning reads the JobSet the trainer runs for a resumed TrainJob.
func (j *TrainJob) readRunning(ctx context.Context, c client.Reader) error {
	if j.IsSuspended() || j.invalid != nil {
		return nil
	}
	js := &jobsetv1.JobSet{}
	err := c.Get(ctx, client.ObjectKeyFromObject(j.TrainJob), js)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading the JobSet of TrainJob %s: %w", client.ObjectKeyFromObject(j.TrainJob), err)
	}
	if !metav1.IsControlledBy(js, j.TrainJob) || ptr.Deref(js.Spec.Suspend, false) {
		return nil
	}
	if sets, err := (&jobset.JobSet{JobSet: js}).PodSets(); err == nil {
		j.running = sets
	}
	return nil
}

// Object returns the TrainJob.
func (j *TrainJob) Object() client.Object { return j.TrainJob }

// errNotLoaded is PodSets of a TrainJob made by Wrap.
var errNotLoaded = errors.New("the TrainJob's runtime was not read (a GenericJob made by Wrap, not Load)")

// PodSets returns one pod set per replicated job of the TrainJob's JobSet,
// replicas × parallelism pods each, with the requests of its pod template.
// While the TrainJob runs, no pod set is smaller than the JobSet the
// trainer runs holds: the trainer builds that JobSet from its own snapshot
// of the runtime and never changes it while it runs, so a runtime edited
// meanwhile must not shrink the Workload, and release quota, under pods
// that keep running.
func (j *TrainJob) PodSets() ([]berthv1.PodSet, error) {
	switch {
	case j.invalid != nil:
		return nil, j.invalid
	case j.spec == nil:
		return nil, errNotLoaded
	}
	rjs := j.spec.ReplicatedJobs
	ref := refOf(j.TrainJob)
	if len(rjs) == 0 {
		return nil, jobs.Invalid("%s %q has no replicatedJobs in its JobSet template: the trainer would run nothing; reference a runtime that runs pods", ref.kind, ref.name)
	}
	if len(rjs) > maxPodSets {
		return nil, jobs.Invalid("%s %q runs %d replicated jobs; berth admits at most %d pod sets per gang: reference a runtime with fewer",
			ref.kind, ref.name, len(rjs), maxPodSets)
	}
	out := make([]berthv1.PodSet, 0, len(rjs))
	for i := range rjs {
		rj := &rjs[i]
		count := int64(rj.Replicas) * int64(ptr.Deref(rj.Template.Spec.Parallelism, 1))
		if count > math.MaxInt32 {
			return nil, jobs.Invalid("replicated job %q runs %d pods, more than berth can count (%d): lower its replicas or spec.trainer.numNodes",
				rj.Name, count, math.MaxInt32)
		}
		out = append(out, berthv1.PodSet{Name: rj.Name, Count: int32(count), Requests: jobs.PodRequests(&rj.Template.Spec.Template.Spec)})
	}
	return atLeast(out, j.running), nil
}

// atLeast raises each pod set's count and requests to those of the pod
// set of the same name in running.
func atLeast(sets, running []berthv1.PodSet) []berthv1.PodSet {
	for i := range sets {
		for _, r := range running {
			if r.Name != sets[i].Name {
				continue
			}
			sets[i].Count = max(sets[i].Count, r.Count)
			if sets[i].Requests == nil {
				sets[i].Requests = corev1.ResourceList{}
			}
			for name, q := range r.Requests {
				if have, ok := sets[i].Requests[name]; !ok || q.Cmp(have) > 0 {
					sets[i].Requests[name] = q
				}
			}
		}
	}
	return sets
}

// PodTemplates returns each replicated job's pod template, with the labels
// the JobSet controller adds to its pods.
func (j *TrainJob) PodTemplates() []jobs.PodSetTemplate {
	if j.spec == nil || j.invalid != nil {
		return nil
	}
	js := &jobsetv1.JobSet{ObjectMeta: metav1.ObjectMeta{Name: j.Name, Namespace: j.Namespace}, Spec: *j.spec}
	return (&jobset.JobSet{JobSet: js}).PodTemplates()
}

// IsSuspended reports whether spec.suspend is true.
func (j *TrainJob) IsSuspended() bool { return ptr.Deref(j.Spec.Suspend, false) }

// Suspend sets spec.suspend; the trainer suspends its JobSet.
func (j *TrainJob) Suspend() { j.Spec.Suspend = ptr.To(true) }

// Resume clears spec.suspend; the trainer builds and resumes its JobSet.
func (j *TrainJob) Resume() { j.Spec.Suspend = ptr.To(false) }

// Scheduling returns each replicated job's node selector, tolerations and
// berth's labels and annotations as its pods get them: the runtime's
// template with every runtime patch, berth's included. Before berth placed
// it, that is the TrainJob's own.
func (j *TrainJob) Scheduling() []jobs.PodSetScheduling {
	if j.placed == nil {
		return nil
	}
	out := make([]jobs.PodSetScheduling, 0, len(j.placed.ReplicatedJobs))
	for i := range j.placed.ReplicatedJobs {
		rj := &j.placed.ReplicatedJobs[i]
		out = append(out, jobs.TemplateScheduling(rj.Name, &rj.Template.Spec.Template))
	}
	return out
}

// IsActive reports whether the trainer may still run pods of the TrainJob:
// from the moment it reports it resumed (its Suspended condition False)
// until it reports it suspended again, and while any Job of its JobSet
// has active pods.
func (j *TrainJob) IsActive() bool {
	for _, s := range j.Status.JobsStatus {
		if ptr.Deref(s.Active, 0) > 0 {
			return true
		}
	}
	c := meta.FindStatusCondition(j.Status.Conditions, trainer.TrainJobSuspended)
	return c != nil && c.Status == metav1.ConditionFalse
}

// Finished reports the TrainJob's Complete or Failed condition.
func (j *TrainJob) Finished() (bool, bool, string) {
	if c := meta.FindStatusCondition(j.Status.Conditions, trainer.TrainJobComplete); c != nil && c.Status == metav1.ConditionTrue {
		return true, true, "the TrainJob completed"
	}
	if c := meta.FindStatusCondition(j.Status.Conditions, trainer.TrainJobFailed); c != nil && c.Status == metav1.ConditionTrue {
		return true, false, fmt.Sprintf("the TrainJob failed (%s): %s", c.Reason, c.Message)
	}
	return false, false, ""
}

// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainingruntimes,verbs=get;list;watch
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=clustertrainingruntimes,verbs=get;list;watch
