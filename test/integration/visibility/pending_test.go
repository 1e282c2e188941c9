package visibility_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	visv1 "github.com/berth-dev/berth/apis/visibility/v1alpha1"
	"github.com/berth-dev/berth/controllers/visibility"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/framework"
)

// get reads a visibility path as the given user ("" for the admin), with
// query parameters as name, value pairs.
func get(ctx context.Context, user, path string, params ...string) (*visv1.PendingWorkloadsSummary, error) {
	cfg := rest.CopyConfig(env.Plane.Config)
	if user != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	req := cs.CoreV1().RESTClient().Get().AbsPath("/apis/visibility.berth.dev/v1alpha1", path)
	for i := 0; i+1 < len(params); i += 2 {
		req = req.Param(params[i], params[i+1])
	}
	raw, err := req.DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w (body %q)", err, raw)
	}
	out := &visv1.PendingWorkloadsSummary{}
	return out, json.Unmarshal(raw, out)
}

func names(s *visv1.PendingWorkloadsSummary) []string {
	var out []string
	for _, it := range s.Items {
		out = append(out, it.Job.Name)
	}
	return out
}

var _ = Describe("pending workloads", Ordered, func() {
	var nsA, nsB, cq string
	var listed []string
	var jobs []*batchv1.Job

	BeforeAll(func(ctx SpecContext) {
		Expect(framework.InstallTenantRoles(ctx, env.Client)).To(Succeed())
		for _, ns := range []*string{&nsA, &nsB} {
			obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "berth-vis-"}}
			Expect(env.Client.Create(ctx, obj)).To(Succeed())
			*ns = obj.Name
		}
		cq = nsA + "-cq"
		f := builders.Flavor(cq, nil)
		Expect(env.Client.Create(ctx, f)).To(Succeed())
		Expect(env.Client.Create(ctx, builders.ClusterQueue(cq).Quota(f.Name, builders.GPU, "1", "").Obj())).To(Succeed())
		for _, ns := range []string{nsA, nsB} {
			Expect(env.Client.Create(ctx, builders.LocalQueue(ns, "team", cq))).To(Succeed())
		}
		By("one job holding the queue's only GPU, four waiting behind it, alternating namespaces")
		for i, ns := range []string{nsA, nsA, nsB, nsA, nsB} {
			job := builders.Job(ns, []string{"running", "a1", "b1", "a2", "b2"}[i], "team").Request(builders.GPU, "1").Obj()
			Expect(env.Client.Create(ctx, job)).To(Succeed())
			jobs = append(jobs, job)
			if i == 0 {
				Eventually(admitted(ctx, job)).Should(BeTrue())
			}
		}
		alice := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "alice"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "alice", APIGroup: rbacv1.GroupName}},
			RoleRef:  rbacv1.RoleRef{Kind: "ClusterRole", Name: "berth-visibility-localqueue-viewer", APIGroup: rbacv1.GroupName}}
		Expect(env.Client.Create(ctx, alice)).To(Succeed())
	})

	It("shows an admin the ClusterQueue's line in admission order, with positions and reasons", func(ctx SpecContext) {
		var s *visv1.PendingWorkloadsSummary
		Eventually(func(g Gomega) {
			var err error
			s, err = get(ctx, "", "clusterqueues/"+cq+"/pendingworkloads")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(names(s)).To(ConsistOf("a1", "b1", "a2", "b2"))
		}).Should(Succeed())
		// Jobs created within one second tie on their creation time and
		// are then ordered by key; each namespace's own order holds.
		listed = names(s)
		Expect(slices.Index(listed, "a1")).To(BeNumerically("<", slices.Index(listed, "a2")))
		Expect(slices.Index(listed, "b1")).To(BeNumerically("<", slices.Index(listed, "b2")))
		Expect(s.Total).To(BeEquivalentTo(4))
		ahead := map[string]int32{}
		for i, it := range s.Items {
			Expect(it.PositionInClusterQueue).To(BeEquivalentTo(i))
			Expect(it.PositionInLocalQueue).To(Equal(ahead[it.Namespace]), "%s is behind the earlier ones of its own LocalQueue", it.Job.Name)
			ahead[it.Namespace]++
			Expect(it.Job.Kind).To(Equal("Job"))
			Expect(it.Reason).To(Equal("InsufficientQuota"))
			Expect(it.Message).NotTo(BeEmpty())
			Expect(it.Shortfalls).To(HaveLen(1))
			Expect(it.Shortfalls[0].Available.IsZero()).To(BeTrue())
		}
		page, err := get(ctx, "", "clusterqueues/"+cq+"/pendingworkloads", "offset", "1", "limit", "2")
		Expect(err).NotTo(HaveOccurred())
		Expect(names(page)).To(Equal(listed[1:3]))
		Expect(page.Total).To(BeEquivalentTo(4))
	})

	It("shows a tenant its own LocalQueue's workloads and nothing else", func(ctx SpecContext) {
		s, err := get(ctx, "alice", "namespaces/"+nsA+"/localqueues/team/pendingworkloads")
		Expect(err).NotTo(HaveOccurred())
		Expect(names(s)).To(Equal([]string{"a1", "a2"}))
		Expect([]int{int(s.Items[0].PositionInClusterQueue), int(s.Items[1].PositionInClusterQueue)}).
			To(Equal([]int{slices.Index(listed, "a1"), slices.Index(listed, "a2")}))
		_, err = get(ctx, "alice", "namespaces/"+nsB+"/localqueues/team/pendingworkloads")
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "another namespace: %v", err)
		_, err = get(ctx, "alice", "clusterqueues/"+cq+"/pendingworkloads")
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the ClusterQueue: %v", err)
	})

	It("rejects bad queries and unknown queues with what to fix", func(ctx SpecContext) {
		_, err := get(ctx, "", "clusterqueues/"+cq+"/pendingworkloads", "limit", "5000")
		Expect(apierrors.IsBadRequest(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("page with offset"))
		_, err = get(ctx, "", "clusterqueues/"+cq+"/pendingworkloads", "offset", "-1")
		Expect(apierrors.IsBadRequest(err)).To(BeTrue(), "%v", err)
		_, err = get(ctx, "", "clusterqueues/no-such-queue/pendingworkloads")
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
		_, err = get(ctx, "", "namespaces/"+nsA+"/localqueues/no-such-queue/pendingworkloads")
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	})

	It("looks one workload up by name, and names no other namespace's workloads to a tenant", func(ctx SpecContext) {
		By("a StrictFIFO ClusterQueue whose head, from another namespace, blocks the tenant's job")
		strict := nsA + "-strict"
		Expect(env.Client.Create(ctx, builders.ClusterQueue(strict).Strategy(berthv1.StrictFIFO).
			Quota(cq, builders.GPU, "1", "").Obj())).To(Succeed())
		for _, ns := range []string{nsA, nsB} {
			Expect(env.Client.Create(ctx, builders.LocalQueue(ns, "strict", strict, strict+"-high"))).To(Succeed())
		}
		high := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: strict + "-high"}, Value: 1000}
		Expect(env.Client.Create(ctx, high)).To(Succeed())
		holder := builders.Job(nsA, "holder", "strict").Request(builders.GPU, "1").Obj()
		Expect(env.Client.Create(ctx, holder)).To(Succeed())
		Eventually(admitted(ctx, holder)).Should(BeTrue())
		head := builders.Job(nsB, "head", "strict").Request(builders.GPU, "1").Obj()
		head.Spec.Template.Spec.PriorityClassName = high.Name
		behind := builders.Job(nsA, "behind", "strict").Request(builders.GPU, "1").Obj()
		Expect(env.Client.Create(ctx, head)).To(Succeed())
		Expect(env.Client.Create(ctx, behind)).To(Succeed())
		var headWL, behindWL *berthv1.Workload
		Eventually(func(g Gomega) {
			headWL, behindWL = workloadOf(ctx, g, head), workloadOf(ctx, g, behind)
			g.Expect(headWL).NotTo(BeNil())
			g.Expect(behindWL).NotTo(BeNil())
		}).Should(Succeed())
		headName := nsB + "/" + headWL.Name

		By("the ClusterQueue's administrators see whom it waits behind")
		Eventually(func(g Gomega) {
			s, err := get(ctx, "", "clusterqueues/"+strict+"/pendingworkloads", "workload", nsA+"/"+behindWL.Name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(names(s)).To(Equal([]string{"behind"}))
			g.Expect(s.Total).To(BeEquivalentTo(2))
			g.Expect(s.Items[0].Reason).To(Equal(string(admission.BlockedByHead)))
			g.Expect(s.Items[0].Message).To(ContainSubstring(headName))
		}).Should(Succeed())

		By("the tenant's own line says it waits behind the head, without naming it")
		s, err := get(ctx, "alice", "namespaces/"+nsA+"/localqueues/strict/pendingworkloads", "workload", behindWL.Name)
		Expect(err).NotTo(HaveOccurred())
		Expect(names(s)).To(Equal([]string{"behind"}))
		Expect(s.Total).To(BeEquivalentTo(1))
		Expect(s.Items[0].PositionInClusterQueue).To(BeEquivalentTo(1))
		Expect(s.Items[0].Message).To(ContainSubstring(visibility.Redacted))
		Expect(s.Items[0].Message).NotTo(ContainSubstring(headWL.Name))
		whole, err := get(ctx, "alice", "namespaces/"+nsA+"/localqueues/strict/pendingworkloads")
		Expect(err).NotTo(HaveOccurred())
		Expect(whole.Items).To(HaveLen(1))
		Expect(whole.Items[0].Message).To(Equal(s.Items[0].Message), "the page and the lookup say the same")

		By("a lookup of a workload that is not in the line finds nothing; a lookup with a namespace is refused")
		s, err = get(ctx, "alice", "namespaces/"+nsA+"/localqueues/strict/pendingworkloads", "workload", "no-such-workload")
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Items).To(BeEmpty())
		_, err = get(ctx, "alice", "namespaces/"+nsA+"/localqueues/strict/pendingworkloads", "workload", headName)
		Expect(apierrors.IsBadRequest(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("without a namespace"))
	})

	It("writes no waiting reason to status, and replaces one that asked for action once it no longer holds", func(ctx SpecContext) {
		By("a job naming a LocalQueue that does not exist yet")
		late := builders.Job(nsB, "late", "later").Request(builders.GPU, "1").Obj()
		Expect(env.Client.Create(ctx, late)).To(Succeed())
		jobs = append(jobs, late)
		Eventually(quotaReason(ctx, late)).Should(Equal(string(berthv1.ReasonLocalQueueNotFound)))
		By("the LocalQueue appears: the job now only waits its turn, and its status must stop asking for a queue")
		Expect(env.Client.Create(ctx, builders.LocalQueue(nsB, "later", cq))).To(Succeed())
		Eventually(quotaReason(ctx, late)).Should(Equal(string(berthv1.ReasonInsufficientQuota)))
		By("the jobs that only ever waited were considered in earlier cycles and have no reason written")
		for _, job := range jobs[1 : len(jobs)-1] {
			Expect(quotaReason(ctx, job)(Default)).To(BeEmpty(), "%s only waits its turn", job.Name)
		}
	})

	It("lists them in the order berth then admits them", func(ctx SpecContext) {
		By("the line now also holds the late job, which may tie with the others on creation time")
		Eventually(func(g Gomega) {
			s, err := get(ctx, "", "clusterqueues/"+cq+"/pendingworkloads")
			g.Expect(err).NotTo(HaveOccurred())
			listed = names(s)
			g.Expect(listed).To(ConsistOf("a1", "b1", "a2", "b2", "late"))
		}).Should(Succeed())
		all := jobsByName(jobs)
		holder := jobs[0]
		for i, next := range listed {
			Expect(env.Client.Delete(ctx, holder, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
			Eventually(admitted(ctx, all[next])).Should(BeTrue(), "%s is admitted when %s's GPU frees", next, holder.Name)
			for _, later := range listed[i+1:] {
				Expect(admitted(ctx, all[later])(Default)).To(BeFalse(), "%s waits behind %s", later, next)
			}
			holder = all[next]
		}
	})
})

