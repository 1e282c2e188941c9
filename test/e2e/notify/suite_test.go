// Package notify_test runs berth's failure notifications on the full plane
// (apiserver, etcd, controller-manager, scheduler, kwok GPU nodes): Jobs
// really get pods, bound by kube-scheduler, whose containers kwok's fault
// Stages make restart, get OOM-killed or crash-loop; HTTPS servers stand in
// for Slack and record what berth posts.
package notify_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/notify"
	"github.com/berth-dev/berth/controllers/setup"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/framework"
)

const (
	timeout  = 2 * time.Minute
	interval = 200 * time.Millisecond
	// productLabel selects the H200 nodes; each spec's flavor uses it.
	productLabel = "nvidia.com/gpu.product"
	product      = "NVIDIA-H200"
)

var (
	env *framework.Env
	// slack stands in for Slack's incoming webhooks.
	slack = framework.NewSinkStandIn()
)

func TestNotify(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "notifications e2e suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	env, err = framework.StartGPUPlane(ctx, framework.GPUPlane{
		Nodes: 2, NodeLabels: map[string]string{productLabel: product},
		Berth: framework.BerthOptions{Setup: setup.Options{Notifications: notify.Options{
			Enabled: true, Namespace: "default", HTTPClient: slack.Client(), Egress: slack.Egress(),
			Dispatch: notify.DispatchOptions{QueueSize: 8, Attempts: 2, Backoff: 100 * time.Millisecond,
				MaxBackoff: time.Second, Timeout: 2 * time.Second},
		}}},
	})
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(10*time.Minute))

var _ = AfterSuite(func() {
	slack.Close()
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// team creates a namespace with a flavor for the H200 nodes, a
// ClusterQueue of 16 GPUs and the LocalQueue "team", and a
// NotificationPolicy posting to the stand-in under path /<namespace>
// with the given rate; it returns the namespace. Its jobs and pods are
// deleted when the spec ends.
func team(ctx context.Context, perHour int32) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "notify-"}}
	Expect(env.Client.Create(ctx, ns)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		Expect(env.CleanNamespace(ctx, ns.Name, framework.CleanOptions{Timeout: timeout})).To(Succeed())
	}, NodeTimeout(2*timeout))
	Expect(env.Client.Create(ctx, builders.Flavor(ns.Name, map[string]string{productLabel: product}))).To(Succeed())
	Expect(env.Client.Create(ctx, builders.ClusterQueue(ns.Name).Quota(ns.Name, builders.GPU, "16", "").Obj())).To(Succeed())
	Expect(env.Client.Create(ctx, builders.LocalQueue(ns.Name, "team", ns.Name))).To(Succeed())
	Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "slack"},
		StringData: map[string]string{"url": slack.URL("/" + ns.Name)}})).To(Succeed())
	np := &berthv1.NotificationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "chat"},
		Spec: berthv1.NotificationPolicySpec{NotificationSettings: berthv1.NotificationSettings{
			DedupWindowSeconds: 300, MaxReportsPerHour: perHour,
			Sink: berthv1.NotificationSink{Type: berthv1.SinkSlack, URLSecretRef: &berthv1.SecretKeyRef{Name: "slack"}},
		}}}
	Expect(env.Client.Create(ctx, np)).To(Succeed())
	return ns.Name
}

// faultyJob submits a Job of pods 2-GPU pods with the fault annotations,
// running for an hour otherwise.
func faultyJob(ctx context.Context, ns, name string, pods int32, fault map[string]string) {
	annotations := controlplane.RunFor(time.Hour)
	for k, v := range fault {
		annotations[k] = v
	}
	job := builders.Job(ns, name, "team").Pods(pods).Request(builders.GPU, "2").PodAnnotations(annotations).Obj()
	Expect(env.Client.Create(ctx, job)).To(Succeed())
}

// complete reports whether the Job completed.
func complete(ctx context.Context, job *batchv1.Job) func(Gomega) bool {
	return func(g Gomega) bool {
		fresh := &batchv1.Job{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(job), fresh)).To(Succeed())
		for _, c := range fresh.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	}
}
