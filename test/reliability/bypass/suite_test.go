// Package bypass_test is the tenant attack suite: hostile tenants and bad
// input against berth on a full control plane — kube-apiserver, etcd,
// kube-controller-manager, kube-scheduler, kwok GPU nodes and the real
// JobSet and LeaderWorkerSet operators, with the install's tenant roles
// and ValidatingAdmissionPolicies and berth's notifier posting to local
// sinks — so that "no pod ran outside quota" is checked on pods that were
// really created and bound. The attacks are made as a user bound only to
// the built-in edit role in one namespace (attacks_test.go); each is either
// refused by the API server with a message that says what to fix, or
// neutralised by berth with a condition or a Warning event, and the
// invariant oracle records every namespace. The notifications suite shares
// the plane (notify_test.go).
package bypass_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/controllers/notify"
	"github.com/berth-dev/berth/controllers/podgate"
	"github.com/berth-dev/berth/controllers/setup"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/framework"
	"github.com/berth-dev/berth/test/jobsuite"
	"github.com/berth-dev/berth/test/oracle"
)

const (
	timeout  = 90 * time.Second
	interval = 200 * time.Millisecond
	// quiet is how long a spec watches for something that must not happen.
	quiet        = 3 * time.Second
	productLabel = "nvidia.com/gpu.product"
	product      = "NVIDIA-H200"
	// queue is every spec's LocalQueue name.
	queue = "team"
)

var (
	env *framework.Env
	// slack stands in for Slack's incoming webhooks and for tenants'
	// webhook sinks; berth may reach it (its address is allowlisted).
	slack = framework.NewSinkStandIn()
)

func TestBypass(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "tenant attacks, bypass and bad input suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	env, err = framework.StartGPUPlane(ctx, framework.GPUPlane{
		Nodes: 2, NodeLabels: map[string]string{productLabel: product},
		Operators: []framework.Operator{framework.JobSetOperator, framework.LWSOperator},
		// Every attack meets the path a current cluster has: the API server
		// gates queued pods and the pod webhooks are called only for what
		// needs berth's state (podgate_test.go).
		PodPolicies: true,
		Berth: framework.BerthOptions{Setup: setup.Options{
			PodGate: podgate.Options{Every: time.Second},
			// Devices of gpuClass count as GPUs (attacks_dra_test.go).
			DeviceClasses: jobs.DeviceClassMapping{gpuClass: {Resource: builders.GPU, PerDevice: resource.MustParse("1")}},
			Notifications: notify.Options{
				Enabled: true, Namespace: "default", HTTPClient: slack.Client(), Egress: slack.Egress(),
				// A hanging sink holds its worker for the whole attempt: long
				// enough that another tenant's report can only arrive through
				// another worker.
				Dispatch: notify.DispatchOptions{QueueSize: 8, Attempts: 2, Backoff: 100 * time.Millisecond,
					MaxBackoff: time.Second, Timeout: 30 * time.Second},
			}}},
	})
	Expect(err).NotTo(HaveOccurred())
	// What the install gives tenants, as a cluster has it: the tenant
	// roles, which kube-controller-manager aggregates into edit, and the
	// policies that narrow their updates.
	Expect(framework.InstallTenantRoles(ctx, env.Client)).To(Succeed())
	Expect(framework.InstallTenantPolicies(ctx, env.Client)).To(Succeed())
	Eventually(func(g Gomega) {
		edit := &rbacv1.ClusterRole{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "edit"}, edit)).To(Succeed())
		g.Expect(edit.Rules).To(ContainElement(And(HaveField("Resources", ContainElement("workloads")), HaveField("Verbs", ContainElement("patch")))))
	}, timeout, interval).Should(Succeed(), "kube-controller-manager aggregates the tenant roles into edit")
}, NodeTimeout(framework.OperatorPlaneTimeout))

