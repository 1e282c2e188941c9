package e2e_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/framework"
	"github.com/berth-dev/berth/test/jobsuite"
)

// hostPort is the port the specs' gangs and the pod that takes it from
// them listen on. berth does not count host ports, so a node whose port is
// taken is, to berth, a node with room: what kube-scheduler then does with
// a gang is what the hand-off decides.
const hostPort = 9000

func withHostPort(job *batchv1.Job) *batchv1.Job {
	job.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: hostPort}}
	return job
}

// boundAndUnschedulable counts the Job's pods bound to a node, and those
// kube-scheduler found no node for.
func boundAndUnschedulable(ctx SpecContext, g Gomega, job *batchv1.Job) (bound, unschedulable int) {
	for _, p := range podsOf(ctx, g, job) {
		if p.Spec.NodeName != "" {
			bound++
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				unschedulable++
			}
		}
	}
	return bound, unschedulable
}

// gangMinCount is the gang minCount job's spec.scheduling asks for, 0
// when it asks for none.
func gangMinCount(ctx SpecContext, job *batchv1.Job) int32 {
	got := &batchv1.Job{}
	Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(job), got)).To(Succeed())
	if s := got.Spec.Scheduling; s != nil && s.SchedulingPolicy != nil && s.SchedulingPolicy.Gang != nil {
		return ptr.Deref(s.SchedulingPolicy.Gang.MinCount, 0)
	}
	return 0
}

func getPodGroup(ctx SpecContext, g Gomega, ns, name string) *schedulingv1beta1.PodGroup {
	pg := &schedulingv1beta1.PodGroup{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pg)).To(Succeed())
	return pg
}

func expectPodGroupGone(ctx SpecContext, ns, name string) {
	Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &schedulingv1beta1.PodGroup{})
	}, timeout, interval).Should(Satisfy(apierrors.IsNotFound), "PodGroup %s is deleted when its gang ends", name)
}

