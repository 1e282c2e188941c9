// Package notify_test runs berth's failure notifications against a real
// kube-apiserver and etcd. There is no kubelet: the specs create a gang's
// pods as the Job controller would and write their status as a kubelet
// would (a restart, an OOM kill, a crash loop), and HTTPS servers standing
// in for Slack and a webhook record what berth posts.
package notify_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/notify"
	"github.com/berth-dev/berth/controllers/setup"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/framework"
)

const (
	timeout  = 60 * time.Second
	interval = 100 * time.Millisecond
	// berthNamespace is where ClusterNotificationPolicies' Secrets are.
	berthNamespace = "berth-system"
)

var (
	env *framework.Env
	// sinks stands in for Slack and webhooks; each spec's Secret names its
	// own path.
	sinks = framework.NewSinkStandIn()
)

func TestNotify(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "notifications integration suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	env, err = framework.StartWithBerth(ctx, framework.StartOptions{}, framework.BerthOptions{Setup: setup.Options{
		// The gangs whose failures are reported are batch Jobs.
		Parts: []setup.Part{setup.Notify, setup.BatchJob},
		Notifications: notify.Options{Enabled: true, Namespace: berthNamespace, HTTPClient: sinks.Client(), Egress: sinks.Egress(),
			// Fast retries, so a failing sink's give-up is seen in a spec.
			Dispatch: notify.DispatchOptions{QueueSize: 16, Attempts: 3, Backoff: 100 * time.Millisecond,
				MaxBackoff: 500 * time.Millisecond, Timeout: 2 * time.Second}},
	}})
	Expect(err).NotTo(HaveOccurred())
	Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: berthNamespace}})).To(Succeed())
}, NodeTimeout(5*time.Minute))

var _ = AfterSuite(func() {
	sinks.Close()
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// team creates a namespace with a flavor, a ClusterQueue of 64 GPUs that
// may preempt lower priorities, and the LocalQueue "team".
func team(ctx context.Context) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "notify-"}}
	Expect(env.Client.Create(ctx, ns)).To(Succeed())
	Expect(env.Client.Create(ctx, builders.Flavor(ns.Name, nil))).To(Succeed())
	cq := builders.ClusterQueue(ns.Name).Quota(ns.Name, builders.GPU, "8", "").Obj()
	cq.Spec.Preemption.WithinClusterQueue = berthv1.PreemptLowerPriority
	Expect(env.Client.Create(ctx, cq)).To(Succeed())
	// Its jobs may take the class the specs name after the namespace.
	Expect(env.Client.Create(ctx, builders.LocalQueue(ns.Name, "team", ns.Name, ns.Name+"-high"))).To(Succeed())
	return ns.Name
}

// slackPolicy creates a Secret with the stand-in's URL for path and a
// NotificationPolicy posting to it as Slack, with the dedup window, and
// waits for it to be Ready.
func slackPolicy(ctx context.Context, ns, path string, window int32, kinds ...berthv1.FailureKind) {
	Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slack"},
		StringData: map[string]string{"url": sinks.URL(path)}})).To(Succeed())
	np := &berthv1.NotificationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chat"},
		Spec: berthv1.NotificationPolicySpec{NotificationSettings: berthv1.NotificationSettings{
			Kinds: kinds, DedupWindowSeconds: window, MaxReportsPerHour: 60, UnschedulableAfterSeconds: 30,
			Sink: berthv1.NotificationSink{Type: berthv1.SinkSlack, URLSecretRef: &berthv1.SecretKeyRef{Name: "slack"}},
		}}}
	Expect(env.Client.Create(ctx, np)).To(Succeed())
	Eventually(readyStatus(ctx, np), timeout, interval).Should(Equal(metav1.ConditionTrue))
}

// readyStatus reads a policy's Ready condition status.
func readyStatus(ctx context.Context, np *berthv1.NotificationPolicy) func(Gomega) metav1.ConditionStatus {
	return func(g Gomega) metav1.ConditionStatus {
		fresh := &berthv1.NotificationPolicy{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(np), fresh)).To(Succeed())
		for _, c := range fresh.Status.Conditions {
			if c.Type == berthv1.ConditionReady {
				return c.Status
			}
		}
		return metav1.ConditionUnknown
	}
}

// runningGang submits a Job of pods pods of 2 GPUs (no priority class),
// waits for its
// admission, and creates its pods, bound and running, as the Job
// controller and a kubelet would.
func runningGang(ctx context.Context, ns, name string, pods int32) []*corev1.Pod {
	job := builders.Job(ns, name, "team").Pods(pods).Request(builders.GPU, "2").Obj()
	Expect(env.Client.Create(ctx, job)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
		g.Expect(job.Spec.Suspend).To(HaveValue(BeFalse()))
	}, timeout, interval).Should(Succeed())
	var out []*corev1.Pod
	for i := range pods {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", name, i), Labels: job.Spec.Template.Labels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID,
					Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
			Spec: *job.Spec.Template.Spec.DeepCopy(),
		}
		Expect(env.Client.Create(ctx, pod)).To(Succeed())
		Expect(framework.Bind(ctx, env.Client, pod, fmt.Sprintf("gpu-node-%d", i))).To(Succeed())
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: pod.Spec.Containers[0].Name, Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
		Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())
		out = append(out, pod)
	}
	return out
}

// runningGangAsync submits a Job of 4 pods of 2 GPUs of the priority
// class without waiting for it.
func runningGangAsync(ctx context.Context, ns, name, priority string) *batchv1.Job {
	job := builders.Job(ns, name, "team").Pods(4).Request(builders.GPU, "2").Obj()
	job.Spec.Template.Spec.PriorityClassName = priority
	Expect(env.Client.Create(ctx, job)).To(Succeed())
	return job
}

// oomKill writes, as a kubelet would, that the pod's container was
// OOM-killed and restarted.
func oomKill(ctx context.Context, pod *corev1.Pod) {
	terminate(ctx, pod, corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}, nil)
}

// terminate records a restart of the pod's container after the last
// termination, waiting in waiting when set (a crash loop).
func terminate(ctx context.Context, pod *corev1.Pod, last corev1.ContainerStateTerminated, waiting *corev1.ContainerStateWaiting) {
	Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		cs := &pod.Status.ContainerStatuses[0]
		cs.RestartCount++
		cs.LastTerminationState = corev1.ContainerState{Terminated: &last}
		cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		if waiting != nil {
			cs.State = corev1.ContainerState{Waiting: waiting}
		}
		g.Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}
