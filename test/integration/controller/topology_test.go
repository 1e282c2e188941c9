package controller_test

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/controlplane"
)

const (
	zoneLabel = "topology.kubernetes.io/zone"
	rackLabel = "example.com/rack"
)

// readyNode creates a node with gpus GPUs and the labels, and makes it what a
// kubelet would: Ready and without the not-ready taint the API server adds.
func readyNode(ctx context.Context, name string, gpus int, labels map[string]string) {
	node := controlplane.GPUNode(name, gpus, labels)
	Expect(env.Client.Create(ctx, node)).To(Succeed())
	DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, node)) })
	Eventually(func() error {
		fresh := &corev1.Node{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, fresh); err != nil {
			return err
		}
		fresh.Spec.Taints = nil
		if err := env.Client.Update(ctx, fresh); err != nil {
			return err
		}
		fresh.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		return env.Client.Status().Update(ctx, fresh)
	}, timeout, interval).Should(Succeed())
}

// rackJob is a Job of two 8-GPU pods that must run in one rack.
func rackJob(ns, name string, annotations map[string]string) *batchv1.Job {
	job := builders.Job(ns, name, "team").Pods(2).Request(builders.GPU, "8").Obj()
	job.Annotations = annotations
	return job
}

// pendingReason returns the reason of the workload's QuotaReserved=False
// condition ("" while it has none).
func pendingReason(ctx context.Context, job *batchv1.Job) func(Gomega) string {
	return func(g Gomega) string {
		wl, err := workloadOf(ctx, job)
		g.Expect(err).NotTo(HaveOccurred())
		c := meta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionQuotaReserved)
		if c == nil || c.Status != metav1.ConditionFalse {
			return ""
		}
		return c.Reason + ": " + c.Message
	}
}

// templateSelector returns the Job's pod template node selector once it
// runs.
func templateSelector(ctx context.Context, job *batchv1.Job) func(Gomega) map[string]string {
	return func(g Gomega) map[string]string {
		fresh := &batchv1.Job{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(job), fresh)).To(Succeed())
		g.Expect(fresh.Spec.Suspend).To(HaveValue(BeFalse()))
		return fresh.Spec.Template.Spec.NodeSelector
	}
}

var _ = Describe("topology", func() {
	var ns string

	BeforeEach(func(ctx SpecContext) {
		ns = newNamespace(ctx)
		rf := builders.Flavor(ns, map[string]string{"example.com/pool": ns})
		rf.Spec.TopologyLevels = []string{zoneLabel, rackLabel, corev1.LabelHostname}
		Expect(env.Client.Create(ctx, rf)).To(Succeed())
		cq := builders.ClusterQueue(ns).Quota(ns, builders.GPU, "64", "").Obj()
		Expect(env.Client.Create(ctx, cq)).To(Succeed())
		Expect(env.Client.Create(ctx, builders.LocalQueue(ns, "team", cq.Name))).To(Succeed())
		for _, n := range []struct{ name, rack string }{{"n1", "r1"}, {"n2", "r1"}, {"n3", "r2"}, {"n4", "r2"}} {
			readyNode(ctx, ns+"-"+n.name, 8, map[string]string{"example.com/pool": ns, zoneLabel: "a", rackLabel: ns + "-" + n.rack})
		}
	})

	It("admits a rack-bound gang only into a rack whose free capacity holds all of it, and pins it there", func(ctx SpecContext) {
		By("binding an unmanaged 8-GPU pod to a node of rack r2")
		squatter := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "squatter"},
			Spec: corev1.PodSpec{NodeName: ns + "-n4", Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/x",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{builders.GPU: resource.MustParse("8")},
					Limits:   corev1.ResourceList{builders.GPU: resource.MustParse("8")},
				}}}},
		}
		Expect(env.Client.Create(ctx, squatter)).To(Succeed())

		By("placing the first gang in r1, the only rack with 16 GPUs free")
		a := rackJob(ns, "a", map[string]string{berthv1.TopologyRequiredAnnotation: rackLabel})
		Expect(env.Client.Create(ctx, a)).To(Succeed())
		Eventually(templateSelector(ctx, a), timeout, interval).Should(And(
			HaveKeyWithValue(rackLabel, ns+"-r1"), HaveKeyWithValue(zoneLabel, "a"), HaveKeyWithValue("example.com/pool", ns)))
		fresh := &batchv1.Job{}
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(a), fresh)).To(Succeed())
		wl, err := workloadOf(ctx, a)
		Expect(err).NotTo(HaveOccurred())
		Expect(fresh.Spec.Template.Labels).To(And(HaveKeyWithValue(berthv1.PlacementLabel, string(wl.UID)), HaveKeyWithValue(berthv1.WorkloadLabel, string(wl.UID))))
		Expect(wl.Status.Admission.Topology).NotTo(BeNil())
		Expect(wl.Status.Admission.Topology.Values).To(Equal([]string{"a", ns + "-r1"}))

		By("holding the second gang: quota fits, but no rack has 16 GPUs free")
		b := rackJob(ns, "b", map[string]string{berthv1.TopologyRequiredAnnotation: rackLabel})
		Expect(env.Client.Create(ctx, b)).To(Succeed())
		Eventually(pendingReason(ctx, b), timeout, interval).Should(And(
			HavePrefix(string(admission.TopologyUnavailable)), ContainSubstring("most free: 8 nvidia.com/gpu")))
		Consistently(suspended(ctx, b), "1s", interval).Should(BeTrue())

		By("admitting it into r2 once the unmanaged pod is gone")
		Expect(env.Client.Delete(ctx, squatter, client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(templateSelector(ctx, b), timeout, interval).Should(HaveKeyWithValue(rackLabel, ns+"-r2"))
	})

	It("reports a topology level the flavor does not have, and a job that asks for two", func(ctx SpecContext) {
		bad := rackJob(ns, "bad-level", map[string]string{berthv1.TopologyRequiredAnnotation: "example.com/block"})
		Expect(env.Client.Create(ctx, bad)).To(Succeed())
		Eventually(pendingReason(ctx, bad), timeout, interval).Should(And(
			HavePrefix(string(admission.UnknownTopologyLevel)), ContainSubstring(`"example.com/block"`), ContainSubstring(rackLabel)))

		both := rackJob(ns, "both", map[string]string{berthv1.TopologyRequiredAnnotation: rackLabel, berthv1.TopologyPreferredAnnotation: rackLabel})
		Expect(env.Client.Create(ctx, both)).To(Succeed())
		Eventually(eventReasons(ctx, ns, both.Name), timeout, interval).Should(ContainElement(ContainSubstring("set only one of")))
		Consistently(suspended(ctx, both), "1s", interval).Should(BeTrue())
	})
})

