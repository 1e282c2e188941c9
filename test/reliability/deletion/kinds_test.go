package deletion_test

import (
	"context"
	"slices"
	"strconv"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/controlplane"
)

// runFor is how long a gang's pods run on a kwok node when nothing stops
// them: longer than any spec, which deletes them first.
const runFor = 2 * time.Minute

// kind is one kind of gang berth admits, as the specs submit and delete
// it. Every gang is 8 GPUs: the whole quota.
type kind struct {
	name string
	// pods is how many pods the gang runs.
	pods int
	// create submits a gang with the priority class (none when empty).
	create func(ctx context.Context, ns, name, priorityClass string) gang
}

// gang is one submitted gang.
type gang struct {
	// obj is the object a user deletes: the job, or the first pod of a pod
	// group.
	obj client.Object
	// labels select the gang's pods.
	labels map[string]string
	// members are the objects deleted to delete the gang: obj, or every pod
	// of a pod group.
	members []client.Object
}

func container(gpus string) corev1.Container {
	return corev1.Container{Name: "main", Image: "registry.invalid/train:latest", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{builders.GPU: resource.MustParse(gpus)},
		Limits:   corev1.ResourceList{builders.GPU: resource.MustParse(gpus)},
	}}
}

var (
	jobKind = kind{name: "Job", pods: 1, create: func(ctx context.Context, ns, name, pc string) gang {
		job := builders.Job(ns, name, "team").Request(builders.GPU, "8").PodAnnotations(controlplane.RunFor(runFor)).Obj()
		job.Spec.Template.Spec.PriorityClassName = pc
		Expect(env.Client.Create(ctx, job)).To(Succeed())
		return gang{obj: job, labels: map[string]string{batchv1.JobNameLabel: name}, members: []client.Object{job}}
	}}

	jobSetKind = kind{name: "JobSet", pods: 2, create: func(ctx context.Context, ns, name, pc string) gang {
		tmpl := corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: controlplane.RunFor(runFor)},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, PriorityClassName: pc,
				Containers: []corev1.Container{container("4")}},
		}
		js := &jobsetv1.JobSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{berthv1.QueueNameLabel: "team"}},
			Spec: jobsetv1.JobSetSpec{ReplicatedJobs: []jobsetv1.ReplicatedJob{{Name: "workers", Replicas: 2,
				Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
					Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), BackoffLimit: ptr.To[int32](0), Template: tmpl,
				}}}}},
		}
		Expect(env.Client.Create(ctx, js)).To(Succeed())
		return gang{obj: js, labels: map[string]string{jobsetv1.JobSetNameKey: name}, members: []client.Object{js}}
	}}

	lwsKind = kind{name: "LeaderWorkerSet", pods: 2, create: func(ctx context.Context, ns, name, pc string) gang {
		set := &lwsv1.LeaderWorkerSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{berthv1.QueueNameLabel: "team"}},
			Spec: lwsv1.LeaderWorkerSetSpec{
				StartupPolicy:   lwsv1.LeaderCreatedStartupPolicy,
				RolloutStrategy: lwsv1.RolloutStrategy{Type: lwsv1.RollingUpdateStrategyType},
				Replicas:        ptr.To[int32](1),
				LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{Size: ptr.To[int32](2),
					WorkerTemplate: corev1.PodTemplateSpec{Spec: corev1.PodSpec{PriorityClassName: pc,
						Containers: []corev1.Container{container("4")}}}},
			},
		}
		Expect(env.Client.Create(ctx, set)).To(Succeed())
		return gang{obj: set, labels: map[string]string{lwsv1.SetNameLabelKey: name}, members: []client.Object{set}}
	}}

	podGroupKind = kind{name: "pod group", pods: 2, create: func(ctx context.Context, ns, name, pc string) gang {
		var members []client.Object
		for i := range 2 {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-" + strconv.Itoa(i),
					Labels:      map[string]string{berthv1.QueueNameLabel: "team", berthv1.PodGroupLabel: name},
					Annotations: map[string]string{berthv1.PodGroupTotalCountAnnotation: "2"}},
				Spec: corev1.PodSpec{PriorityClassName: pc, Containers: []corev1.Container{container("4")}},
			}
			Expect(env.Client.Create(ctx, pod)).To(Succeed())
			members = append(members, pod)
		}
		return gang{obj: members[0], labels: map[string]string{berthv1.PodGroupLabel: name}, members: members}
	}}

	kinds = []kind{jobKind, jobSetKind, lwsKind, podGroupKind}
)

