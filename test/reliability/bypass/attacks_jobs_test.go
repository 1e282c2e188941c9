package bypass_test

import (
	"context"
	"maps"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/controlplane"
)

// running counts the bound, unfinished pods of ns that carry the UID of
// Workload uid: what runs on its admission.
func running(ctx context.Context, g Gomega, ns, uid string) []string {
	pods := &corev1.PodList{}
	g.Expect(env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{berthv1.WorkloadLabel: uid})).To(Succeed())
	var out []string
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out = append(out, p.Name)
		}
	}
	return out
}

// admittedPods is how many pods the specs' jobs are admitted for.
const admittedPods = 2

// runsAdmitted waits until admittedPods pods run on Workload uid's
// admission and checks for a while that no more do.
func runsAdmitted(ctx context.Context, ns, uid string) {
	Eventually(func(g Gomega) []string { return running(ctx, g, ns, uid) }, timeout, interval).Should(HaveLen(admittedPods))
	Consistently(func(g Gomega) []string { return running(ctx, g, ns, uid) }, quiet, interval).Should(HaveLen(admittedPods))
}

// runningJob creates, as c, Job "train" of admittedPods one-GPU pods that
// run for an hour, changed by change, and waits until its pods run on its
// admission: it returns the Job, its Workload's UID and the running pods.
func runningJob(ctx context.Context, c client.Client, ns string, change func(*batchv1.Job)) (*batchv1.Job, string, []string) {
	job := builders.Job(ns, "train", queue).Pods(admittedPods).Request(builders.GPU, "1").PodAnnotations(controlplane.RunFor(time.Hour)).Obj()
	if change != nil {
		change(job)
	}
	Expect(c.Create(ctx, job)).To(Succeed())
	uid := admittedUID(ctx, ns, string(job.UID))
	runsAdmitted(ctx, ns, uid)
	var names []string
	Eventually(func(g Gomega) { names = running(ctx, g, ns, uid) }, timeout, interval).Should(Succeed())
	return job, uid, names
}

// jobEvents are the reasons and messages of the events of Job name in ns.
func jobEvents(ctx context.Context, ns, name string) func(Gomega) []string {
	return func(g Gomega) []string { return events(ctx, g, ns, name) }
}

