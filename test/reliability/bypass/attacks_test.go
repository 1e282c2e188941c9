package bypass_test

import (
	"context"
	"strconv"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/jobsuite"
)

// editor is a client of "mallory", a user bound only to the built-in edit
// role in ns: what the install's tenant roles give a team member, and no
// more.
func editor(ctx context.Context, ns string) client.Client {
	c, err := env.Tenant(ctx, ns, "mallory", "edit")
	Expect(err).NotTo(HaveOccurred())
	return c
}

// members are pods of pod group group, each of gpus GPUs, that all say
// the group has count pods; names are group-<first>, group-<first+1>, ...
func members(ns, group, count, gpus string, first, n int) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, n)
	for i := first; i < first+n; i++ {
		out = append(out, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: group + "-" + strconv.Itoa(i),
				Labels:      map[string]string{berthv1.QueueNameLabel: queue, berthv1.PodGroupLabel: group},
				Annotations: map[string]string{berthv1.PodGroupTotalCountAnnotation: count},
			},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
				Name: "main", Image: "registry.invalid/serve:latest", Resources: gpuRequests(gpus)}}},
		})
	}
	return out
}

// runningGroup creates, as c, a pod group name of n one-GPU members, and
// waits until every member is bound.
func runningGroup(ctx context.Context, c client.Client, ns, name string, n int) []*corev1.Pod {
	group := members(ns, name, strconv.Itoa(n), "1", 0, n)
	for _, p := range group {
		Expect(c.Create(ctx, p)).To(Succeed())
	}
	bound(ctx, group...)
	return group
}

// gpuRequests asks for n GPUs.
func gpuRequests(n string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{builders.GPU: resource.MustParse(n)},
		Limits:   corev1.ResourceList{builders.GPU: resource.MustParse(n)},
	}
}

// bound waits until every one of the pods is bound to a node.
func bound(ctx context.Context, ps ...*corev1.Pod) {
	Eventually(func(g Gomega) {
		for _, p := range ps {
			got := &corev1.Pod{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
			g.Expect(got.Spec.NodeName).NotTo(BeEmpty(), "pod %s is bound", p.Name)
		}
	}, timeout, interval).Should(Succeed())
}

// neverBound checks for a while that the pods matching labels in ns exist
// (at least one) and none is bound.
func neverBound(ctx context.Context, ns string, labels map[string]string) {
	list := func(g Gomega) []corev1.Pod {
		pods := &corev1.PodList{}
		g.Expect(env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(labels))).To(Succeed())
		return pods.Items
	}
	Eventually(func(g Gomega) { g.Expect(list(g)).NotTo(BeEmpty()) }, timeout, interval).Should(Succeed())
	Consistently(func(g Gomega) {
		for _, p := range list(g) {
			g.Expect(p.Spec.NodeName).To(BeEmpty(), "pod %s is not bound", p.Name)
		}
	}, quiet, interval).Should(Succeed())
}

