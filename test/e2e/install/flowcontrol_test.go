package install_test

import (
	"context"
	"net/http"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/framework"
)

// expectWorkloadHigh checks, with a request made as berth's ServiceAccount,
// that API Priority and Fairness classifies berth's requests by the
// installed FlowSchema berth-controller into the level workload-high — the
// API server's own answer, from the response headers it sets on every
// request it classifies.
func expectWorkloadHigh(ctx context.Context, deploy *appsv1.Deployment) {
	By("berth's requests are served at workload-high, by its FlowSchema")
	fs := &flowcontrolv1.FlowSchema{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: "berth-controller"}, fs)).To(Succeed())
	level := &flowcontrolv1.PriorityLevelConfiguration{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: "workload-high"}, level)).To(Succeed())

	// The headers of the last response, read from berth's transport.
	var mu sync.Mutex
	var header http.Header
	cfg := berthConfig(ctx, deploy)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil {
				mu.Lock()
				header = resp.Header.Clone()
				mu.Unlock()
			}
			return resp, err
		})
	})
	c, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	// The API server reads FlowSchemas from its informer: the first
	// requests after the install may still fall under service-accounts.
	Eventually(func(g Gomega) {
		g.Expect(c.List(ctx, &berthv1.WorkloadList{}, client.Limit(1))).To(Succeed(), "berth may list Workloads")
		mu.Lock()
		defer mu.Unlock()
		g.Expect(header.Get("X-Kubernetes-PF-FlowSchema-UID")).To(Equal(string(fs.UID)), "classified by berth-controller")
		g.Expect(header.Get("X-Kubernetes-PF-PriorityLevel-UID")).To(Equal(string(level.UID)), "served at workload-high")
	}).WithContext(ctx).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
}

// roundTripper is a function that is an http.RoundTripper.
type roundTripper func(*http.Request) (*http.Response, error)

// RoundTrip implements http.RoundTripper.
func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// berthConfig is a client configuration that authenticates as the
// Deployment's ServiceAccount, with a token the API server issues for it.
func berthConfig(ctx context.Context, deploy *appsv1.Deployment) *rest.Config {
	token, err := framework.ServiceAccountToken(ctx, plane.Config, deploy.Namespace, deploy.Spec.Template.Spec.ServiceAccountName)
	Expect(err).NotTo(HaveOccurred())
	cfg := rest.AnonymousClientConfig(plane.Config)
	cfg.BearerToken = token
	return cfg
}