func jobsByName(jobs []*batchv1.Job) map[string]*batchv1.Job {
	out := map[string]*batchv1.Job{}
	for _, j := range jobs {
		out[j.Name] = j
	}
	return out
}

// workloadOf is the job's Workload, nil while there is none.
func workloadOf(ctx context.Context, g Gomega, job *batchv1.Job) *berthv1.Workload {
	wls := &berthv1.WorkloadList{}
	g.Expect(env.Client.List(ctx, wls, client.InNamespace(job.Namespace))).To(Succeed())
	for i, wl := range wls.Items {
		if ref := metav1.GetControllerOf(&wl); ref != nil && ref.Name == job.Name {
			return &wls.Items[i]
		}
	}
	return nil
}

// admitted reports whether the job's Workload holds quota.
func admitted(ctx context.Context, job *batchv1.Job) func(Gomega) bool {
	return func(g Gomega) bool {
		wl := workloadOf(ctx, g, job)
		return wl != nil && wl.Status.Admission != nil
	}
}

// quotaReason is the reason of the job's Workload's QuotaReserved=False
// condition, "" when it has none or holds quota. A workload that waits
// behind others may carry Pending (from a requeue), never a waiting reason.
func quotaReason(ctx context.Context, job *batchv1.Job) func(Gomega) string {
	return func(g Gomega) string {
		wl := workloadOf(ctx, g, job)
		g.Expect(wl).NotTo(BeNil(), "job %s has a Workload", job.Name)
		c := meta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionQuotaReserved)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason == string(berthv1.ReasonPending) {
			return ""
		}
		return c.Reason
	}
}
