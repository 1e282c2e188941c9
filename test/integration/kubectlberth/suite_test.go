// Package kubectlberth_test runs kubectl-berth's commands against a real
// kube-apiserver and etcd with berth's CRDs and webhooks, and Kueue's CRDs
// for the import: what the commands create must be what berth accepts.
package kubectlberth_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/berth-dev/berth/cmd/kubectl-berth/commands"
	"github.com/berth-dev/berth/controllers/setup"
	"github.com/berth-dev/berth/test/framework"
)

var (
	env *framework.Env
	// stopVisibility stops the visibility API server; the API server
	// waits for the connections its aggregator keeps open, so it goes
	// before env.Stop.
	stopVisibility = func() error { return nil }
)

// registry is where berth reports its metrics in this suite.
var registry = prometheus.NewRegistry()

func TestKubectlBerth(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "kubectl berth suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	kueue, err := framework.ModuleDir("sigs.k8s.io/kueue")
	Expect(err).NotTo(HaveOccurred())
	env, err = framework.StartWithBerth(ctx, framework.StartOptions{
		CRDPaths: []string{filepath.Join(kueue, "config", "components", "crd", "bases")},
	}, framework.BerthOptions{Setup: setup.Options{MetricsRegistry: registry,
		// The commands act on queues and on the Workloads of batch Jobs.
		Parts: []setup.Part{setup.BatchJob}}})
	Expect(err).NotTo(HaveOccurred())
	stopVisibility, err = env.ServeVisibility(ctx)
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(5*time.Minute))

var _ = AfterSuite(func() {
	Expect(stopVisibility()).To(Succeed())
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// berth runs kubectl berth against the plane with args and returns its
// stdout, stderr and error, as a user's shell would see them.
func berth(stdin string, args ...string) (string, string, error) {
	var out, errOut bytes.Buffer
	cmd := commands.NewRoot(genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(append([]string{"--kubeconfig", env.Plane.Kubeconfig}, args...))
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}
