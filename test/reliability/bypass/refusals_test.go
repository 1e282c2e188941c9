package bypass_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
)

// groupPod is the only pod of the group name, of 4 GPUs.
func groupPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name + "-0",
			Labels:      map[string]string{berthv1.QueueNameLabel: queue, berthv1.PodGroupLabel: name},
			Annotations: map[string]string{berthv1.PodGroupTotalCountAnnotation: "1"},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/eval:latest",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{builders.GPU: resource.MustParse("4")},
				Limits:   corev1.ResourceList{builders.GPU: resource.MustParse("4")},
			}}}},
	}
}

// gpuJob is a queued Job of one 4-GPU pod.
func gpuJob(ns, name string) *batchv1.Job {
	return builders.Job(ns, name, queue).Request(builders.GPU, "4").Obj()
}

// refusal is an object the API server must refuse at creation.
type refusal struct {
	// make builds the object in ns; it may create what the object refers to.
	make func(ctx context.Context, ns string) client.Object
	// byTenant creates it as an ordinary user of the namespace.
	byTenant bool
	// want is the refusal's message, or a part of it.
	want string
}

func withQueue(q string) func(context.Context, string) client.Object {
	return func(_ context.Context, ns string) client.Object {
		job := gpuJob(ns, "job")
		job.Labels[berthv1.QueueNameLabel] = q
		return job
	}
}

func flavor(mutate func(*berthv1.ResourceFlavor)) func(context.Context, string) client.Object {
	return func(_ context.Context, ns string) client.Object {
		rf := builders.Flavor(ns+"-bad", map[string]string{productLabel: product})
		mutate(rf)
		return rf
	}
}

// forged is a gated-looking pod whose controller is owner.
func forged(owner func(ctx context.Context, ns string) metav1.OwnerReference) func(context.Context, string) client.Object {
	return func(ctx context.Context, ns string) client.Object {
		p := groupPod(ns, "forged")
		p.OwnerReferences = []metav1.OwnerReference{owner(ctx, ns)}
		return p
	}
}

const queueNameMsg = "must be the name of a LocalQueue in the job's own namespace (lowercase letters, digits, '-' and '.', " +
	"starting and ending with a letter or digit; a job cannot use another namespace's queue)"

