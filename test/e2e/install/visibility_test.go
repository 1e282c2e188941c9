package install_test

import (
	"context"
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	visv1 "github.com/berth-dev/berth/apis/visibility/v1alpha1"
	"github.com/berth-dev/berth/test/framework"
)

// visibilityPort is where the process-run berth serves visibility.berth.dev.
var visibilityPort int

// expectVisibility reaches the installed visibility API through the API
// server's aggregator — the APIService carrying the CA berth injected, the
// delegation RBAC of the install — as an admin and as a tenant whom the
// namespace's view role, aggregated by kube-controller-manager from the
// install's viewer role, lets read that namespace's LocalQueue only.
func expectVisibility(ctx context.Context, namespace string) {
	By("reading the visibility API through the aggregator")
	Expect(framework.PointAPIService(ctx, k8s, namespace, visibilityPort, nil)).To(Succeed(),
		"the APIService becomes Available with the CA berth injected")
	raw, err := visibilityGet(ctx, "", "clusterqueues/team-a/pendingworkloads")
	Expect(err).NotTo(HaveOccurred(), "an admin reads a ClusterQueue's line")
	summary := &visv1.PendingWorkloadsSummary{}
	Expect(json.Unmarshal(raw, summary)).To(Succeed())
	Expect(summary.Kind).To(Equal("PendingWorkloadsSummary"))
	Expect(summary.Items).To(BeEmpty(), "the sample jobs have run: nothing waits")

	Eventually(func(g Gomega) {
		view := &rbacv1.ClusterRole{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "view"}, view)).To(Succeed())
		g.Expect(view.Rules).To(ContainElement(HaveField("Resources", ContainElement("localqueues/pendingworkloads"))))
		g.Expect(view.Rules).To(ContainElement(HaveField("Resources", ContainElement("workloads"))))
	}).WithContext(ctx).WithTimeout(timeout).WithPolling(interval).Should(Succeed(), "view aggregates the install's tenant and LocalQueue viewer roles")
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "tenant-view"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "tenant", APIGroup: rbacv1.GroupName}},
		RoleRef:  rbacv1.RoleRef{Kind: "ClusterRole", Name: "view", APIGroup: rbacv1.GroupName}}
	Expect(k8s.Create(ctx, binding)).To(Succeed())
	Eventually(func() error {
		_, err := visibilityGet(ctx, "tenant", "namespaces/team-a/localqueues/training/pendingworkloads")
		return err
	}).WithContext(ctx).WithTimeout(timeout).WithPolling(interval).Should(Succeed(), "a tenant with view reads its LocalQueue's line")
	tenant := rest.CopyConfig(plane.Config)
	tenant.Impersonate = rest.ImpersonationConfig{UserName: "tenant"}
	asTenant, err := client.New(tenant, client.Options{Scheme: k8s.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	Expect(asTenant.List(ctx, &berthv1.WorkloadList{}, client.InNamespace("team-a"))).To(Succeed(),
		"view lets a tenant list its namespace's Workloads (the install's tenant-viewer role)")
	Expect(asTenant.List(ctx, &berthv1.LocalQueueList{}, client.InNamespace("team-a"))).To(Succeed())
	_, err = visibilityGet(ctx, "tenant", "namespaces/team-b/localqueues/training/pendingworkloads")
	Expect(apierrors.IsForbidden(err)).To(BeTrue(), "another namespace's LocalQueue: %v", err)
	_, err = visibilityGet(ctx, "tenant", "clusterqueues/team-a/pendingworkloads")
	Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a ClusterQueue's line: %v", err)
	Expect(k8s.Delete(ctx, binding)).To(Succeed())
}

// visibilityGet reads a path of visibility.berth.dev/v1alpha1 as user
// ("" for the admin).
func visibilityGet(ctx context.Context, user, path string) ([]byte, error) {
	cfg := rest.CopyConfig(plane.Config)
	if user != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return cs.CoreV1().RESTClient().Get().AbsPath("/apis/visibility.berth.dev/v1alpha1", path).DoRaw(ctx)
}
