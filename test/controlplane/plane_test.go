package controlplane_test

import (
	"context"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/test/controlplane"
)

var _ = Describe("An apiserver-only plane", Ordered, func() {
	var plane *controlplane.Plane

	BeforeAll(func(ctx SpecContext) {
		start := time.Now()
		var err error
		plane, err = controlplane.Start(ctx, controlplane.Options{})
		Expect(err).NotTo(HaveOccurred())
		AddReportEntry("apiserver plane start-up", time.Since(start).Round(time.Millisecond).String())
		DeferCleanup(func() { _ = plane.Stop() }) // in case a spec fails before the Stop spec
	})

	It("serves an admin kubeconfig file that other processes can use", func(ctx SpecContext) {
		cfg, err := clientcmd.BuildConfigFromFlags("", plane.Kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		c, err := client.New(cfg, client.Options{})
		Expect(err).NotTo(HaveOccurred())

		var namespaces corev1.NamespaceList
		Expect(c.List(ctx, &namespaces)).To(Succeed())
		Expect(namespaces.Items).To(ContainElement(HaveField("Name", "kube-system")))
	})

	It("logs each component to the plane directory", func() {
		for _, c := range []controlplane.Component{controlplane.Etcd, controlplane.KubeAPIServer} {
			Expect(plane.LogPath(c)).To(BeARegularFile())
			Expect(filepath.Dir(plane.LogPath(c))).To(Equal(plane.LogDir))
		}
	})

	It("leaves no process and no temporary directory after Stop", func() {
		dir := plane.Dir
		Expect(processesMentioning(dir)).NotTo(BeEmpty(), "the check must see a running plane")
		Expect(plane.Stop()).To(Succeed())
		Expect(processesMentioning(dir)).To(BeEmpty())
		Expect(dir).NotTo(BeADirectory())
		Expect(plane.Stop()).To(Succeed(), "Stop is idempotent")
	})
})

var _ = Describe("A component that fails to start", func() {
	It("fails Start with the component's log tail and leaves nothing running", func(ctx SpecContext) {
		dir := GinkgoT().TempDir()
		_, err := controlplane.Start(ctx, controlplane.Options{
			Full:      true,
			Dir:       dir,
			ExtraArgs: map[controlplane.Component][]string{controlplane.KubeScheduler: {"--no-such-flag=1"}},
		})
		Expect(err).To(MatchError(And(
			ContainSubstring("kube-scheduler: exited before becoming healthy"),
			ContainSubstring("unknown flag: --no-such-flag"),
			ContainSubstring("last "),
		)))
		Expect(processesMentioning(dir)).To(BeEmpty())
		Expect(filepath.Join(dir, "logs", "kube-scheduler.log")).To(BeARegularFile(), "an explicit Dir is kept")
	})

	It("quotes the apiserver's log when envtest cannot start it", func(ctx SpecContext) {
		_, err := controlplane.Start(ctx, controlplane.Options{
			ExtraArgs: map[controlplane.Component][]string{controlplane.KubeAPIServer: {"--no-such-flag"}},
		})
		Expect(err).To(MatchError(And(
			ContainSubstring("start etcd and kube-apiserver"),
			ContainSubstring("kube-apiserver.log ---\nError: unknown flag: --no-such-flag"),
		)))
	})

	It("reports a binary that never becomes healthy once its start-up times out", func(ctx SpecContext) {
		// The fake leaves a child that ignores SIGTERM and names the plane
		// directory (its "$@"), so the check below sees it if Stop only
		// signalled the leader.
		binDir := fakeBinDir(ctx, controlplane.KubeControllerManager, `#!/bin/sh
echo 'simulated controller-manager: waiting for nothing'
sh -c 'trap "" TERM; sleep 600; :' child "$@" &
wait
`)
		dir := GinkgoT().TempDir()
		_, err := controlplane.Start(ctx, controlplane.Options{
			Full: true, Dir: dir, BinDir: binDir, StartTimeout: 3 * time.Second,
		})
		Expect(err).To(MatchError(And(
			ContainSubstring("kube-controller-manager: not healthy: timed out after 3s"),
			ContainSubstring("simulated controller-manager: waiting for nothing"),
		)))
		Expect(processesMentioning(dir)).To(BeEmpty(), "the fake's sleep child is killed with its process group")
	})
})

// fakeBinDir returns a BinDir holding the real binaries except for c, which
// is replaced by script.
func fakeBinDir(ctx context.Context, c controlplane.Component, script string) string {
	realDir, err := controlplane.ResolveBinDir(ctx)
	Expect(err).NotTo(HaveOccurred())
	dir := GinkgoT().TempDir()
	entries, err := os.ReadDir(realDir)
	Expect(err).NotTo(HaveOccurred())
	for _, e := range entries {
		if e.Name() == string(c) {
			continue
		}
		Expect(os.Symlink(filepath.Join(realDir, e.Name()), filepath.Join(dir, e.Name()))).To(Succeed())
	}
	Expect(os.WriteFile(filepath.Join(dir, string(c)), []byte(script), 0o755)).To(Succeed())
	return dir
}
