// Package faults_test runs two berth-controller processes with leader
// election on a full control plane (kube-apiserver, etcd,
// kube-controller-manager, kube-scheduler, kwok GPU nodes) and attacks the
// leader while a burst of Jobs drains: SIGKILL, SIGSTOP past its lease,
// restarts. The invariant oracle (test/oracle) checks that nothing is
// admitted twice, no pod runs outside quota and no job is lost; the API
// server's audit log checks that a leader that lost its lease wrote
// nothing after the next leader took it.
package faults_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/berth-dev/berth/test/berthproc"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/framework"
)

const (
	// namespace holds berth's lease.
	namespace = "berth-system"
	// nodes of gpusPerNode GPUs each; the ClusterQueue has quota for all.
	nodes       = 8
	gpusPerNode = 8
	// users are the replicas' API identities, so the audit log tells
	// their writes apart.
	replicas = 2
)

var (
	plane      *controlplane.Plane
	k8s        client.Client
	berthPath  string
	auditLog   string
	kubeconfig [replicas]string
)

// auditPolicy logs, once per request, every request of the replicas.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Metadata
  users: ["berth-0", "berth-1"]
- level: None
`

func TestFaults(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "faults suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	dir := GinkgoT().TempDir()
	berthPath = filepath.Join(dir, "berth-controller")
	Expect(berthproc.Build(ctx, "", berthPath)).To(Succeed())
	policy := filepath.Join(dir, "audit-policy.yaml")
	Expect(os.WriteFile(policy, []byte(auditPolicy), 0o600)).To(Succeed())
	auditLog = filepath.Join(dir, "audit.log")
	scheme, err := framework.NewScheme()
	Expect(err).NotTo(HaveOccurred())
	root := framework.RepoRoot()
	plane, err = controlplane.Start(ctx, controlplane.Options{
		Full:              true,
		Scheme:            scheme,
		CRDDirectoryPaths: []string{filepath.Join(root, "config", "crd", "bases")},
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			Paths: []string{filepath.Join(root, "config", "webhook", "manifests.yaml")},
		},
		ExtraArgs: map[controlplane.Component][]string{controlplane.KubeAPIServer: {
			"--audit-policy-file=" + policy, "--audit-log-path=" + auditLog, "--audit-log-format=json",
			"--audit-log-mode=batch", "--audit-log-batch-max-wait=1s",
		}},
	})
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(plane.Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(Succeed())
	for i := range replicas {
		u, err := plane.Env.AddUser(envtest.User{Name: fmt.Sprintf("berth-%d", i), Groups: []string{"system:masters"}}, plane.Config)
		Expect(err).NotTo(HaveOccurred())
		data, err := u.KubeConfig()
		Expect(err).NotTo(HaveOccurred())
		kubeconfig[i] = filepath.Join(dir, fmt.Sprintf("berth-%d.kubeconfig", i))
		Expect(os.WriteFile(kubeconfig[i], data, 0o600)).To(Succeed())
	}
	for i := range nodes {
		node := controlplane.GPUNode(fmt.Sprintf("gpu-%d", i), gpusPerNode, nil)
		Expect(k8s.Create(ctx, node)).To(Succeed())
		Expect(controlplane.WaitForNodeReady(ctx, k8s, node.Name)).To(Succeed())
	}
}, NodeTimeout(10*time.Minute))

var _ = AfterSuite(func() {
	if plane != nil {
		Expect(plane.Stop()).To(Succeed())
	}
})