var _ = AfterSuite(func() {
	slack.Close()
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// newTeam creates a namespace with a flavor, a ClusterQueue of gpus GPUs
// that selects it by its team label, and the LocalQueue "team". The
// invariant oracle records the namespace from then on: when the spec ends
// it must have seen no violation (no pod bound outside an admitted
// Workload, no quota overshoot, no double admission); then the spec's jobs
// and pods are deleted and waited for.
func newTeam(ctx context.Context, gpus string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "berth-bypass-"}}
	Expect(env.Client.Create(ctx, ns)).To(Succeed())
	ns.Labels = map[string]string{"team": ns.Name}
	Expect(env.Client.Update(ctx, ns)).To(Succeed())
	Expect(env.Client.Create(ctx, builders.Flavor(ns.Name, map[string]string{productLabel: product}))).To(Succeed())
	cq := builders.ClusterQueue(ns.Name).Quota(ns.Name, builders.GPU, gpus, "").Obj()
	cq.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": ns.Name}}
	Expect(env.Client.Create(ctx, cq)).To(Succeed())
	Expect(env.Client.Create(ctx, builders.LocalQueue(ns.Name, queue, ns.Name))).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		Expect(env.CleanNamespace(ctx, ns.Name, framework.CleanOptions{Owners: framework.AllOwners(), Timeout: timeout})).To(Succeed())
	}, NodeTimeout(2*timeout))
	// Registered last, so it runs first: the recording is judged before
	// the spec's objects are deleted.
	rec, err := oracle.Start(ctx, env.Plane.Config, oracle.Options{Namespaces: []string{ns.Name}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		defer rec.Stop()
		Expect(rec.Violations()).To(BeEmpty())
	})
	return ns.Name
}

// outsideQuota lists the bound, unfinished pods of ns that do not carry the
// UID of an admitted Workload of ns: pods running outside quota.
func outsideQuota(ctx context.Context, g Gomega, ns string) []string {
	wls := &berthv1.WorkloadList{}
	g.Expect(env.Client.List(ctx, wls, client.InNamespace(ns))).To(Succeed())
	admitted := map[string]bool{}
	for i := range wls.Items {
		if lifecycle.MayRun(lifecycle.PhaseOf(&wls.Items[i])) {
			admitted[string(wls.Items[i].UID)] = true
		}
	}
	pods := &corev1.PodList{}
	g.Expect(env.Client.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if _, has, err := lifecycle.RecordOf(&p); has && err == nil {
			continue // a replica on its own record, which only berth writes
		}
		if !admitted[p.Labels[berthv1.WorkloadLabel]] {
			out = append(out, p.Name)
		}
	}
	return out
}

// expectNoPodOutsideQuota watches ns for a while: no pod may be bound
// outside an admitted Workload or a record berth counts.
func expectNoPodOutsideQuota(ctx context.Context, ns string) {
	Consistently(func(g Gomega) {
		g.Expect(outsideQuota(ctx, g, ns)).To(BeEmpty())
	}, quiet, interval).Should(Succeed())
}

// tenant is a client of an ordinary user with the admin role in ns (no
// cluster-wide rights), as a team member would have.
func tenant(ctx context.Context, ns string) client.Client {
	Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "tenant"}},
	})).To(Succeed())
	cfg := rest.CopyConfig(env.Plane.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "tenant", Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// workloadOf returns the Workload controlled by the object of uid.
func workloadOf(ctx context.Context, g Gomega, ns string, uid string) *berthv1.Workload {
	owner := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, UID: types.UID(uid)}}
	wls, err := jobsuite.WorkloadsOf(ctx, env.Client, owner)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wls).To(HaveLen(1), "the Workload of %s", uid)
	return &wls[0]
}

// admittedUID waits until the Workload of the job whose UID is owner is
// admitted, and returns the Workload's UID: the value of its pods'
// berth.dev/workload label.
func admittedUID(ctx context.Context, ns, owner string) string {
	var uid string
	Eventually(func(g Gomega) {
		wl := workloadOf(ctx, g, ns, owner)
		g.Expect(wl.Status.Admission).NotTo(BeNil())
		uid = string(wl.UID)
	}, timeout, interval).Should(Succeed())
	return uid
}

// events lists "Reason: note" of the events about the named object.
func events(ctx context.Context, g Gomega, ns, name string) []string {
	return jobsuite.EventReasons(ctx, env.Client, ns, name)(g)
}

// update reads obj afresh, changes it and updates it as c, again if a
// controller wrote it in between: a conflict is not the answer a spec
// waits for (the refusal, or success).
func update[T client.Object](ctx context.Context, c client.Client, obj T, change func(T)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change(obj)
		return c.Update(ctx, obj)
	})
}
