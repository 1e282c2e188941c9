package kubectlberth_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	visv1 "github.com/berth-dev/berth/apis/visibility/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/framework"
)

// How long the specs wait for berth, and how often they look.
const (
	listTimeout = 30 * time.Second
	listPoll    = 100 * time.Millisecond
)

// listedWorkloads is the v1 List `list workloads -o json|yaml` prints, as
// far as the specs read it.
type listedWorkloads struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Items      []struct {
		Metadata     metav1.ObjectMeta      `json:"metadata"`
		Job          visv1.JobReference     `json:"job"`
		ClusterQueue string                 `json:"clusterQueue"`
		Status       string                 `json:"status"`
		Reason       string                 `json:"reason"`
		Pending      *visv1.PendingWorkload `json:"pending"`
	} `json:"items"`
}

// apiLine reads a ClusterQueue's line from the visibility API as the
// admin: what the commands' positions must match.
func apiLine(ctx context.Context, cq string) ([]visv1.PendingWorkload, error) {
	cs, err := kubernetes.NewForConfig(env.Plane.Config)
	if err != nil {
		return nil, err
	}
	raw, err := cs.CoreV1().RESTClient().Get().
		AbsPath("/apis/visibility.berth.dev/v1alpha1/clusterqueues", cq, "pendingworkloads").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w (body %q)", err, raw)
	}
	s := &visv1.PendingWorkloadsSummary{}
	return s.Items, json.Unmarshal(raw, s)
}

// tableRows parses a narrow table (no cell has a space) into one map per
// row, keyed by column header.
func tableRows(out string) []map[string]string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	head := strings.Fields(lines[0])
	var rows []map[string]string
	for _, l := range lines[1:] {
		cells := strings.Fields(l)
		row := map[string]string{}
		for i, h := range head {
			if i < len(cells) {
				row[h] = cells[i]
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// allowTenant binds user in namespace to the roles the install aggregates
// into view (the plane runs no controller-manager to aggregate them): the
// Workloads and LocalQueues, and the LocalQueues' lines.
func allowTenant(ctx context.Context, ns, user string) {
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: user, APIGroup: rbacv1.GroupName}}
	for _, role := range []string{"berth-tenant-viewer", "berth-visibility-localqueue-viewer"} {
		Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-" + role},
			Subjects: subject, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: role, APIGroup: rbacv1.GroupName}})).To(Succeed())
	}
}