// The kinds berth holds through a suspend field have their pods created by
// their controllers, ungated: these attacks try to make such a controller
// run more pods than the admission counts, as the edit user.
var _ = Describe("a tenant with the edit role, against jobs whose controllers create their pods", func() {
	It("runs no more pods of a JobSet than admitted by growing a running child Job", func(ctx SpecContext) {
		ns := newTeam(ctx, "4")
		mallory := editor(ctx, ns)
		// edit does not grant JobSets: the platform made this one.
		template := builders.Job(ns, "t", queue).Pods(admittedPods).Request(builders.GPU, "1").PodAnnotations(controlplane.RunFor(time.Hour)).Obj()
		template.Spec.Suspend = nil
		template.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		js := &jobsetv1.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "train", Labels: map[string]string{berthv1.QueueNameLabel: queue}},
			Spec: jobsetv1.JobSetSpec{ReplicatedJobs: []jobsetv1.ReplicatedJob{{Name: "workers", Replicas: 1,
				Template: batchv1.JobTemplateSpec{Spec: template.Spec}}}}}
		Expect(env.Client.Create(ctx, js)).To(Succeed())
		wl := &berthv1.Workload{}
		Eventually(func(g Gomega) {
			wls := &berthv1.WorkloadList{}
			g.Expect(env.Client.List(ctx, wls, client.InNamespace(ns))).To(Succeed())
			g.Expect(wls.Items).To(HaveLen(1))
			*wl = wls.Items[0]
			g.Expect(wl.Status.Admission).NotTo(BeNil())
		}, timeout, interval).Should(Succeed())
		runsAdmitted(ctx, ns, string(wl.UID))

		By("growing the running child Job, an Indexed Job, from 2 pods to 4 (an elastic Indexed Job's update)")
		child := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "train-workers-0"}}
		Expect(update(ctx, mallory, child, func(j *batchv1.Job) {
			j.Spec.Parallelism, j.Spec.Completions = ptr.To[int32](4), ptr.To[int32](4)
		})).To(Succeed())
		Eventually(jobEvents(ctx, ns, child.Name), timeout, interval).Should(ContainElement(And(
			HavePrefix("FailedCreate:"), ContainSubstring("already runs the 2 pods it was admitted for"))))
		runsAdmitted(ctx, ns, string(wl.UID))
	})

	It("runs no more pods of a Job than admitted by orphaning a running pod, nor frees its quota by unlabelling one", func(ctx SpecContext) {
		ns := newTeam(ctx, "4")
		mallory := editor(ctx, ns)
		job, uid, names := runningJob(ctx, mallory, ns, nil)

		By("removing or changing the labels berth counts a running pod by")
		for _, change := range []func(*corev1.Pod){
			func(p *corev1.Pod) { delete(p.Labels, berthv1.WorkloadLabel) },
			func(p *corev1.Pod) { delete(p.Labels, berthv1.PodSetLabel) },
			func(p *corev1.Pod) { p.Labels[berthv1.WorkloadLabel] = "other" },
		} {
			Expect(update(ctx, mallory, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names[0]}}, change)).To(
				MatchError(ContainSubstring("Forbidden: berth sets it when it releases the pod and counts the pods a gang runs by it")))
		}

		By("changing a running pod's Job selector label, so that the Job lets it go and creates another")
		Expect(update(ctx, mallory, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names[0]}}, func(p *corev1.Pod) {
			p.Labels[batchv1.ControllerUidLabel] = "not-the-job"
		})).To(Succeed())
		Eventually(jobEvents(ctx, ns, job.Name), timeout, interval).Should(ContainElement(And(
			HavePrefix("FailedCreate:"), ContainSubstring("already runs the 2 pods it was admitted for"))))
		runsAdmitted(ctx, ns, uid)
	})

	It("runs no more pods of a Job than admitted beside its pods being deleted, which run until they end", func(ctx SpecContext) {
		ns := newTeam(ctx, "4")
		mallory := editor(ctx, ns)
		// Replacing terminating pods at once is the API server's default for
		// a Job; the tenant asks for it too, and for retries, so that the
		// deleted pod does not fail the Job.
		job, uid, names := runningJob(ctx, mallory, ns, func(j *batchv1.Job) {
			j.Spec.PodReplacementPolicy = ptr.To(batchv1.TerminatingOrFailed)
			j.Spec.BackoffLimit = ptr.To[int32](6)
		})

		By("deleting a running pod that its own finalizer keeps running: a kubelet runs it through the grace period its owner chose")
		const hold = "example.com/hold"
		victim := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names[0]}}
		Expect(update(ctx, mallory, victim, func(p *corev1.Pod) { p.Finalizers = append(p.Finalizers, hold) })).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			Expect(client.IgnoreNotFound(update(ctx, env.Client, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names[0]}},
				func(p *corev1.Pod) {
					p.Finalizers = slices.DeleteFunc(p.Finalizers, func(f string) bool { return f == hold })
				}))).To(Succeed())
		})
		Expect(mallory.Delete(ctx, victim)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(victim), victim)).To(Succeed())
			g.Expect(victim.DeletionTimestamp).NotTo(BeNil())
		}, timeout, interval).Should(Succeed())
		Eventually(jobEvents(ctx, ns, job.Name), timeout, interval).Should(ContainElement(And(
			HavePrefix("FailedCreate:"), ContainSubstring("already runs the 2 pods it was admitted for"))),
			"the Job's replacement waits for the pod being deleted to end")
		runsAdmitted(ctx, ns, uid)

		By("creating, beside it, a pod that claims the Job and the free place in its gang")
		sibling := &corev1.Pod{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: names[1]}, sibling)).To(Succeed())
		forged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged", Labels: sibling.Labels,
			Annotations: sibling.Annotations, OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job",
				Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}},
			Spec: *sibling.Spec.DeepCopy()}
		forged.Spec.NodeName = ""
		Expect(mallory.Create(ctx, forged)).To(MatchError(ContainSubstring("already runs the 2 pods it was admitted for")))
		By("and one that asks for more GPUs than each pod of the gang was admitted with")
		larger := forged.DeepCopy()
		larger.Name = "forged-larger"
		larger.Spec.Containers[0].Resources.Requests[builders.GPU] = resource.MustParse("4")
		larger.Spec.Containers[0].Resources.Limits[builders.GPU] = resource.MustParse("4")
		Expect(mallory.Create(ctx, larger)).To(MatchError(ContainSubstring("the pod requests 4 of nvidia.com/gpu, and each pod of pod set")))
		By("and one that tolerates every queue's headroom taint, or names its node")
		tolerating := forged.DeepCopy()
		tolerating.Name = "forged-tolerating"
		tolerating.Spec.Tolerations = append(tolerating.Spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
		Expect(mallory.Create(ctx, tolerating)).To(MatchError(ContainSubstring("tolerate the taint berth.dev/headroom whatever its value")))
		pinned := forged.DeepCopy()
		pinned.Name, pinned.Spec.NodeName = "forged-pinned", sibling.Spec.NodeName
		Expect(mallory.Create(ctx, pinned)).To(MatchError(ContainSubstring("leave spec.nodeName unset")))
		By("and one labelled as placed in a topology domain, which berth's count of free capacity leaves to the engine")
		placed := forged.DeepCopy()
		placed.Name = "forged-placed"
		placed.Labels = maps.Clone(forged.Labels)
		placed.Labels[berthv1.PlacementLabel] = uid
		Expect(mallory.Create(ctx, placed)).To(MatchError(ContainSubstring("berth sets it only on the pods of a gang it placed in a topology domain")))
		runsAdmitted(ctx, ns, uid)
	})

	It("runs no GPU outside quota by stating GPUs as limits without requests", func(ctx SpecContext) {
		ns := newTeam(ctx, "4")
		mallory := editor(ctx, ns)
		// limits alone are how GPUs are commonly asked for: the API server
		// gives the pods requests equal to them, but not the Job's template.
		limitsOnly := func(name string) *batchv1.Job {
			job := builders.Job(ns, name, queue).Pods(admittedPods).Request(builders.GPU, "2").PodAnnotations(controlplane.RunFor(time.Hour)).Obj()
			job.Spec.Template.Spec.Containers[0].Resources.Requests = nil
			return job
		}
		first, second := limitsOnly("first"), limitsOnly("second")
		Expect(mallory.Create(ctx, first)).To(Succeed())
		uid := admittedUID(ctx, ns, string(first.UID))
		runsAdmitted(ctx, ns, uid)
		wls := &berthv1.WorkloadList{}
		Expect(env.Client.List(ctx, wls, client.InNamespace(ns))).To(Succeed())
		Expect(wls.Items).To(HaveLen(1))
		Expect(wls.Items[0].Spec.PodSets[0].Requests).To(HaveKeyWithValue(builders.GPU, resource.MustParse("2")),
			"each pod is charged the GPUs its limit gives it")

		By("a second such Job, beyond the namespace's 4 GPUs")
		Expect(mallory.Create(ctx, second)).To(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(second), second)).To(Succeed())
			g.Expect(second.Spec.Suspend).To(HaveValue(BeTrue()), "the second Job waits for quota")
		}, quiet, interval).Should(Succeed())
		runsAdmitted(ctx, ns, uid)
		expectNoPodOutsideQuota(ctx, ns)
	})
})