// delete deletes the gang with the propagation policy.
func (g gang) delete(ctx context.Context, policy metav1.DeletionPropagation) {
	for _, m := range g.members {
		Expect(client.IgnoreNotFound(env.Client.Delete(ctx, m, client.PropagationPolicy(policy)))).To(Succeed())
	}
}

// gone reports whether every member of the gang is gone.
func (g gang) gone(ctx context.Context, gm Gomega) bool {
	for _, m := range g.members {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m.DeepCopyObject().(client.Object))
		if client.IgnoreNotFound(err) != nil {
			gm.Expect(err).NotTo(HaveOccurred())
		}
		if err == nil {
			return false
		}
	}
	return true
}

// workload finds the gang's Workload: the one its job controls, or, for a
// pod group, the one its pods own.
func (s *space) workload(ctx context.Context, g Gomega, gg gang) *berthv1.Workload {
	uids := map[types.UID]bool{}
	for _, m := range gg.members {
		fresh := m.DeepCopyObject().(client.Object)
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(m), fresh)).To(Succeed())
		uids[fresh.GetUID()] = true
	}
	var found []berthv1.Workload
	for _, wl := range s.workloads(ctx, g) {
		if slices.ContainsFunc(wl.OwnerReferences, func(r metav1.OwnerReference) bool { return uids[r.UID] }) {
			found = append(found, wl)
		}
	}
	g.Expect(found).To(HaveLen(1), "the gang has one Workload")
	return &found[0]
}

// gangPods lists the gang's pods.
func (s *space) gangPods(ctx context.Context, g Gomega, gg gang) []corev1.Pod {
	return s.pods(ctx, g, gg.labels)
}

// running waits until every pod of the gang runs, and returns its Workload.
func (s *space) running(ctx context.Context, k kind, gg gang) *berthv1.Workload {
	var wl *berthv1.Workload
	Eventually(func(g Gomega) {
		pods := s.gangPods(ctx, g, gg)
		g.Expect(pods).To(HaveLen(k.pods))
		for _, p := range pods {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		}
		wl = s.workload(ctx, g, gg)
		g.Expect(wl.Status.Admission).NotTo(BeNil())
	}, timeout, interval).Should(Succeed())
	return wl
}

// waiting waits until the gang's Workload waits for quota, and returns it.
func (s *space) waiting(ctx context.Context, gg gang) *berthv1.Workload {
	var wl *berthv1.Workload
	Eventually(func(g Gomega) {
		wl = s.workload(ctx, g, gg)
		// Waiting its turn is the engine's to serve, not written to the
		// Workload's status.
		_, pending := env.Berth().Scheduler.Explain(lifecycle.KeyOf(wl))
		g.Expect(pending).To(BeTrue(), "Workload %s is pending in the engine", wl.Name)
		g.Expect(lifecycle.Condition(wl, berthv1.ConditionQuotaReserved)).To(Or(BeNil(), HaveField("Status", Not(Equal(metav1.ConditionTrue)))))
		g.Expect(wl.Finalizers).To(ContainElement(berthv1.WorkloadFinalizer))
	}, timeout, interval).Should(Succeed())
	return wl
}

// holdPods puts the linger finalizer on every pod of the gang, so that a
// deleted pod stays terminating — its GPUs in use — until the spec lets it
// go.
func (s *space) holdPods(ctx context.Context, gg gang) {
	Eventually(func(g Gomega) {
		for _, p := range s.gangPods(ctx, g, gg) {
			if slices.Contains(p.Finalizers, linger) {
				continue
			}
			base := p.DeepCopy()
			p.Finalizers = append(p.Finalizers, linger)
			g.Expect(env.Client.Patch(ctx, &p, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))).To(Succeed())
		}
	}, timeout, interval).Should(Succeed())
}

// deleteOrphans deletes what a gang deleted with orphan propagation left
// running: its child Jobs or StatefulSets, then its pods.
func (s *space) deleteOrphans(ctx context.Context, gg gang) {
	bg := client.PropagationPolicy(metav1.DeletePropagationBackground)
	sel := client.MatchingLabels(gg.labels)
	for _, o := range []client.Object{&batchv1.Job{}, &appsv1.StatefulSet{}} {
		Expect(env.Client.DeleteAllOf(ctx, o, client.InNamespace(s.ns), sel, bg)).To(Succeed())
	}
	Expect(env.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(s.ns), sel)).To(Succeed())
}

// isBound reports whether a pod was bound to a node.
func isBound(p *corev1.Pod) bool { return p.Spec.NodeName != "" }