var _ = Describe("capacity bookings", func() {
	It("reserves quota and waits for capacity booked in the rack with the fewest new nodes, then retries elsewhere after a failure", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		rf := builders.Flavor(ns, map[string]string{"example.com/pool": ns})
		rf.Spec.TopologyLevels = []string{zoneLabel, rackLabel}
		rf.Spec.Provisioning = &berthv1.ProvisioningPolicy{Mode: berthv1.ProvisioningIfNeeded}
		Expect(env.Client.Create(ctx, rf)).To(Succeed())
		cq := builders.ClusterQueue(ns).Quota(ns, builders.GPU, "64", "").Obj()
		Expect(env.Client.Create(ctx, cq)).To(Succeed())
		Expect(env.Client.Create(ctx, builders.LocalQueue(ns, "team", cq.Name))).To(Succeed())
		By("one 8-GPU node in rack r1 and a pool in each rack")
		readyNode(ctx, ns+"-n1", 8, map[string]string{"example.com/pool": ns, zoneLabel: "a", rackLabel: ns + "-r1"})
		for _, rack := range []string{"r1", "r2"} {
			pool := &berthv1.CapacityPool{
				ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + rack},
				Spec: berthv1.CapacityPoolSpec{Flavor: ns, MaxNodes: 4, NodeTemplate: berthv1.NodeTemplate{
					Labels:      map[string]string{"example.com/pool": ns, zoneLabel: "a", rackLabel: ns + "-" + rack},
					Allocatable: corev1.ResourceList{builders.GPU: resource.MustParse("8")},
				}},
			}
			Expect(env.Client.Create(ctx, pool)).To(Succeed())
			DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, pool)) })
		}

		job := rackJob(ns, "train", map[string]string{berthv1.TopologyRequiredAnnotation: rackLabel})
		Expect(env.Client.Create(ctx, job)).To(Succeed())
		var wl *berthv1.Workload
		Eventually(func(g Gomega) {
			var err error
			wl, err = workloadOf(ctx, job)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(wl.Status.Admission.Topology.Values).To(Equal([]string{"a", ns + "-r1"}), "r1 needs one new node, r2 two")
			g.Expect(wl.Status.Admission.Provisioning).To(Equal(&berthv1.AdmissionProvisioning{
				ClassName: "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
				NewNodes:  []berthv1.PoolNodes{{Pool: ns + "-r1", Nodes: 1}},
			}))
			g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, berthv1.ConditionQuotaReserved)).To(BeTrue())
			admitted := meta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionAdmitted)
			g.Expect(admitted).NotTo(BeNil())
			g.Expect(admitted.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(admitted.Reason).To(Equal(string(berthv1.ReasonWaitingForCapacity)))
			g.Expect(wl.Status.Provisioning).NotTo(BeNil())
			g.Expect(wl.Status.Provisioning.Attempt).To(Equal(int32(1)))
			g.Expect(wl.Status.Provisioning.RequestName).To(Equal(wl.Name + "-1"))
			g.Expect(wl.Status.Provisioning.State).To(Equal(berthv1.ProvisioningPending))
		}, timeout, interval).Should(Succeed())
		Consistently(suspended(ctx, job), "1s", interval).Should(BeTrue(), "the job waits for its capacity")

		By("failing the booking in r1: after the retry time the next attempt goes to r2")
		retry := metav1.NewTime(time.Now().Add(2 * time.Second))
		Eventually(func() error {
			fresh := &berthv1.Workload{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(wl), fresh); err != nil {
				return err
			}
			// What the scheduler writes when the engine fails the booking.
			Expect(lifecycle.Apply(fresh, lifecycle.FailBooking{Failure: lifecycle.BookingFailure{
				Attempt: 1, State: berthv1.ProvisioningFailed, Failures: 1, MaxAttempts: 3, RetryAfter: &retry,
				FailedDomains: []berthv1.TopologyAssignment{*fresh.Status.Provisioning.Topology}, Detail: "failed: stockout in r1",
			}}, metav1.Now())).To(Succeed())
			return env.Client.Status().Update(ctx, fresh)
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			fresh, err := workloadOf(ctx, job)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(fresh.Status.Admission).NotTo(BeNil())
			g.Expect(fresh.Status.Admission.Topology.Values).To(Equal([]string{"a", ns + "-r2"}))
			g.Expect(fresh.Status.Provisioning.Attempt).To(Equal(int32(2)))
			g.Expect(fresh.Status.Provisioning.RequestName).To(Equal(wl.Name + "-2"))
			g.Expect(fresh.Status.Provisioning.FailedDomains).To(HaveLen(1))
			g.Expect(fresh.Status.Admission.Provisioning.NewNodes).To(Equal([]berthv1.PoolNodes{{Pool: ns + "-r2", Nodes: 2}}))
			g.Expect(meta.FindStatusCondition(fresh.Status.Conditions, berthv1.ConditionQuotaReserved).LastTransitionTime.Time).
				To(BeTemporally(">=", retry.Time.Truncate(time.Second)), "not re-admitted before the retry time")
		}, timeout, interval).Should(Succeed())

		By("counting the capacity left idle while the gang waits for its booking")
		idle := env.Berth().Metrics.IdleWhileWaitingTotal.WithLabelValues(ns, "nvidia.com/gpu")
		Eventually(func() float64 { return testutil.ToFloat64(idle) }, timeout, interval).Should(BeNumerically(">", 0),
			"n1's 8 GPUs stay free while the gang waits for r2's new nodes")
		before := histogramCount(env.Berth().Metrics.AdmissionWait.WithLabelValues(ns, "provisioned"))

		By("once the booking is provisioned, the job starts pinned to r2")
		Eventually(func() error {
			fresh := &berthv1.Workload{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(wl), fresh); err != nil {
				return err
			}
			Expect(lifecycle.Apply(fresh, lifecycle.Provision{Attempt: 2, Detail: "provisioned"}, metav1.Now())).To(Succeed())
			return env.Client.Status().Update(ctx, fresh)
		}, timeout, interval).Should(Succeed())
		Eventually(templateSelector(ctx, job), timeout, interval).Should(HaveKeyWithValue(rackLabel, ns+"-r2"))
		Eventually(func() uint64 {
			return histogramCount(env.Berth().Metrics.AdmissionWait.WithLabelValues(ns, "provisioned"))
		}, timeout, interval).Should(Equal(before+1), "the wait is recorded on the provisioned path")
	})
})

// histogramCount is the number of observations of a histogram.
func histogramCount(o prometheus.Observer) uint64 {
	m := &dto.Metric{}
	Expect(o.(prometheus.Metric).Write(m)).To(Succeed())
	return m.GetHistogram().GetSampleCount()
}
