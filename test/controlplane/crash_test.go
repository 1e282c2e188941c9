package controlplane_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/berth-dev/berth/test/controlplane"
)

// crashChildEnv, when set to a directory, turns this test binary into a
// process that starts a Full plane there, reports readiness on stdout and
// waits to be killed: the parent plays a test binary that crashes.
const crashChildEnv = "CONTROLPLANE_CRASH_CHILD_DIR"

// runCrashChild is the child's side; it never returns.
func runCrashChild(dir string) {
	_, err := controlplane.Start(context.Background(), controlplane.Options{Full: true, Dir: dir})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	select {}
}

var _ = Describe("A test binary that dies without Stop", func() {
	It("takes every component of its plane with it", func(ctx SpecContext) {
		dir := GinkgoT().TempDir()
		child := exec.Command(os.Args[0], "-test.run=^TestControlPlane$")
		child.Env = append(os.Environ(), crashChildEnv+"="+dir)
		child.Stderr = GinkgoWriter
		stdout, err := child.StdoutPipe()
		Expect(err).NotTo(HaveOccurred())
		Expect(child.Start()).To(Succeed())
		DeferCleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })

		line, err := bufio.NewReader(stdout).ReadString('\n')
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.TrimSpace(line)).To(Equal("ready"))
		Expect(processesMentioning(dir)).To(HaveLen(6), "etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, watchdog")

		Expect(child.Process.Signal(syscall.SIGKILL)).To(Succeed())
		_ = child.Wait()
		Eventually(func() []string { return processesMentioning(dir) }).Should(BeEmpty())
	})
})