var _ = Describe("gangs handed to kube-scheduler's gang scheduling", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) {
		ns = newNamespace(ctx)
		Expect(env.Client.Create(ctx, builders.Flavor(ns, map[string]string{productLabel: product}))).To(Succeed())
		Expect(env.Client.Create(ctx, builders.ClusterQueue(ns).Quota(ns, builders.GPU, "16", "").Obj())).To(Succeed())
		Expect(env.Client.Create(ctx, builders.LocalQueue(ns, "team", ns))).To(Succeed())
	})

	It("binds none of an admitted gang whose last pod cannot fit, though berth saw room, and all of it once it fits", func(ctx SpecContext) {
		By("taking the gang's host port on h200-1 with a pod berth does not count")
		taker := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "port-taker"},
			Spec: corev1.PodSpec{NodeName: "h200-1", Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/proxy:latest",
				Ports: []corev1.ContainerPort{{ContainerPort: 8080, HostPort: hostPort}}}}},
		}
		Expect(env.Client.Create(ctx, taker)).To(Succeed())

		By("showing that, without a queue, kube-scheduler binds part of such a gang")
		unqueued := withHostPort(builders.Job(ns, "unqueued", "").Pods(2).Request(builders.GPU, "8").
			PodAnnotations(controlplane.RunFor(time.Hour)).Obj())
		Expect(env.Client.Create(ctx, unqueued)).To(Succeed())
		Eventually(func(g Gomega) {
			bound, unschedulable := boundAndUnschedulable(ctx, g, unqueued)
			g.Expect(bound).To(Equal(1))
			g.Expect(unschedulable).To(Equal(1))
		}, timeout, interval).Should(Succeed())
		Expect(env.Client.Delete(ctx, unqueued, client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())
		Eventually(func(g Gomega) { g.Expect(podsOf(ctx, g, unqueued)).To(BeEmpty()) }, timeout, interval).Should(Succeed())

		By("queueing the same gang through berth, which admits it on two nodes with room and asks for the gang in the Job's spec")
		job := withHostPort(builders.Job(ns, "gang", "team").Pods(2).Request(builders.GPU, "8").
			PodAnnotations(controlplane.RunFor(2 * time.Second)).Obj())
		Expect(env.Client.Create(ctx, job)).To(Succeed())
		Expect(gangMinCount(ctx, job)).To(BeEquivalentTo(2), "berth asks for a gang of the Job's pods")
		var group string
		Eventually(func(g Gomega) {
			pods := podsOf(ctx, g, job)
			g.Expect(pods).To(HaveLen(2), func() string { return framework.DescribePods(ctx, env.Client, ns) })
			for _, p := range pods {
				g.Expect(p.Spec.SchedulingGroup).NotTo(BeNil(), "the Job controller names its group in every pod")
				group = ptr.Deref(p.Spec.SchedulingGroup.PodGroupName, "")
			}
			pg := getPodGroup(ctx, g, ns, group)
			g.Expect(metav1.IsControlledBy(pg, job)).To(BeTrue(), "the Job controller's group, not one of berth's")
			g.Expect(pg.Spec.SchedulingPolicy.Gang).To(HaveField("MinCount", BeEquivalentTo(2)))
			c := meta.FindStatusCondition(pg.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled)
			g.Expect(c).NotTo(BeNil(), "kube-scheduler has tried the gang")
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(schedulingv1beta1.PodGroupReasonUnschedulable))
		}, timeout, interval).Should(Succeed())
		Consistently(func(g Gomega) {
			bound, _ := boundAndUnschedulable(ctx, g, job)
			g.Expect(bound).To(BeZero(), "no pod of the gang is bound while its last one cannot fit")
		}, "3s", interval).Should(Succeed())
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobs.SchedulingGroupName(workloadOf(ctx, Default, job).Name)},
			&schedulingv1beta1.PodGroup{})).To(Satisfy(apierrors.IsNotFound), "berth makes no group of its own, which no pod would join")

		By("freeing the port: the whole gang binds and runs, and the Job's gang no longer waits for a whole gang")
		Expect(env.Client.Delete(ctx, taker, client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(complete(ctx, job), timeout, interval).Should(Succeed())
		Eventually(func() int32 { return gangMinCount(ctx, job) }, timeout, interval).Should(BeEquivalentTo(1))
	})

	It("hands a pod group's gated pods to kube-scheduler as one gang, and no longer waits for a whole gang once it is placed", func(ctx SpecContext) {
		members := groupOf(ns, "ranks")
		for _, p := range members {
			Expect(env.Client.Create(ctx, p)).To(Succeed())
		}
		group := jobs.SchedulingGroupName("podgroup", "ranks")
		Eventually(func(g Gomega) {
			for _, m := range members {
				p := &corev1.Pod{}
				g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(m), p)).To(Succeed())
				g.Expect(p.Spec.SchedulingGroup).NotTo(BeNil(), "named at creation")
				g.Expect(p.Spec.SchedulingGroup.PodGroupName).To(HaveValue(Equal(group)))
				g.Expect(p.Spec.NodeName).NotTo(BeEmpty(), jobsuite.UnboundReason(p))
			}
			pg := getPodGroup(ctx, g, ns, group)
			g.Expect(meta.IsStatusConditionTrue(pg.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled)).To(BeTrue())
			g.Expect(pg.Spec.SchedulingPolicy.Gang).To(HaveField("MinCount", BeEquivalentTo(1)), "placed: a replacement need not wait for a whole gang")
		}, timeout, interval).Should(Succeed())

		By("deleting the group: its Workload goes, and the PodGroup with it")
		Expect(env.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.MatchingLabels{berthv1.PodGroupLabel: "ranks"},
			client.GracePeriodSeconds(0))).To(Succeed())
		expectPodGroupGone(ctx, ns, group)
	})
})
