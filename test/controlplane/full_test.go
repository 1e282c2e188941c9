package controlplane_test

import (
	"context"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/test/controlplane"
)

// One Full plane serves every spec here: starting it is most of the cost.
var _ = Describe("A full plane", Ordered, func() {
	var (
		plane *controlplane.Plane
		k8s   client.WithWatch
		node  *corev1.Node
	)

	BeforeAll(func(ctx SpecContext) {
		start := time.Now()
		var err error
		plane, err = controlplane.Start(ctx, controlplane.Options{Full: true})
		Expect(err).NotTo(HaveOccurred())
		AddReportEntry("full plane start-up", time.Since(start).Round(time.Millisecond).String())
		dir := plane.Dir
		DeferCleanup(func() {
			Expect(plane.Stop()).To(Succeed())
			Expect(processesMentioning(dir)).To(BeEmpty())
		})
		k8s, err = client.NewWithWatch(plane.Config, client.Options{})
		Expect(err).NotTo(HaveOccurred())

		node = controlplane.GPUNode("h200-0", 8, map[string]string{"topology.kubernetes.io/zone": "zone-a"})
		Expect(k8s.Create(ctx, node)).To(Succeed())
		Expect(controlplane.WaitForNodeReady(ctx, k8s, node.Name)).To(Succeed())
	})

	It("removed its probe node before returning", func(ctx SpecContext) {
		var nodes corev1.NodeList
		Expect(k8s.List(ctx, &nodes)).To(Succeed())
		Expect(nodes.Items).To(HaveExactElements(HaveField("Name", node.Name)))
	})

	It("runs a Job that needs all eight GPUs to completion on the GPU node", func(ctx SpecContext) {
		ns := newNamespace(ctx, k8s)
		job := gpuJob(ns, 8, nil)
		Expect(k8s.Create(ctx, job)).To(Succeed())

		Eventually(ctx, jobCondition(k8s, job, batchv1.JobComplete)).Should(Equal(corev1.ConditionTrue))
		var pods corev1.PodList
		Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{batchv1.JobNameLabel: job.Name})).To(Succeed())
		Expect(pods.Items).To(HaveExactElements(And(
			HaveField("Spec.NodeName", node.Name),
			HaveField("Status.Phase", corev1.PodSucceeded),
		)))
	})

	It("keeps a RunFor pod Running for its run time before it succeeds", func(ctx SpecContext) {
		const runFor = 4 * time.Second
		ns := newNamespace(ctx, k8s)
		phases := watchPodPhases(ctx, k8s, ns)
		job := gpuJob(ns, 1, controlplane.RunFor(runFor))
		Expect(k8s.Create(ctx, job)).To(Succeed())

		Eventually(ctx, jobCondition(k8s, job, batchv1.JobComplete)).Should(Equal(corev1.ConditionTrue))
		Eventually(phases.seen).Should(ContainElement(corev1.PodSucceeded))
		Expect(phases.seen()).To(HaveExactElements(corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded))

		var pods corev1.PodList
		Expect(k8s.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
		Expect(pods.Items).To(HaveLen(1))
		pod := pods.Items[0]
		Expect(pod.Status.StartTime).NotTo(BeNil())
		Expect(pod.Status.ContainerStatuses).To(HaveLen(1))
		finished := pod.Status.ContainerStatuses[0].State.Terminated
		Expect(finished).NotTo(BeNil())
		// Status times have second precision, hence the one-second slack.
		Expect(finished.FinishedAt.Sub(pod.Status.StartTime.Time)).To(BeNumerically(">=", runFor-time.Second))
	})
})

// newNamespace creates a namespace for one spec.
func newNamespace(ctx context.Context, c client.Client) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "controlplane-"}}
	Expect(c.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// gpuJob is a one-pod Job requesting gpus nvidia.com/gpu, with the given pod
// annotations. Its image is never pulled: kwok only plays the kubelet.
func gpuJob(ns string, gpus int64, annotations map[string]string) *batchv1.Job {
	gpu := corev1.ResourceList{controlplane.GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI)}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "train"},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: annotations},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name:      "train",
						Image:     "registry.example/train:latest",
						Resources: corev1.ResourceRequirements{Requests: gpu, Limits: gpu},
					}},
				},
			},
		},
	}
}

// jobCondition polls the status of a Job condition ("" until it appears).
func jobCondition(c client.Client, job *batchv1.Job, t batchv1.JobConditionType) func(context.Context) (corev1.ConditionStatus, error) {
	return func(ctx context.Context) (corev1.ConditionStatus, error) {
		var got batchv1.Job
		if err := c.Get(ctx, client.ObjectKeyFromObject(job), &got); err != nil {
			return "", err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == t {
				return cond.Status, nil
			}
		}
		return "", nil
	}
}

// podPhases records the distinct phases the pods of a namespace go through,
// in the order a watch delivers them, so specs assert order, not timing.
type podPhases struct {
	mu     sync.Mutex
	phases []corev1.PodPhase
}

func (p *podPhases) seen() []corev1.PodPhase {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]corev1.PodPhase(nil), p.phases...)
}

// watchPodPhases starts recording pod phases in ns until the spec ends.
func watchPodPhases(ctx context.Context, c client.WithWatch, ns string) *podPhases {
	w, err := c.Watch(ctx, &corev1.PodList{}, client.InNamespace(ns))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(w.Stop)
	p := &podPhases{}
	go func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			p.mu.Lock()
			if n := len(p.phases); n == 0 || p.phases[n-1] != pod.Status.Phase {
				p.phases = append(p.phases, pod.Status.Phase)
			}
			p.mu.Unlock()
		}
	}()
	return p
}
