// Package certs_test runs two berth-controller processes against a real
// kube-apiserver and etcd, both serving the webhooks behind one address,
// and renews the webhook certificate under them while the API server calls
// the webhooks: no call may fail. It then breaks them — an expired
// serving certificate, a wiped CA bundle, both replicas down — and checks
// what the API server does with queued and other Jobs.
package certs_test

import (
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/berth-dev/berth/test/berthproc"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/framework"
)

var (
	plane     *controlplane.Plane
	k8s       client.Client
	berthPath string
)

func TestCerts(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "webhook certificate suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	berthPath = filepath.Join(GinkgoT().TempDir(), "berth-controller")
	Expect(berthproc.Build(ctx, "", berthPath)).To(Succeed())
	scheme, err := framework.NewScheme()
	Expect(err).NotTo(HaveOccurred())
	// No webhook configuration from envtest: the spec installs berth's,
	// pointed at the two processes.
	plane, err = controlplane.Start(ctx, controlplane.Options{
		Scheme:            scheme,
		CRDDirectoryPaths: []string{filepath.Join(framework.RepoRoot(), "config", "crd", "bases")},
	})
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(plane.Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(10*time.Minute))

var _ = AfterSuite(func() {
	if plane != nil {
		Expect(plane.Stop()).To(Succeed())
	}
})
