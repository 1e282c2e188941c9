// Package controller_test runs berth's controllers against a real
// kube-apiserver and etcd. There is no kube-controller-manager here: tests
// drive Job status themselves where they need to.
package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/setup"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/framework"
)

const (
	timeout  = 30 * time.Second
	interval = 100 * time.Millisecond
)

var env *framework.Env

// berthOptions are the options of the suite's berth; a spec that restarts
// berth differently starts from them, so that every berth counts DRA
// devices as the first.
func berthOptions() framework.BerthOptions {
	return framework.BerthOptions{Setup: setup.Options{
		// The specs read waiting reasons (InsufficientQuota,
		// TopologyUnavailable) from Workload status, which the default
		// never writes; the visibility suite covers the default.
		PendingStatusDelay: time.Millisecond,
		// DRA devices of draClass count as GPUs (dra_test.go).
		DeviceClasses: jobs.DeviceClassMapping{draClass: {Resource: builders.GPU, PerDevice: resource.MustParse("1")}},
		// The specs queue batch Jobs, and place gangs on nodes, pools and
		// topology levels (topology_test.go, dra_test.go), which reach
		// the engine through the capacity controllers. The capacity
		// booking spec reads the engine's decisions only: the
		// ProvisioningRequest API is not installed here, and carrying
		// bookings out is the provisioning suite's.
		// The headroom specs keep CapacityBuffers (the suite installs
		// their CRD).
		Parts: []setup.Part{setup.Capacity, setup.Headroom, setup.BatchJob},
	}}
}

func TestController(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "controller integration suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	env, err = framework.StartWithBerth(ctx, framework.StartOptions{CRDPaths: []string{framework.CapacityBufferCRD()}}, berthOptions())
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(5*time.Minute))

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// restartBerth runs berth with o instead of berthOptions() until the
// calling node (a spec, or an Ordered Describe's BeforeAll) ends, then
// restores the suite's berth, and returns the new berth.
func restartBerth(o framework.BerthOptions) *setup.Berth {
	Expect(env.StopBerth()).To(Succeed())
	DeferCleanup(func() error {
		if err := env.StopBerth(); err != nil {
			return err
		}
		_, err := env.StartBerth(berthOptions())
		return err
	})
	b, err := env.StartBerth(o)
	Expect(err).NotTo(HaveOccurred())
	return b
}

// newNamespace creates a namespace for one spec.
func newNamespace(ctx context.Context) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "berth-it-"}}
	Expect(env.Client.Create(ctx, ns)).To(Succeed())
	return ns.Name
}
