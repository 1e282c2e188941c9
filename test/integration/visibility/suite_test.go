// Package visibility_test serves visibility.berth.dev from berth's engine
// behind a real kube-apiserver's aggregator: the API server authenticates
// callers, proxies to berth through its front proxy, and berth authorizes
// them by SubjectAccessReview, as in a cluster.
package visibility_test

import (
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/berth-dev/berth/controllers/setup"
	"github.com/berth-dev/berth/test/framework"
)

var (
	env *framework.Env
	// stopServer stops the visibility server; the API server waits for
	// the connections its aggregator keeps open, so it goes first.
	stopServer = func() error { return nil }
)

func TestVisibility(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "visibility API suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(time.Minute)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	var err error
	// The pending workloads the API lists are batch Jobs'.
	env, err = framework.StartWithBerth(ctx, framework.StartOptions{}, framework.BerthOptions{Setup: setup.Options{
		Parts: []setup.Part{setup.BatchJob},
	}})
	Expect(err).NotTo(HaveOccurred())
	stopServer, err = env.ServeVisibility(ctx)
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(5*time.Minute))

var _ = AfterSuite(func() {
	Expect(stopServer()).To(Succeed())
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