var _ = Describe("kubectl berth list and explain", Ordered, func() {
	var nsA, nsB, cq string
	// line is the ClusterQueue's line as the visibility API lists it.
	var line []visv1.PendingWorkload

	BeforeAll(func(ctx SpecContext) {
		Expect(framework.InstallTenantRoles(ctx, env.Client)).To(Succeed())
		for _, ns := range []*string{&nsA, &nsB} {
			obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "list-"}}
			Expect(env.Client.Create(ctx, obj)).To(Succeed())
			*ns = obj.Name
		}
		cq = nsA
		Expect(env.Client.Create(ctx, builders.Flavor(cq, nil))).To(Succeed())
		Expect(env.Client.Create(ctx, builders.ClusterQueue(cq).Quota(cq, builders.GPU, "1", "").Obj())).To(Succeed())
		for _, ns := range []string{nsA, nsB} {
			Expect(env.Client.Create(ctx, builders.LocalQueue(ns, "team", cq))).To(Succeed())
		}
		By("one job holding the queue's only GPU, four waiting behind it, in two namespaces")
		for i, ns := range []string{nsA, nsA, nsB, nsA, nsB} {
			job := builders.Job(ns, []string{"running", "a1", "b1", "a2", "b2"}[i], "team").Request(builders.GPU, "1").Obj()
			Expect(env.Client.Create(ctx, job)).To(Succeed())
			if i == 0 {
				Eventually(func(g Gomega) {
					wls := &berthv1.WorkloadList{}
					g.Expect(env.Client.List(ctx, wls, client.InNamespace(ns))).To(Succeed())
					g.Expect(wls.Items).To(ContainElement(HaveField("Status.Admission", Not(BeNil()))))
				}).WithTimeout(listTimeout).WithPolling(listPoll).Should(Succeed())
			}
		}
		allowTenant(ctx, nsA, "alice")
		// Jobs created within one second tie on creation time and are
		// ordered by key: the expected order is the API's.
		Eventually(func(g Gomega) {
			var err error
			line, err = apiLine(ctx, cq)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(line).To(HaveLen(4))
		}).WithTimeout(listTimeout).WithPolling(listPoll).Should(Succeed())
	})

	// position is the API's position of a job of the line.
	position := func(ns, job string) string {
		for _, p := range line {
			if p.Namespace == ns && p.Job.Name == job {
				return fmt.Sprint(p.PositionInClusterQueue)
			}
		}
		Fail(fmt.Sprintf("job %s/%s is not in the line", ns, job))
		return ""
	}

	It("lists every namespace's Workloads to an admin, pending ones in the API's order", func() {
		out, errOut, err := berth("", "list", "workloads", "-A", "--clusterqueue", cq)
		Expect(err).NotTo(HaveOccurred())
		Expect(errOut).To(BeEmpty())
		rows := tableRows(out)
		Expect(rows).To(HaveLen(5), out)
		for i, p := range line {
			r := rows[i]
			Expect(r).To(HaveKeyWithValue("NAMESPACE", p.Namespace), out)
			Expect(r).To(HaveKeyWithValue("JOB", "job/"+p.Job.Name), out)
			Expect(r).To(HaveKeyWithValue("POSITION", fmt.Sprint(p.PositionInClusterQueue)), out)
			Expect(r).To(HaveKeyWithValue("STATUS", "Pending"), out)
			Expect(r).To(HaveKeyWithValue("REASON", "InsufficientQuota"), out)
			Expect(r).To(HaveKeyWithValue("CLUSTERQUEUE", cq), out)
		}
		Expect(rows[4]).To(HaveKeyWithValue("JOB", "job/running"), out)
		Expect(rows[4]).To(HaveKeyWithValue("STATUS", "Admitted"), out)
		Expect(rows[4]).To(HaveKeyWithValue("POSITION", "-"), out)

		out, _, err = berth("", "list", "workloads", "-n", nsB, "-o", "wide")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("POSITION-IN-LOCALQUEUE"))
		Expect(out).To(ContainSubstring(cq + "/nvidia.com/gpu 1>0"))
	})

	It("lists a tenant's own namespace with positions, and refuses another namespace", func() {
		out, errOut, err := berth("", "--as", "alice", "list", "workloads", "-n", nsA)
		Expect(err).NotTo(HaveOccurred())
		Expect(errOut).To(BeEmpty(), "a tenant reads its LocalQueue's line")
		rows := tableRows(out)
		Expect(rows).To(HaveLen(3), out)
		for _, r := range rows {
			Expect(r).NotTo(HaveKey("NAMESPACE"))
			if job := strings.TrimPrefix(r["JOB"], "job/"); job != "running" {
				Expect(r).To(HaveKeyWithValue("POSITION", position(nsA, job)), out)
			}
		}
		_, _, err = berth("", "--as", "alice", "list", "workloads", "-n", nsB)
		Expect(err).To(MatchError(ContainSubstring("forbidden")))
	})

	It("prints a v1 List that parses back, in json and in yaml", func() {
		for _, format := range []string{"json", "yaml"} {
			out, _, err := berth("", "list", "workloads", "-n", nsA, "-o", format)
			Expect(err).NotTo(HaveOccurred())
			var got listedWorkloads
			Expect(sigsyaml.Unmarshal([]byte(out), &got)).To(Succeed(), "%s:\n%s", format, out)
			Expect(got.APIVersion).To(Equal("v1"))
			Expect(got.Kind).To(Equal("List"))
			Expect(got.Items).To(HaveLen(3))
			for _, it := range got.Items {
				Expect(it.Metadata.Namespace).To(Equal(nsA))
				Expect(it.ClusterQueue).To(Equal(cq))
				if it.Job.Name == "running" {
					Expect(it.Status).To(Equal("Admitted"))
					Expect(it.Pending).To(BeNil())
					continue
				}
				Expect(it.Status).To(Equal("Pending"))
				Expect(it.Pending).NotTo(BeNil())
				Expect(fmt.Sprint(it.Pending.PositionInClusterQueue)).To(Equal(position(nsA, it.Job.Name)))
			}
		}
		out, _, err := berth("", "explain", "job/a2", "-n", nsA, "-o", "json")
		Expect(err).NotTo(HaveOccurred())
		var got struct {
			Items []map[string]any `json:"items"`
		}
		Expect(json.Unmarshal([]byte(out), &got)).To(Succeed(), out)
		Expect(got.Items).To(HaveLen(2))
		Expect(got.Items[0]).To(HaveKeyWithValue("kind", "Workload"))
		Expect(got.Items[1]).To(HaveKeyWithValue("kind", "PendingWorkloadsSummary"))
	})

	It("explains a waiting job: its position and what it is short of", func() {
		out, _, err := berth("", "explain", "job/a2", "-n", nsA)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("Pending"))
		Expect(out).To(ContainSubstring(position(nsA, "a2") + " in ClusterQueue " + cq))
		Expect(out).To(ContainSubstring("1 in LocalQueue team (of 2 pending there)"))
		Expect(out).To(ContainSubstring("InsufficientQuota"))
		Expect(out).To(ContainSubstring("flavor " + cq + ": needs 1 nvidia.com/gpu, 0 available"))
		Expect(out).To(ContainSubstring("preemption: not possible"))
	})

	It("explains an admitted job: its flavor", func() {
		out, _, err := berth("", "--as", "alice", "explain", "job", "running", "-n", nsA)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("Admitted: it holds quota of ClusterQueue " + cq))
		Expect(out).To(ContainSubstring("pod set main: 1 pod on flavor " + cq + " (nvidia.com/gpu)"))
	})

	It("says clearly when there is nothing to explain, or the kind is wrong", func() {
		_, _, err := berth("", "explain", "job/missing", "-n", nsA)
		Expect(err).To(MatchError(ContainSubstring("job/missing in namespace " + nsA + " has no Workload")))
		_, _, err = berth("", "explain", "svc/web", "-n", nsA)
		Expect(err).To(MatchError(ContainSubstring("use deployment, job, jobset, leaderworkerset, lws, mpijob, podgroup, pytorchjob, raycluster, rayjob, statefulset, trainjob, workload")))
		_, _, err = berth("", "explain", "deployment/web", "-n", nsA)
		Expect(err).To(MatchError(ContainSubstring("no Deployment web in namespace " + nsA)))
	})

	It("lists the queues with berth's counts and the fair-share standing", func() {
		Eventually(func(g Gomega) {
			out, _, err := berth("", "list", "localqueues", "-n", nsA)
			g.Expect(err).NotTo(HaveOccurred())
			rows := tableRows(out)
			g.Expect(rows).To(HaveLen(1), out)
			g.Expect(rows[0]).To(And(HaveKeyWithValue("CLUSTERQUEUE", cq), HaveKeyWithValue("PENDING", "2"),
				HaveKeyWithValue("ADMITTED", "1"), HaveKeyWithValue("STOP", "None")), out)
		}).WithTimeout(listTimeout).WithPolling(listPoll).Should(Succeed())
		Eventually(func(g Gomega) {
			out, errOut, err := berth("", "list", "clusterqueues")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(errOut).To(BeEmpty())
			var row map[string]string
			for _, r := range tableRows(out) {
				if r["NAME"] == cq {
					row = r
				}
			}
			g.Expect(row).To(And(HaveKeyWithValue("PENDING", "4"), HaveKeyWithValue("ADMITTED", "1"),
				HaveKeyWithValue("WEIGHTED-SHARE", "0"), HaveKeyWithValue("CQS-AHEAD", "0"), HaveKeyWithValue("STATUS", "Active")), out)
		}).WithTimeout(listTimeout).WithPolling(listPoll).Should(Succeed())
	})
})