var _ = Describe("a tenant with the edit role", func() {
	It("cannot run more of an admitted pod group than was admitted", func(ctx SpecContext) {
		ns := newTeam(ctx, "2")
		mallory := editor(ctx, ns)
		group := runningGroup(ctx, mallory, ns, "g", 2)

		By("adding three members of 4 GPUs each to the running group of two")
		extras := members(ns, "g", "2", "4", 2, 3)
		for _, p := range extras {
			p.Labels["extra"] = "true"
			Expect(mallory.Create(ctx, p)).To(Succeed())
		}
		// Each held pod is told on itself: one series per pod, each with its
		// own note.
		Eventually(func(g Gomega) {
			for _, p := range extras {
				g.Expect(events(ctx, g, ns, p.Name)).To(ContainElement(And(HavePrefix("PodHeld:"), ContainSubstring(p.Name))))
			}
		}, timeout, interval).Should(Succeed())
		neverBound(ctx, ns, map[string]string{"extra": "true"})

		By("taking a running member out of the count, by removing or changing the labels berth counts it by")
		uncounted := ContainSubstring("Forbidden: berth sets it when it releases the pod and counts the pods a gang runs by it")
		for _, change := range []func(*corev1.Pod){
			func(p *corev1.Pod) { delete(p.Labels, berthv1.WorkloadLabel) },
			func(p *corev1.Pod) { p.Labels[berthv1.WorkloadLabel] = "other" },
			func(p *corev1.Pod) { delete(p.Labels, berthv1.PodSetLabel) },
			func(p *corev1.Pod) { p.Labels[berthv1.PodSetLabel] = "other" },
		} {
			Expect(update(ctx, mallory, &corev1.Pod{ObjectMeta: group[0].ObjectMeta}, change)).To(MatchError(uncounted))
		}

		By("copying a member's berth labels onto an extra pod and removing its gate")
		member := &corev1.Pod{}
		Expect(mallory.Get(ctx, client.ObjectKeyFromObject(group[0]), member)).To(Succeed())
		Expect(update(ctx, mallory, extras[0], func(extra *corev1.Pod) {
			extra.Labels[berthv1.WorkloadLabel] = member.Labels[berthv1.WorkloadLabel]
			extra.Labels[berthv1.PodSetLabel] = member.Labels[berthv1.PodSetLabel]
			extra.Spec.SchedulingGates = nil
		})).To(MatchError(And(ContainSubstring("the berth.dev/admission gate is removed by berth"),
			ContainSubstring("the pod requests 4 of nvidia.com/gpu"))), "refused as misshapen before it is counted")

		By("creating a pod of its own, ungated and without the queue label, that carries a member's berth labels")
		// Without the queue label no gate is added and berth's cache, which
		// holds only queued pods, would not count it among the group's.
		forged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged", Labels: map[string]string{
			berthv1.PodGroupLabel: member.Labels[berthv1.PodGroupLabel], berthv1.WorkloadLabel: member.Labels[berthv1.WorkloadLabel],
			berthv1.PodSetLabel: member.Labels[berthv1.PodSetLabel], "extra": "true"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/x:latest", Resources: gpuRequests("4")}}}}
		Expect(mallory.Create(ctx, forged)).To(MatchError(ContainSubstring("a pod created with them and without a controller")))
		expectNoPodOutsideQuota(ctx, ns)
	})

	It("takes a free place of an admitted pod group only with a queued pod shaped like the group's, and labels no other pod into it", func(ctx SpecContext) {
		ns := newTeam(ctx, "2")
		mallory := editor(ctx, ns)
		group := runningGroup(ctx, mallory, ns, "free", 2)
		member := &corev1.Pod{}
		Expect(mallory.Get(ctx, client.ObjectKeyFromObject(group[0]), member)).To(Succeed())
		uid, set := member.Labels[berthv1.WorkloadLabel], member.Labels[berthv1.PodSetLabel]
		release := func(p *corev1.Pod) {
			p.Labels[berthv1.WorkloadLabel], p.Labels[berthv1.PodSetLabel] = uid, set
			p.Spec.SchedulingGates = nil
		}

		By("removing the gate of a larger member itself, with the group's labels: judged by its shape before it is counted")
		larger := members(ns, "free", "2", "4", 5, 1)[0]
		Expect(mallory.Create(ctx, larger)).To(Succeed())
		Eventually(func(g Gomega) []string { return events(ctx, g, ns, larger.Name) }, timeout, interval).
			Should(ContainElement(And(HavePrefix("PodHeld:"), ContainSubstring(larger.Name))))
		Expect(update(ctx, mallory, larger, release)).To(MatchError(ContainSubstring("the pod requests 4 of nvidia.com/gpu, and each pod of pod set")))
		Expect(mallory.Delete(ctx, larger, client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(larger), &corev1.Pod{}))
		}, timeout, interval).Should(BeTrue())

		By("freeing a place, and releasing into it a pod of the group's shape that berth never queued")
		Expect(mallory.Delete(ctx, group[1], client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(group[1]), &corev1.Pod{}))
		}, timeout, interval).Should(BeTrue())
		// The group's label and berth's gate, put there by the tenant, and
		// no queue label: berth's count of the group, which reads queued
		// pods, would never see it run.
		unqueued := members(ns, "free", "2", "1", 6, 1)[0]
		delete(unqueued.Labels, berthv1.QueueNameLabel)
		unqueued.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: berthv1.AdmissionGate}}
		unqueued.Spec.NodeSelector = member.Spec.NodeSelector
		Expect(mallory.Create(ctx, unqueued)).To(Succeed())
		Expect(update(ctx, mallory, unqueued, release)).To(MatchError(ContainSubstring("berth releases into a gang only the pods it queued")))

		By("labelling a running member as placed in a topology domain, which would hide it from berth's count of free capacity")
		Expect(update(ctx, mallory, member, func(p *corev1.Pod) { p.Labels[berthv1.PlacementLabel] = uid })).
			To(MatchError(ContainSubstring("metadata.labels[berth.dev/placement]: Forbidden: berth sets it when it releases the pod, in the same write that removes its gate")))
		By("labelling a pod of its own into the group without releasing it")
		held := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held"},
			Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: "example.com/hold"}},
				Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/x:latest", Resources: gpuRequests("1")}}}}
		Expect(mallory.Create(ctx, held)).To(Succeed())
		Expect(update(ctx, mallory, held, func(p *corev1.Pod) {
			p.Labels = map[string]string{berthv1.WorkloadLabel: uid, berthv1.PodSetLabel: set}
		})).To(MatchError(ContainSubstring("metadata.labels[berth.dev/workload]: Forbidden: berth sets it when it releases the pod, in the same write")))
		expectNoPodOutsideQuota(ctx, ns)
	})

	It("stops a running pod group whose members it makes disagree, rather than release more", func(ctx SpecContext) {
		ns := newTeam(ctx, "2")
		mallory := editor(ctx, ns)
		group := runningGroup(ctx, mallory, ns, "split", 2)
		Expect(update(ctx, mallory, group[1], func(p *corev1.Pod) { p.Annotations[berthv1.PodGroupTotalCountAnnotation] = "5" })).To(Succeed())
		Eventually(func(g Gomega) []string { return events(ctx, g, ns, group[0].Name) }, timeout, interval).
			Should(ContainElement(And(HavePrefix("InvalidJob:"), ContainSubstring("disagree"))))
		for _, p := range group {
			Eventually(func() bool {
				return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{}))
			}, timeout, interval).Should(BeTrue(), "running member %s is stopped", p.Name)
		}
		expectNoPodOutsideQuota(ctx, ns)
	})

	It("cannot pass its own StatefulSet's pods off as a LeaderWorkerSet's", func(ctx SpecContext) {
		ns := newTeam(ctx, "8")
		mallory := editor(ctx, ns)
		// edit does not grant LeaderWorkerSets: the platform made this one.
		set := &lwsv1.LeaderWorkerSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "serve", Labels: map[string]string{berthv1.QueueNameLabel: queue}},
			Spec: lwsv1.LeaderWorkerSetSpec{
				StartupPolicy: lwsv1.LeaderCreatedStartupPolicy, Replicas: ptr.To[int32](1),
				RolloutStrategy: lwsv1.RolloutStrategy{Type: lwsv1.RollingUpdateStrategyType},
				LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{Size: ptr.To[int32](2), WorkerTemplate: corev1.PodTemplateSpec{
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "serve", Image: "registry.invalid/serve:latest", Resources: gpuRequests("4")}}}}},
			},
		}
		Expect(env.Client.Create(ctx, set)).To(Succeed())
		Eventually(func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{lwsv1.SetNameLabelKey: set.Name})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(2), "the operator made the replica's leader and worker")
			for _, p := range pods.Items {
				g.Expect(p.Spec.NodeName).NotTo(BeEmpty(), "pod %s runs", p.Name)
			}
		}, timeout, interval).Should(Succeed())

		By("creating a StatefulSet whose pods carry the set's labels, as a second replica would")
		labels := map[string]string{"app": "look-alike", berthv1.QueueNameLabel: queue, lwsv1.SetNameLabelKey: set.Name,
			lwsv1.GroupIndexLabelKey: "0", lwsv1.WorkerIndexLabelKey: "1"}
		sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "look-alike"},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), ServiceName: "look-alike",
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "look-alike"}},
				// The size annotation is what the LeaderWorkerSet operator's
				// pod webhook needs to accept the pods as the set's.
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels,
					Annotations: map[string]string{lwsv1.SizeAnnotationKey: "2"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "serve", Image: "registry.invalid/serve:latest", Resources: gpuRequests("4")}}}}}}
		Expect(mallory.Create(ctx, sts)).To(Succeed())
		neverBound(ctx, ns, map[string]string{"app": "look-alike"})
		Eventually(func(g Gomega) []string { return events(ctx, g, ns, "look-alike-0") }, timeout, interval).
			Should(ContainElement(And(HavePrefix("PodHeld:"), ContainSubstring("look-alike-0"),
				ContainSubstring("its controller is not one of the set's StatefulSets"))))

		By("releasing a look-alike pod itself, labelled as a member of the admitted replica")
		wls, err := jobsuite.WorkloadsOf(ctx, env.Client, set)
		Expect(err).NotTo(HaveOccurred())
		Expect(wls).To(HaveLen(1))
		Expect(update(ctx, mallory, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "look-alike-0"}}, func(p *corev1.Pod) {
			p.Labels[berthv1.WorkloadLabel], p.Labels[berthv1.PodSetLabel] = string(wls[0].UID), wls[0].Spec.PodSets[len(wls[0].Spec.PodSets)-1].Name
			p.Spec.SchedulingGates = nil
		})).To(MatchError(ContainSubstring("whose controller is not one of the set's StatefulSets")))

		By("keeping a look-alike pod in deletion with a finalizer: berth stops naming it, and it still never runs")
		// berth leaves pods being deleted out of what it reports held; a
		// tenant who keeps one there must gain nothing but silence.
		const hold = "example.com/hold"
		lookAlike := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "look-alike-0"}}
		// heldNames are the PodsHeld messages of the set's Workloads. The
		// look-alike StatefulSet is OrderedReady: its second pod waits for
		// the first, gated, to be Ready, so only look-alike-0 exists.
		heldNames := func(g Gomega) []string {
			wls, err := jobsuite.WorkloadsOf(ctx, env.Client, set)
			g.Expect(err).NotTo(HaveOccurred())
			var held []string
			for _, wl := range wls {
				if c := meta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionPodsHeld); c != nil {
					held = append(held, c.Message)
				}
			}
			return held
		}
		Eventually(heldNames, timeout, interval).Should(ContainElement(ContainSubstring("look-alike-0")))
		Expect(update(ctx, mallory, lookAlike, func(p *corev1.Pod) { p.Finalizers = append(p.Finalizers, hold) })).To(Succeed())
		DeferCleanup(func(ctx SpecContext) error {
			return client.IgnoreNotFound(update(ctx, env.Client, lookAlike, func(p *corev1.Pod) { p.Finalizers = nil }))
		})
		Expect(mallory.Delete(ctx, lookAlike)).To(Succeed())
		Eventually(heldNames, timeout, interval).ShouldNot(ContainElement(ContainSubstring("look-alike-0")),
			"the pod being deleted is no longer named")
		Consistently(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(lookAlike), lookAlike)).To(Succeed())
			g.Expect(lookAlike.DeletionTimestamp).NotTo(BeNil())
			g.Expect(lookAlike.Spec.NodeName).To(BeEmpty(), "the terminating look-alike is not bound")
			g.Expect(lookAlike.Spec.SchedulingGates).To(ContainElement(corev1.PodSchedulingGate{Name: berthv1.AdmissionGate}))
		}, quiet, interval).Should(Succeed())
		expectNoPodOutsideQuota(ctx, ns)
	})

	It("cannot run a Job as the child of an admitted JobSet", func(ctx SpecContext) {
		ns := newTeam(ctx, "4")
		mallory := editor(ctx, ns)
		// edit does not grant JobSets: the platform made this one.
		js := &jobsetv1.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "train", Labels: map[string]string{berthv1.QueueNameLabel: queue}},
			Spec: jobsetv1.JobSetSpec{ReplicatedJobs: []jobsetv1.ReplicatedJob{{Name: "workers", Replicas: 1,
				Template: batchv1.JobTemplateSpec{Spec: gpuJob(ns, "t").Spec}}}}}
		js.Spec.ReplicatedJobs[0].Template.Spec.Suspend = nil
		Expect(env.Client.Create(ctx, js)).To(Succeed())
		Eventually(func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{jobsetv1.JobSetNameKey: js.Name})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(1))
			g.Expect(pods.Items[0].Spec.NodeName).NotTo(BeEmpty())
		}, timeout, interval).Should(Succeed())

		By("creating a Job labelled and owned as one of the JobSet's children, past its replicas")
		forged := gpuJob(ns, "train-workers-5")
		forged.Labels[jobsetv1.JobSetNameKey] = js.Name
		forged.Labels[jobsetv1.ReplicatedJobNameKey] = "workers"
		forged.Labels[jobsetv1.JobIndexKey] = "5"
		forged.OwnerReferences = []metav1.OwnerReference{{APIVersion: jobsetv1.SchemeGroupVersion.String(), Kind: "JobSet",
			Name: js.Name, UID: js.UID, Controller: ptr.To(true)}}
		Expect(mallory.Create(ctx, forged)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(workloadOf(ctx, g, ns, string(forged.UID)).Status.Admission).To(BeNil(), "it is a gang of its own and waits for quota")
		}, timeout, interval).Should(Succeed())
		Expect(update(ctx, mallory, forged, func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(false) })).To(MatchError(ContainSubstring("spec.suspend: Forbidden: berth holds this job until its workload")))
		expectNoPodOutsideQuota(ctx, ns)
	})

	It("cannot choose whose quota its namespace spends", func(ctx SpecContext) {
		ns, other := newTeam(ctx, "4"), newTeam(ctx, "4")
		mallory := editor(ctx, ns)
		lq := builders.LocalQueue(ns, "borrowed", other)
		Expect(mallory.Create(ctx, lq)).To(Satisfy(apierrors.IsForbidden), "creating a LocalQueue is the platform team's")

		edit := func(change func(*berthv1.LocalQueue)) error {
			lq := &berthv1.LocalQueue{}
			if err := mallory.Get(ctx, client.ObjectKey{Namespace: ns, Name: queue}, lq); err != nil {
				return err
			}
			base := lq.DeepCopy()
			change(lq)
			return mallory.Patch(ctx, lq, client.MergeFrom(base))
		}
		Expect(edit(func(lq *berthv1.LocalQueue) { lq.Spec.ClusterQueue = other })).
			To(MatchError(ContainSubstring("clusterQueue is immutable")), "nobody moves a LocalQueue")
		w := resource.MustParse("100")
		Eventually(func() error {
			return edit(func(lq *berthv1.LocalQueue) { lq.Spec.FairSharing = &berthv1.LocalQueueFairSharing{Weight: &w} })
		}, timeout, interval).Should(MatchError(ContainSubstring("a tenant cannot change a LocalQueue's fairSharing weight")))
		Expect(edit(func(lq *berthv1.LocalQueue) { lq.Spec.StopPolicy = berthv1.StopPolicyHold })).To(Succeed(), "it stops its own queue")
		Expect(edit(func(lq *berthv1.LocalQueue) { lq.Spec.StopPolicy = berthv1.StopPolicyNone })).To(Succeed(), "and resumes it")
	})

	It("cannot change what a Workload asks for or strip berth's finalizer; berth restores a lost one", func(ctx SpecContext) {
		ns := newTeam(ctx, "4")
		mallory := editor(ctx, ns)
		job := gpuJob(ns, "train")
		Expect(mallory.Create(ctx, job)).To(Succeed())
		var wl *berthv1.Workload
		Eventually(func(g Gomega) {
			wl = workloadOf(ctx, g, ns, string(job.UID))
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(wl.Finalizers).To(ContainElement(berthv1.WorkloadFinalizer))
		}, timeout, interval).Should(Succeed())
		edit := func(c client.Client, change func(*berthv1.Workload)) error {
			fresh := &berthv1.Workload{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(wl), fresh); err != nil {
				return err
			}
			base := fresh.DeepCopy()
			change(fresh)
			return c.Patch(ctx, fresh, client.MergeFrom(base))
		}
		Eventually(func() error {
			return edit(mallory, func(w *berthv1.Workload) { w.Spec.PodSets[0].Count = 4 })
		}, timeout, interval).Should(MatchError(ContainSubstring("a tenant may change only spec.active of a Workload")))
		Expect(edit(mallory, func(w *berthv1.Workload) { w.Finalizers = nil })).
			To(MatchError(ContainSubstring("cannot remove berth's finalizer")))
		By("cutting the Workload loose from its Job, which berth stops when the Workload is preempted")
		Expect(edit(mallory, func(w *berthv1.Workload) { w.OwnerReferences[0].Controller = ptr.To(false) })).
			To(MatchError(ContainSubstring("a tenant cannot change a Workload's ownerReferences")))
		Expect(edit(mallory, func(w *berthv1.Workload) { w.OwnerReferences = nil })).
			To(MatchError(ContainSubstring("a tenant cannot change a Workload's ownerReferences")))
		Expect(edit(mallory, func(w *berthv1.Workload) {
			if w.Labels == nil {
				w.Labels = map[string]string{}
			}
			w.Labels[berthv1.JobKeyLabel] = "other"
		})).
			To(MatchError(ContainSubstring("a tenant cannot change or remove a Workload's berth.dev/job-key label")))

		By("an administrator strips the finalizer while the Job runs: berth puts it back")
		Expect(edit(env.Client, func(w *berthv1.Workload) { w.Finalizers = nil })).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(workloadOf(ctx, g, ns, string(job.UID)).Finalizers).To(ContainElement(berthv1.WorkloadFinalizer))
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) []string { return events(ctx, g, ns, job.Name) }, timeout, interval).
			Should(ContainElement(HavePrefix("FinalizerRestored:")))
		expectNoPodOutsideQuota(ctx, ns)
	})

	It("cannot plant the objects berth books capacity with", func(ctx SpecContext) {
		ns := newTeam(ctx, "4")
		mallory := editor(ctx, ns)
		// berth's own are named after the Workload and the attempt; a
		// tenant with edit may create neither a PodTemplate nor a
		// ProvisioningRequest (the cluster-autoscaler's CRD grants edit
		// nothing). (Where a platform grants
		// them, berth uses only the ones it owns: test/integration/provisioning.)
		tmpl := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job-train-abcde-1-main"},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "tenant", Resources: gpuRequests("64")}}}}}
		Expect(mallory.Create(ctx, tmpl)).To(Satisfy(apierrors.IsForbidden))
	})
})
