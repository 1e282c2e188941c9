package provisioning_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/framework"
)

var apiextensionsCRD = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

const (
	// caseLabel is on every flavor, pool template and pod of one spec, so
	// specs never share capacity.
	caseLabel = "it.berth.dev/case"
	// rackLabel is the topology level of the suite's flavors.
	rackLabel = "it.berth.dev/rack"
	// pokeAnnotation is written to a Workload to make berth reconcile it
	// after a fake clock moved (a real clock fires the requeue itself).
	pokeAnnotation = "it.berth.dev/poke"
)

var gpu = builders.GPU

// gpus is n GPUs plus some cpu and memory per GPU.
func gpus(n int64) corev1.ResourceList {
	return corev1.ResourceList{
		gpu:                   *resource.NewQuantity(n, resource.DecimalSI),
		corev1.ResourceCPU:    *resource.NewQuantity(8*n, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(64<<30*n, resource.BinarySI),
	}
}

// testCase is one spec's flavor and capacity.
type testCase struct {
	id     string
	ns     string
	flavor *berthv1.ResourceFlavor
	// queue is a LocalQueue of a held ClusterQueue (cq): the engine never
	// admits its workloads, the spec plays the scheduler.
	queue, cq string
}

// newCase creates a namespace and a flavor with a provisioning policy,
// tainted nodes and a rack topology level.
func newCase(ctx context.Context, pol berthv1.ProvisioningPolicy) *testCase {
	tc := &testCase{id: "c" + rand.String(6), ns: newNamespace(ctx)}
	tc.flavor = &berthv1.ResourceFlavor{
		ObjectMeta: metav1.ObjectMeta{Name: "h200-" + tc.id},
		Spec: berthv1.ResourceFlavorSpec{
			NodeLabels:     map[string]string{caseLabel: tc.id},
			Tolerations:    []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			TopologyLevels: []string{rackLabel},
			Provisioning:   &pol,
		},
	}
	Expect(env.Client.Create(ctx, tc.flavor)).To(Succeed())
	tc.cq, tc.queue = "cq-"+tc.id, "lq"
	cq := builders.ClusterQueue(tc.cq).Quota(tc.flavor.Name, gpu, "64", "").Obj()
	cq.Spec.StopPolicy = berthv1.StopPolicyHold
	Expect(env.Client.Create(ctx, cq)).To(Succeed())
	Expect(env.Client.Create(ctx, builders.LocalQueue(tc.ns, tc.queue, tc.cq))).To(Succeed())
	return tc
}

// pool creates a CapacityPool of the case in rack, whose nodes have 8
// GPUs.
func (tc *testCase) pool(ctx context.Context, rack string, maxNodes int32, annotations map[string]string) {
	cp := &berthv1.CapacityPool{
		ObjectMeta: metav1.ObjectMeta{Name: tc.id + "-" + rack, Annotations: annotations},
		Spec: berthv1.CapacityPoolSpec{
			Flavor: tc.flavor.Name,
			NodeTemplate: berthv1.NodeTemplate{
				Labels:      map[string]string{caseLabel: tc.id, rackLabel: rack},
				Allocatable: gpus(8),
				Taints:      []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}},
			},
			MinNodes: 1,
			MaxNodes: maxNodes,
		},
	}
	Expect(env.Client.Create(ctx, cp)).To(Succeed())
}

// job creates a Job of two pods of 8 GPUs each in the case's queue and
// returns it and its Workload.
func (tc *testCase) job(ctx context.Context) (*batchv1.Job, *berthv1.Workload) {
	job := builders.Job(tc.ns, "train", tc.queue).Pods(2).Request(gpu, "8").Obj()
	Expect(env.Client.Create(ctx, job)).To(Succeed())
	return job, onlyWorkload(ctx, tc.ns)
}

// onlyWorkload waits until the namespace holds exactly one Workload and
// returns it.
func onlyWorkload(ctx context.Context, ns string) *berthv1.Workload {
	wl := &berthv1.Workload{}
	Eventually(func(g Gomega) {
		wls := &berthv1.WorkloadList{}
		g.Expect(env.Client.List(ctx, wls, client.InNamespace(ns))).To(Succeed())
		g.Expect(wls.Items).To(HaveLen(1))
		*wl = wls.Items[0]
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	return wl
}

// rack is the topology assignment of one rack of the case's flavor.
func (tc *testCase) rack(name string) *berthv1.TopologyAssignment {
	return &berthv1.TopologyAssignment{Flavor: tc.flavor.Name, Levels: []string{rackLabel}, Values: []string{name}}
}

// reserve writes what the scheduler writes when the engine admits a
// workload whose capacity must be booked by a scale-up, in one status
// patch: the lifecycle's Reserve transition, for the next attempt.
func (tc *testCase) reserve(ctx context.Context, wl *berthv1.Workload, topology *berthv1.TopologyAssignment) *berthv1.ProvisioningStatus {
	return tc.reserveClass(ctx, wl, topology, scaleUp)
}

// reserveClass is reserve with a ProvisioningRequest class.
func (tc *testCase) reserveClass(ctx context.Context, wl *berthv1.Workload, topology *berthv1.TopologyAssignment, class string) *berthv1.ProvisioningStatus {
	updateStatus(ctx, wl, func(w *berthv1.Workload) {
		a := &berthv1.Admission{ClusterQueue: tc.cq, Topology: topology.DeepCopy(), Provisioning: &berthv1.AdmissionProvisioning{ClassName: berthv1.ProvisioningClass(class)}}
		for _, ps := range w.Spec.PodSets {
			a.PodSetAssignments = append(a.PodSetAssignments, berthv1.PodSetAssignment{Name: ps.Name, Count: ps.Count, Flavors: map[corev1.ResourceName]string{gpu: tc.flavor.Name}})
		}
		attempt := int32(1)
		if prev := w.Status.Provisioning; prev != nil {
			attempt = prev.Attempt + 1
		}
		Expect(lifecycle.Apply(w, lifecycle.Reserve{Admission: a, Generation: w.Generation, Attempt: attempt, Flavor: tc.flavor.Name,
			MaxAttempts: tc.flavor.Spec.Provisioning.MaxAttempts, Message: "reserved by the spec"}, metav1.NewTime(berthClock.Now()))).To(Succeed())
	})
	return wl.Status.Provisioning.DeepCopy()
}

// updateStatus changes a workload's status on a fresh read, retrying on
// conflicts with berth's own writes.
func updateStatus(ctx context.Context, wl *berthv1.Workload, mutate func(*berthv1.Workload)) {
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(wl), wl); err != nil {
			return err
		}
		mutate(wl)
		return env.Client.Status().Update(ctx, wl)
	})).To(Succeed())
}

