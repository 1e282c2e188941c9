// Package provisioning_test runs berth's provisioning controller against a
// real kube-apiserver and etcd, with the stand-in autoscaler in-process on
// a manager of its own. The suite starts without the ProvisioningRequest
// CRD: berth must notice it when it is installed (installAPI), and when it
// goes away. There is no kubelet and no Job controller: specs create the
// gang's pods themselves where they need them, and mark them Ready by a
// status update. berth's clock and the autoscaler's are fake clocks the
// specs step.
package provisioning_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/berth-dev/berth/cmd/berth-autoscaler/autoscaler"
	"github.com/berth-dev/berth/controllers/provisioning"
	"github.com/berth-dev/berth/controllers/setup"
	"github.com/berth-dev/berth/test/framework"
)

const (
	timeout  = 30 * time.Second
	interval = 100 * time.Millisecond
	// bookingTTL is the autoscaler's --booking-ttl in this suite.
	bookingTTL = 10 * time.Minute
)

var (
	env *framework.Env
	// berthClock is the provisioning controller's clock.
	berthClock *clocktesting.FakeClock
	// autoscalerClock is the stand-in autoscaler's clock.
	autoscalerClock *clocktesting.FakeClock

	autoscalerOnce sync.Once
	stopAutoscaler func() error
)

func TestProvisioning(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "provisioning integration suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	berthClock = clocktesting.NewFakeClock(time.Now())
	autoscalerClock = clocktesting.NewFakeClock(time.Now())
	var err error
	env, err = framework.StartWithBerth(ctx, framework.StartOptions{}, framework.BerthOptions{Setup: setup.Options{
		// Every decision and status write of berth's follows this clock;
		// the specs step it.
		Clock: berthClock,
		// The specs' held queues never write their reason.
		PendingStatusDelay: time.Hour,
		// Bookings of batch Jobs on pools and topology domains: the
		// capacity controllers give the engine the flavors' provisioning
		// policies, pools and nodes, the provisioning controllers carry
		// the bookings out.
		Parts: []setup.Part{setup.Capacity, setup.Provisioning, setup.BatchJob},
	}})
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(5*time.Minute))

var _ = AfterSuite(func() {
	var errs []error
	if stopAutoscaler != nil {
		errs = append(errs, stopAutoscaler())
	}
	if env != nil {
		errs = append(errs, env.Stop())
	}
	Expect(errors.Join(errs...)).NotTo(HaveOccurred())
})

// installAPI installs the ProvisioningRequest CRD if it is missing, and
// starts the stand-in autoscaler the first time.
func installAPI(ctx context.Context) {
	crd, err := framework.ProvisioningRequestCRD()
	Expect(err).NotTo(HaveOccurred())
	_, err = envtest.InstallCRDs(env.Plane.Config, envtest.CRDInstallOptions{Paths: []string{crd}})
	Expect(err).NotTo(HaveOccurred())
	autoscalerOnce.Do(func() {
		stopAutoscaler, err = env.StartAutoscaler(ctx, autoscaler.Options{
			Clock:           autoscalerClock,
			RetryInterval:   200 * time.Millisecond,
			RetryBackoff:    time.Minute,
			MaxRetryBackoff: 10 * time.Minute,
			BookingTTL:      bookingTTL,
			// The revocation specs need the fault cluster-autoscaler never
			// produces.
			AllowRevocation: true,
		})
		Expect(err).NotTo(HaveOccurred())
	})
}

// removeAPI deletes the ProvisioningRequest CRD and waits until it is
// gone.
func removeAPI(ctx context.Context) {
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(apiextensionsCRD)
	crd.SetName(provisioning.CRDName)
	if err := env.Client.Delete(ctx, crd); apierrors.IsNotFound(err) {
		return
	} else {
		Expect(err).NotTo(HaveOccurred())
	}
	Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: provisioning.CRDName}, crd))
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
}

// newNamespace creates a namespace for one spec.
func newNamespace(ctx context.Context) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "provisioning-it-"}}
	Expect(env.Client.Create(ctx, ns)).To(Succeed())
	return ns.Name
}
