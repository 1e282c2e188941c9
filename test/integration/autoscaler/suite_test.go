// Package autoscaler_test runs berth-autoscaler's reconcilers against a real
// kube-apiserver and etcd with the ProvisioningRequest and CapacityBuffer
// CRDs installed. There
// is no kubelet here: tests make nodes Ready by patching their status, and
// bind pods by setting spec.nodeName. Time is a fake clock the tests step.
package autoscaler_test

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/berth-dev/berth/cmd/berth-autoscaler/autoscaler"
	"github.com/berth-dev/berth/test/framework"
)

const (
	timeout  = 30 * time.Second
	interval = 100 * time.Millisecond
	// bookingTTL is the autoscaler's --booking-ttl in this suite.
	bookingTTL = 10 * time.Minute
	// retryBackoff and maxRetryBackoff are cluster-autoscaler's defaults:
	// a request without capacity is tried again 1, 2, 4, 8, 10, 10...
	// minutes after each answer.
	retryBackoff    = time.Minute
	maxRetryBackoff = 10 * time.Minute
)

var (
	env            *framework.Env
	fakeClock      *clocktesting.FakeClock
	stopAutoscaler func() error
)

func TestAutoscaler(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "autoscaler integration suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	env, err = framework.StartForAutoscaler(ctx, false)
	Expect(err).NotTo(HaveOccurred())
	fakeClock = clocktesting.NewFakeClock(time.Now())
	stopAutoscaler, err = env.StartAutoscaler(ctx, options())
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

// options are the suite's autoscaler options.
func options() autoscaler.Options {
	return autoscaler.Options{
		Clock:               fakeClock,
		RetryInterval:       200 * time.Millisecond,
		RetryBackoff:        retryBackoff,
		MaxRetryBackoff:     maxRetryBackoff,
		BookingTTL:          bookingTTL,
		ProvisioningLatency: 0,
		// The revocation specs need the fault cluster-autoscaler never
		// produces.
		AllowRevocation: true,
		// The CapacityBuffer specs; with ScanInterval 0 the buffer loop
		// runs every RetryInterval.
		CapacityBufferController:   true,
		CapacityBufferPodInjection: true,
		// The unschedulable pods specs, as berth-autoscaler runs by
		// default; no other spec writes a pod's PodScheduled condition
		// (there is no kube-scheduler here), so no other spec's pods ask
		// for a scale-up.
		ScaleUpUnschedulablePods:     true,
		ExpendablePodsPriorityCutoff: ptr.To(autoscaler.DefaultExpendablePodsPriorityCutoff),
	}
}

// newNamespace creates a namespace for one spec.
func newNamespace(ctx context.Context) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "autoscaler-it-"}}
	Expect(env.Client.Create(ctx, ns)).To(Succeed())
	return ns.Name
}
