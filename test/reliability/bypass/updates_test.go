package bypass_test

import (
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// queuedJob creates a 4-GPU Job in a namespace whose quota is used up by
// an admitted one, and waits for its Workload: it is queued, not admitted.
func queuedJob(ctx SpecContext, ns string) (*batchv1.Job, *berthv1.Workload) {
	running := gpuJob(ns, "running")
	Expect(env.Client.Create(ctx, running)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(workloadOf(ctx, g, ns, string(running.UID)).Status.Admission).NotTo(BeNil())
	}, timeout, interval).Should(Succeed())
	job := gpuJob(ns, "queued")
	Expect(env.Client.Create(ctx, job)).To(Succeed())
	var wl *berthv1.Workload
	Eventually(func(g Gomega) { wl = workloadOf(ctx, g, ns, string(job.UID)) }, timeout, interval).Should(Succeed())
	Expect(wl.Status.Admission).To(BeNil())
	return job, wl
}

// jobEdit changes a queued Job as a tenant would.
type jobEdit struct {
	edit func(*batchv1.Job)
	want string
}

var _ = Describe("edits of queued jobs", func() {
	DescribeTable("are refused",
		func(ctx SpecContext, e jobEdit) {
			ns := newTeam(ctx, "4")
			job, wl := queuedJob(ctx, ns)
			c := tenant(ctx, ns)
			fresh := job.DeepCopy()
			err := update(ctx, c, fresh, e.edit)
			Expect(err).To(MatchError(ContainSubstring(e.want)))
			Expect(err).To(MatchError(ContainSubstring(wl.Name)))
			Expect(c.Get(ctx, client.ObjectKeyFromObject(job), fresh)).To(Succeed())
			Expect(fresh.Spec.Suspend).To(HaveValue(BeTrue()))
			expectNoPodOutsideQuota(ctx, ns)
		},
		Entry("unsuspending it before admission (a GitOps re-apply of suspend: false)", jobEdit{
			edit: func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(false) },
			want: `spec.suspend: Forbidden: berth holds this job until its workload job-queued-`}),
		Entry("moving it to another queue", jobEdit{
			edit: func(j *batchv1.Job) { j.Labels[berthv1.QueueNameLabel] = "elsewhere" },
			want: `metadata.labels[berth.dev/queue-name]: Forbidden: cannot be changed while berth holds workload job-queued-`}),
		Entry("removing its queue label", jobEdit{
			edit: func(j *batchv1.Job) { delete(j.Labels, berthv1.QueueNameLabel) },
			want: `metadata.labels[berth.dev/queue-name]: Forbidden: cannot be removed while berth holds workload job-queued-`}),
	)

	It("refuses removing the queue label of an admitted, running Job", func(ctx SpecContext) {
		ns := newTeam(ctx, "4")
		job := gpuJob(ns, "running")
		Expect(env.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
			g.Expect(job.Spec.Suspend).To(HaveValue(BeFalse()))
		}, timeout, interval).Should(Succeed())
		Expect(update(ctx, tenant(ctx, ns), job, func(j *batchv1.Job) { delete(j.Labels, berthv1.QueueNameLabel) })).To(MatchError(ContainSubstring(
			`metadata.labels[berth.dev/queue-name]: Forbidden: cannot be removed while berth holds workload job-running-`)))
		expectNoPodOutsideQuota(ctx, ns)
	})

	It("refuses removing the admission gate of a queued pod group", func(ctx SpecContext) {
		ns := newTeam(ctx, "4")
		_, _ = queuedJob(ctx, ns) // uses up the quota
		p := groupPod(ns, "eval")
		Expect(env.Client.Create(ctx, p)).To(Succeed())
		c := tenant(ctx, ns)
		Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
			g.Expect(p.Spec.SchedulingGates).To(ContainElement(corev1.PodSchedulingGate{Name: berthv1.AdmissionGate}))
			p.Spec.SchedulingGates = slices.DeleteFunc(p.Spec.SchedulingGates, func(sg corev1.PodSchedulingGate) bool {
				return sg.Name == berthv1.AdmissionGate
			})
			g.Expect(c.Update(ctx, p)).To(MatchError(ContainSubstring(
				`spec.schedulingGates: Forbidden: the berth.dev/admission gate is removed by berth when the pod's gang is admitted, not before: leave it`)))
		}, timeout, interval).Should(Succeed())
		// Removing the queue label first, to slip the gate past the
		// webhook in a second edit, is refused too.
		Expect(update(ctx, c, p, func(p *corev1.Pod) { delete(p.Labels, berthv1.QueueNameLabel) })).To(MatchError(ContainSubstring(
			`metadata.labels[berth.dev/queue-name]: Forbidden: cannot be changed or removed on a queued pod: delete the pod and create it again`)))
		expectNoPodOutsideQuota(ctx, ns)
	})
})

