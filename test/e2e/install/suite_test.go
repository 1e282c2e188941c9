// Package install_test installs berth the way a platform team does — the
// release bundle applied server-side, and the Helm chart rendered by the
// Helm SDK — on a full control plane (kube-apiserver, etcd,
// kube-controller-manager, kube-scheduler, kwok), then runs berth-controller
// authenticated as the ServiceAccount the install created, so the
// generated RBAC is what admits the sample job.
package install_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/berth-dev/berth/test/berthproc"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/framework"
)

const (
	// version is what the suite's release is stamped with.
	version  = "v0.0.0-e2e"
	timeout  = 2 * time.Minute
	interval = 250 * time.Millisecond
)

var (
	plane     *controlplane.Plane
	k8s       client.Client
	dist      string
	berthPath string
)

func TestInstall(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "install suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	root := framework.RepoRoot()
	dist = GinkgoT().TempDir()
	// What a user runs to cut a release: images, bundle and chart.
	// Images and plugin for the host's platform only: test/release checks
	// both platforms' images and archives, and every further platform
	// costs minutes of compiling; the install pins the digest of whatever
	// index was built.
	host := runtime.GOOS + "/" + runtime.GOARCH
	release := exec.CommandContext(ctx, "make", "-C", root, "release", "VERSION="+version, "DIST="+dist,
		"IMAGE_PLATFORMS="+host, "PLUGIN_PLATFORMS="+host)
	release.Stdout, release.Stderr = GinkgoWriter, GinkgoWriter
	Expect(release.Run()).To(Succeed(), "make release")
	Expect(filepath.Join(dist, "install.yaml")).To(BeARegularFile())
	berthPath = filepath.Join(GinkgoT().TempDir(), "berth-controller")
	Expect(berthproc.Build(ctx, "", berthPath)).To(Succeed())

	scheme, err := framework.NewScheme()
	Expect(err).NotTo(HaveOccurred())
	Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	// No CRDs and no webhook configuration from the harness: the install
	// brings them.
	plane, err = controlplane.Start(ctx, controlplane.Options{Full: true, Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(plane.Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	for _, name := range []string{"h200-0", "h200-1"} {
		node := controlplane.GPUNode(name, 8, nil)
		Expect(k8s.Create(ctx, node)).To(Succeed())
		Expect(controlplane.WaitForNodeReady(ctx, k8s, node.Name)).To(Succeed())
	}
}, NodeTimeout(30*time.Minute))

var _ = AfterSuite(func() {
	if plane != nil {
		Expect(plane.Stop()).To(Succeed())
	}
})

// readFile is a release file's content.
func readFile(name string) []byte {
	data, err := os.ReadFile(filepath.Join(dist, name))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return data
}
