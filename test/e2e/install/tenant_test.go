package install_test

import (
	"context"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/framework"
	"github.com/berth-dev/berth/test/jobsuite"
)

// expectTenantBoundary makes, as a user bound only to the built-in edit
// role in team-a, the edits of berth's objects the install's tenant roles
// and policies must refuse, and the ones they must allow: stop and resume
// of a LocalQueue, deactivating a Workload.
func expectTenantBoundary(ctx context.Context) {
	By("editing LocalQueues and Workloads as a tenant with the edit role")
	Eventually(func(g Gomega) {
		edit := &rbacv1.ClusterRole{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "edit"}, edit)).To(Succeed())
		g.Expect(edit.Rules).To(ContainElement(And(HaveField("Resources", ContainElement("localqueues")), HaveField("Verbs", ContainElement("patch")))))
	}).WithContext(ctx).WithTimeout(timeout).WithPolling(interval).Should(Succeed(), "edit aggregates the install's tenant editor role")
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "editor-edit"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "editor", APIGroup: rbacv1.GroupName}},
		RoleRef:  rbacv1.RoleRef{Kind: "ClusterRole", Name: "edit", APIGroup: rbacv1.GroupName}}
	Expect(k8s.Create(ctx, binding)).To(Succeed())
	cfg := rest.CopyConfig(plane.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "editor", Groups: []string{"system:authenticated"}}
	editor, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	Expect(err).NotTo(HaveOccurred())

	own := &berthv1.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "mine"}, Spec: berthv1.LocalQueueSpec{ClusterQueue: "team-b"}}
	Eventually(func() error { return editor.Create(ctx, own) }).WithContext(ctx).WithTimeout(timeout).WithPolling(interval).
		Should(Satisfy(apierrors.IsForbidden), "creating a LocalQueue, and so choosing whose quota to spend, is the platform team's")
	expectLocalQueueEdits(ctx, editor)
	expectWorkloadEdits(ctx, editor)
	Expect(k8s.Delete(ctx, binding)).To(Succeed())
}

// expectLocalQueueEdits: a tenant stops and resumes its LocalQueue, and
// cannot move it (nobody can) or change its weight.
func expectLocalQueueEdits(ctx context.Context, editor client.Client) {
	edit := func(change func(*berthv1.LocalQueue)) error {
		lq := &berthv1.LocalQueue{}
		if err := editor.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "training"}, lq); err != nil {
			return err
		}
		orig := lq.DeepCopy()
		change(lq)
		return editor.Patch(ctx, lq, client.MergeFrom(orig))
	}
	Expect(edit(func(lq *berthv1.LocalQueue) { lq.Spec.StopPolicy = berthv1.StopPolicyHold })).To(Succeed(), "a tenant stops its queue")
	Expect(edit(func(lq *berthv1.LocalQueue) { lq.Spec.StopPolicy = berthv1.StopPolicyNone })).To(Succeed(), "and resumes it")
	err := edit(func(lq *berthv1.LocalQueue) { lq.Spec.ClusterQueue = "team-b" })
	Expect(err).To(MatchError(ContainSubstring("clusterQueue is immutable")), "nobody moves a LocalQueue")
	w := resource.MustParse("100")
	err = edit(func(lq *berthv1.LocalQueue) { lq.Spec.FairSharing = &berthv1.LocalQueueFairSharing{Weight: &w} })
	Expect(err).To(MatchError(ContainSubstring("cannot change a LocalQueue's fairSharing weight")))
}

// expectWorkloadEdits: a tenant deactivates a waiting Workload, and cannot
// change its pod sets or strip berth's finalizer.
func expectWorkloadEdits(ctx context.Context, editor client.Client) {
	data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "config", "samples", "job.yaml"))
	Expect(err).NotTo(HaveOccurred())
	objs, err := decode(data)
	Expect(err).NotTo(HaveOccurred())
	job := findTyped(objs, "Job", &batchv1.Job{})
	// More GPUs than team-a's queue may ever have: it waits, with its
	// Workload and berth's finalizer.
	job.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceName("nvidia.com/gpu")] = resource.MustParse("4096")
	job.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceName("nvidia.com/gpu")] = resource.MustParse("4096")
	Expect(k8s.Create(ctx, job)).To(Succeed())
	var wl berthv1.Workload
	Eventually(func(g Gomega) {
		wls, err := jobsuite.WorkloadsOf(ctx, k8s, job)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(wls).To(HaveLen(1))
		g.Expect(wls[0].Spec.PodSets[0].Requests.Name("nvidia.com/gpu", "").String()).To(Equal("4096"))
		wl = wls[0]
	}).WithContext(ctx).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	Expect(wl.Finalizers).To(ContainElement(berthv1.WorkloadFinalizer))

	edit := func(change func(*berthv1.Workload)) error {
		fresh := &berthv1.Workload{}
		if err := editor.Get(ctx, client.ObjectKeyFromObject(&wl), fresh); err != nil {
			return err
		}
		base := fresh.DeepCopy()
		change(fresh)
		return editor.Patch(ctx, fresh, client.MergeFrom(base))
	}
	err = edit(func(w *berthv1.Workload) { w.Spec.PodSets[0].Count = 1 })
	Expect(err).To(MatchError(ContainSubstring("a tenant may change only spec.active of a Workload")))
	err = edit(func(w *berthv1.Workload) { w.Finalizers = nil })
	Expect(err).To(MatchError(ContainSubstring("cannot remove berth's finalizer")))
	Expect(edit(func(w *berthv1.Workload) { w.Spec.Active = ptr.To(false) })).To(Succeed(), "a tenant deactivates its Workload")
	Expect(k8s.Delete(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name}},
		client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
}