var _ = Describe("neutralised by berth", func() {
	It("queues a Job whose forged controller is a JobSet berth does not queue on its own", func(ctx SpecContext) {
		ns := newTeam(ctx, "4")
		_, _ = queuedJob(ctx, ns) // uses up the quota
		js := &jobsetv1.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "decoy"},
			Spec: jobsetv1.JobSetSpec{Suspend: ptr.To(true), ReplicatedJobs: []jobsetv1.ReplicatedJob{{Name: "w", Replicas: 1,
				Template: batchv1.JobTemplateSpec{Spec: gpuJob(ns, "t").Spec}}}}}
		Expect(env.Client.Create(ctx, js)).To(Succeed())
		job := gpuJob(ns, "child")
		job.OwnerReferences = []metav1.OwnerReference{{APIVersion: jobsetv1.GroupVersion.String(), Kind: "JobSet",
			Name: js.Name, UID: js.UID, Controller: ptr.To(true)}}
		Expect(env.Client.Create(ctx, job)).To(Succeed())
		// It is a gang of its own: its Workload waits for quota.
		Eventually(func(g Gomega) {
			g.Expect(workloadOf(ctx, g, ns, string(job.UID)).Status.Admission).To(BeNil())
		}, timeout, interval).Should(Succeed())
		Expect(update(ctx, tenant(ctx, ns), job, func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(false) })).To(MatchError(ContainSubstring(`spec.suspend: Forbidden: berth holds this job until its workload job-child-`)))
		expectNoPodOutsideQuota(ctx, ns)
	})

	It("admits no queued workload of a namespace relabelled out of its ClusterQueue, and keeps admitted ones running", func(ctx SpecContext) {
		ns := newTeam(ctx, "4")
		queued, _ := queuedJob(ctx, ns)
		runningPods := func(g Gomega) []corev1.Pod {
			pods := &corev1.PodList{}
			g.Expect(env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{batchv1.JobNameLabel: "running"})).To(Succeed())
			return slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return p.Spec.NodeName == "" })
		}
		Eventually(func(g Gomega) { g.Expect(runningPods(g)).To(HaveLen(1)) }, timeout, interval).Should(Succeed())
		nsObj := &corev1.Namespace{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: ns}, nsObj)).To(Succeed())
		nsObj.Labels["team"] = "moved"
		Expect(env.Client.Update(ctx, nsObj)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := workloadOf(ctx, g, ns, string(queued.UID))
			g.Expect(wl.Status.Conditions).To(ContainElement(And(
				HaveField("Type", berthv1.ConditionQuotaReserved), HaveField("Reason", string(berthv1.ReasonNamespaceNotAllowed)))))
		}, timeout, interval).Should(Succeed())
		// The admitted Job keeps running on the quota it was given.
		Consistently(func(g Gomega) { g.Expect(runningPods(g)).To(HaveLen(1)) }, quiet, interval).Should(Succeed())
		// Its quota freed, the queued one is still not admitted.
		Expect(env.Client.Delete(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "running"}},
			client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(workloadOf(ctx, g, ns, string(queued.UID)).Status.Admission).To(BeNil())
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(queued), queued)).To(Succeed())
			g.Expect(queued.Spec.Suspend).To(HaveValue(BeTrue()))
		}, quiet, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(events(ctx, g, ns, queued.Name)).To(ContainElement(ContainSubstring(
				"Unqueueable: ClusterQueue \"" + ns + "\" does not accept workloads from namespace \"" + ns + "\": its administrator")))
		}, timeout, interval).Should(Succeed())
		expectNoPodOutsideQuota(ctx, ns)
	})
})