var _ = Describe("refused at the API server", func() {
	DescribeTable("creating",
		func(ctx SpecContext, r refusal) {
			ns := newTeam(ctx, "8")
			c := env.Client
			if r.byTenant {
				c = tenant(ctx, ns)
			}
			Expect(c.Create(ctx, r.make(ctx, ns), client.FieldValidation("Strict"))).To(MatchError(ContainSubstring(r.want)))
			expectNoPodOutsideQuota(ctx, ns)
		},
		// The JobSet operator's webhook refuses it before berth sees it;
		// berth's own check for JobSets that reach it anyway is a unit test
		// of the JobSet adapter (controllers/jobs/jobset).
		Entry("a JobSet whose replicas × parallelism overflow int32", refusal{
			make: func(_ context.Context, ns string) client.Object {
				spec := gpuJob(ns, "t").Spec
				spec.Parallelism, spec.Completions = ptr.To[int32](1<<16), ptr.To[int32](1<<16)
				return &jobsetv1.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "huge",
					Labels: map[string]string{berthv1.QueueNameLabel: queue}},
					Spec: jobsetv1.JobSetSpec{ReplicatedJobs: []jobsetv1.ReplicatedJob{{Name: "w", Replicas: 1 << 16,
						Template: batchv1.JobTemplateSpec{Spec: spec}}}}}
			},
			want: "the product of replicas and parallelism must not exceed 2147483647 for replicatedJob 'w'"}),
		Entry("a Job with an empty queue name", refusal{make: withQueue(""),
			want: `metadata.labels[berth.dev/queue-name]: Invalid value: "": ` + queueNameMsg}),
		Entry("a Job with an underscore in its queue name", refusal{make: withQueue("team_a"),
			want: `metadata.labels[berth.dev/queue-name]: Invalid value: "team_a": ` + queueNameMsg}),
		Entry("a Job naming another namespace's LocalQueue", refusal{make: withQueue("other/team-a"),
			want: `metadata.labels: Invalid value: "other/team-a": a valid label must be an empty string or consist of alphanumeric characters`}),
		Entry("a Job with an upper-case queue name", refusal{make: withQueue("Team"),
			want: `metadata.labels[berth.dev/queue-name]: Invalid value: "Team": ` + queueNameMsg}),
		Entry("a LocalQueue pointing into another namespace", refusal{
			make: func(_ context.Context, ns string) client.Object {
				lq := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": berthv1.GroupVersion.String(), "kind": "LocalQueue",
					"metadata": map[string]any{"namespace": ns, "name": "elsewhere"},
					"spec":     map[string]any{"clusterQueue": ns, "namespace": "kube-system"},
				}}
				return lq
			},
			want: `unknown field "spec.namespace"`}),
		Entry("a ResourceFlavor whose node label key is not a label key", refusal{
			make: flavor(func(rf *berthv1.ResourceFlavor) { rf.Spec.NodeLabels = map[string]string{"gpu product": "h200"} }),
			want: `spec.nodeLabels[gpu product]: Invalid value: "gpu product": key: name part must consist of alphanumeric characters`}),
		Entry("a ResourceFlavor whose node label value is not a label value", refusal{
			make: flavor(func(rf *berthv1.ResourceFlavor) { rf.Spec.NodeLabels = map[string]string{productLabel: "NVIDIA H200"} }),
			want: `spec.nodeLabels[nvidia.com/gpu.product]: Invalid value: "NVIDIA H200": value: a valid label must be an empty string or consist of alphanumeric characters`}),
		Entry("a ResourceFlavor toleration with an invalid key", refusal{
			make: flavor(func(rf *berthv1.ResourceFlavor) {
				rf.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu!", Operator: corev1.TolerationOpExists}}
			}),
			want: `spec.tolerations[0].key: Invalid value: "nvidia.com/gpu!"`}),
		Entry("a ResourceFlavor toleration with a value and Exists", refusal{
			make: flavor(func(rf *berthv1.ResourceFlavor) {
				rf.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists, Value: "yes"}}
			}),
			want: `spec.tolerations[0].value: Invalid value: "yes": must be empty when operator is Exists`}),
		Entry("a queued pod whose controller is a Job berth does not queue", refusal{byTenant: true,
			make: forged(func(ctx context.Context, ns string) metav1.OwnerReference {
				job := builders.Job(ns, "unqueued", "").Suspend(true).Obj()
				Expect(env.Client.Create(ctx, job)).To(Succeed())
				return metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}
			}),
			want: `metadata.ownerReferences: Forbidden: a queued pod that names controller Job "unqueued" must be created by that controller: ` +
				`remove the controller ownerReference to queue the pod as a pod group`}),
		Entry("a queued pod whose controller is a Job berth queues, created by the tenant", refusal{byTenant: true,
			make: forged(func(ctx context.Context, ns string) metav1.OwnerReference {
				job := gpuJob(ns, "queued")
				Expect(env.Client.Create(ctx, job)).To(Succeed())
				return metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}
			}),
			want: `a queued pod that names controller Job "queued" must be created by that controller`}),
		Entry("a queued pod claiming a Job that is not berth's, created by an administrator", refusal{
			make: forged(func(ctx context.Context, ns string) metav1.OwnerReference {
				job := builders.Job(ns, "unqueued", "").Suspend(true).Obj()
				Expect(env.Client.Create(ctx, job)).To(Succeed())
				return metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}
			}),
			want: `metadata.ownerReferences: Forbidden: controller Job "unqueued" does not exist or is not queued by berth (no berth.dev/queue-name label, no queued parent): ` +
				`label the Job, not only its pods`}),
		Entry("a queued pod claiming another group's pod as its controller", refusal{
			make: forged(func(ctx context.Context, ns string) metav1.OwnerReference {
				other := groupPod(ns, "other")
				Expect(env.Client.Create(ctx, other)).To(Succeed())
				return metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: other.Name, UID: other.UID, Controller: ptr.To(true)}
			}),
			want: `berth queues pods without a controller (pod groups) and the pods of the Jobs, LeaderWorkerSets, Deployments and StatefulSets it queues; ` +
				`controller Pod "other-0" is neither: remove the berth.dev/queue-name label or the controller ownerReference`}),
		Entry("a queued pod that sets berth.dev/workload itself", refusal{byTenant: true,
			make: func(_ context.Context, ns string) client.Object {
				p := groupPod(ns, "placed")
				p.Labels[berthv1.WorkloadLabel] = "0b7c9a2e-0000-4000-8000-000000000000"
				return p
			},
			want: `metadata.labels[berth.dev/workload]: Forbidden: berth sets berth.dev/workload and berth.dev/placement on the pods of admitted gangs only, ` +
				`to the Workload's UID; this is a pod berth still holds: remove the label`}),
		Entry("an unqueued pod that claims a placement", refusal{byTenant: true,
			make: func(_ context.Context, ns string) client.Object {
				p := groupPod(ns, "placed")
				delete(p.Labels, berthv1.QueueNameLabel)
				p.Labels[berthv1.PlacementLabel] = "0b7c9a2e-0000-4000-8000-000000000000"
				return p
			},
			want: `metadata.labels[berth.dev/placement]: Forbidden: berth sets berth.dev/workload and berth.dev/placement on the pods of admitted gangs only, ` +
				`to the Workload's UID; this is a pod created with them and without a controller`}),
	)

	It("refuses a pod labelled with the UID of another gang's admitted Workload", func(ctx SpecContext) {
		ns := newTeam(ctx, "8")
		job := gpuJob(ns, "admitted")
		Expect(env.Client.Create(ctx, job)).To(Succeed())
		uid := admittedUID(ctx, ns, string(job.UID))
		p := builders.Job(ns, "x", "").Obj().Spec.Template.DeepCopy()
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "impostor",
			Labels: map[string]string{berthv1.WorkloadLabel: uid}}, Spec: p.Spec}
		// Made by hand, without a controller: only a job's controller
		// creates pods with berth's labels.
		mallory := tenant(ctx, ns)
		Expect(mallory.Create(ctx, pod)).To(MatchError(ContainSubstring(`metadata.labels[berth.dev/workload]: Forbidden: berth sets berth.dev/workload and berth.dev/placement ` +
			`on the pods of admitted gangs only, to the Workload's UID; this is a pod created with them and without a controller`)))

		By("naming the admitted Job as its controller, with a pod set the Job's Workload does not have")
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}
		pod.Labels[berthv1.PodSetLabel] = "other"
		Expect(mallory.Create(ctx, pod)).To(MatchError(ContainSubstring(`admitted no pod set "other"`)))
		expectNoPodOutsideQuota(ctx, ns)
	})
})