// poke makes berth reconcile the workload now.
func poke(ctx context.Context, wl *berthv1.Workload) {
	patch := client.RawPatch("application/merge-patch+json",
		[]byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, pokeAnnotation, time.Now().Format(time.RFC3339Nano))))
	Expect(env.Client.Patch(ctx, wl.DeepCopy(), patch)).To(Succeed())
}

// workload reads the workload.
func workload(ctx context.Context, g Gomega, wl *berthv1.Workload) *berthv1.Workload {
	got := &berthv1.Workload{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(wl), got)).To(Succeed())
	return got
}

// condition is the workload's condition of typ (never nil).
func condition(wl *berthv1.Workload, typ string) metav1.Condition {
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{Type: typ}
}

// request waits for the ProvisioningRequest and returns it.
func request(ctx context.Context, ns, name string) *autoscalingv1.ProvisioningRequest {
	pr := &autoscalingv1.ProvisioningRequest{}
	Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pr)
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	return pr
}

// expectGone waits until obj no longer exists.
func expectGone(ctx context.Context, obj client.Object) {
	Eventually(func() bool {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		return err != nil && client.IgnoreNotFound(err) == nil
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "%T %s still exists", obj, obj.GetName())
}

// expectJob waits until the Job's state matches check.
func expectJob(ctx context.Context, job *batchv1.Job, check func(g Gomega, j *batchv1.Job)) {
	Eventually(func(g Gomega) {
		got := &batchv1.Job{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(job), got)).To(Succeed())
		check(g, got)
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
}

// gangPod creates a pod of the workload's gang that consumes request, as
// berth starts it (labelled with the Workload's UID and its pod set), bound
// to node ("": not bound) and Ready or not.
func gangPod(ctx context.Context, wl *berthv1.Workload, request, node string, ready bool) {
	// Controlled by the Workload's Job, as the Job controller would
	// create it: berth's pod webhook lets only a pod of the gang carry its
	// Workload's UID.
	job := metav1.GetControllerOf(wl)
	Expect(job).NotTo(BeNil(), "the workload has a job")
	// Where the Job's template, which berth resumed it with, says: berth
	// refuses a pod of the gang outside its admission's flavor and domain.
	started := &batchv1.Job{}
	Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: wl.Namespace, Name: job.Name}, started)).To(Succeed())
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: wl.Namespace, GenerateName: "train-",
			OwnerReferences: []metav1.OwnerReference{*job},
			Labels: map[string]string{berthv1.WorkloadLabel: string(wl.UID),
				berthv1.PodSetLabel: wl.Status.Admission.PodSetAssignments[0].Name},
			Annotations: map[string]string{
				autoscalingv1.ProvisioningRequestPodAnnotationKey: request,
				autoscalingv1.ProvisioningClassPodAnnotationKey:   autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp,
			}},
		Spec: corev1.PodSpec{NodeSelector: started.Spec.Template.Spec.NodeSelector,
			Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/train:latest"}}},
	}
	Expect(env.Client.Create(ctx, p)).To(Succeed())
	if node != "" {
		Expect(framework.Bind(ctx, env.Client, p, node)).To(Succeed())
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Phase = corev1.PodPending
	if node != "" {
		p.Status.Phase = corev1.PodRunning
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
	Expect(env.Client.Status().Update(ctx, p)).To(Succeed())
}

// step moves berth's clock on and makes berth look at the workload: a fake
// clock fires no requeue by itself.
func step(ctx context.Context, wl *berthv1.Workload, d time.Duration) {
	berthClock.Step(d)
	poke(ctx, wl)
}

// eventReasons lists the reasons of the events about the workload.
func eventReasons(ctx context.Context, g Gomega, ns, name string) []string {
	evs := &corev1.EventList{}
	g.Expect(env.Client.List(ctx, evs, client.InNamespace(ns))).To(Succeed())
	var reasons []string
	for _, e := range evs.Items {
		if e.InvolvedObject.Name == name {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}

// warnings lists the Warning events about the object.
func warnings(ctx context.Context, g Gomega, ns, name string) []corev1.Event {
	evs := &corev1.EventList{}
	g.Expect(env.Client.List(ctx, evs, client.InNamespace(ns))).To(Succeed())
	var out []corev1.Event
	for _, e := range evs.Items {
		if e.InvolvedObject.Name == name && e.Type == corev1.EventTypeWarning {
			out = append(out, e)
		}
	}
	return out
}