var _ = Describe("a tenant with the edit role who shrinks a running Job", func() {
	It("frees no quota for its next job while the pods it dropped still run out their grace", func(ctx SpecContext) {
		ns := newTeam(ctx, "2")
		mallory := editor(ctx, ns)
		job, uid, names := runningJob(ctx, mallory, ns, nil)
		const hold = "example.com/hold"
		for _, name := range names {
			Expect(update(ctx, mallory, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
				func(p *corev1.Pod) { p.Finalizers = append(p.Finalizers, hold) })).To(Succeed())
		}
		release := func(ctx context.Context) {
			for _, name := range names {
				Expect(client.IgnoreNotFound(update(ctx, env.Client, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
					func(p *corev1.Pod) {
						p.Finalizers = slices.DeleteFunc(p.Finalizers, func(f string) bool { return f == hold })
					}))).To(Succeed())
			}
		}
		DeferCleanup(release)

		By("cutting the Job to one pod: the Job controller deletes the other, which its finalizer keeps running")
		Expect(update(ctx, mallory, job, func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](1) })).To(Succeed())
		Eventually(func(g Gomega) int {
			pods := &corev1.PodList{}
			g.Expect(env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{berthv1.WorkloadLabel: uid})).To(Succeed())
			deleting := 0
			for _, p := range pods.Items {
				if p.DeletionTimestamp != nil {
					deleting++
				}
			}
			return deleting
		}, timeout, interval).Should(Equal(1))
		next := builders.Job(ns, "next", queue).Request(builders.GPU, "1").Obj()
		Expect(mallory.Create(ctx, next)).To(Succeed())
		Consistently(func(g Gomega) {
			wl := workloadOf(ctx, g, ns, string(job.UID))
			g.Expect(wl.Spec.PodSets[0].Count).To(BeEquivalentTo(2), "the dropped pod is still charged")
			g.Expect(lifecycle.MayRun(lifecycle.PhaseOf(workloadOf(ctx, g, ns, string(next.UID))))).To(BeFalse(), "the next job waits")
		}, quiet, interval).Should(Succeed())

		By("the dropped pod ending: its quota goes to the next job")
		release(ctx)
		Eventually(func(g Gomega) {
			g.Expect(workloadOf(ctx, g, ns, string(job.UID)).Spec.PodSets[0].Count).To(BeEquivalentTo(1))
			g.Expect(lifecycle.MayRun(lifecycle.PhaseOf(workloadOf(ctx, g, ns, string(next.UID))))).To(BeTrue())
		}, timeout, interval).Should(Succeed())
	})
})
