// Package jobsuite is the behaviour every job adapter must show on a real
// API server, written once: each kind's integration suite runs it with an
// Adapter that builds and drives jobs of that kind. There is no
// kube-controller-manager in these suites, so adapters play the job's own
// controller where a spec needs it (marking a job finished).
package jobsuite

import (
	"context"
	"fmt"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/framework"
)

const (
	timeout  = 30 * time.Second
	interval = 100 * time.Millisecond
	// held is how long a spec watches a job stay held.
	held = 2 * time.Second
	// productLabel is the node label of the suite's flavor.
	productLabel = "nvidia.com/gpu.product"
)

// Adapter builds and drives jobs of one kind for the suite.
type Adapter interface {
	// Kind names the kind in spec texts.
	Kind() string
	// Create submits a job to queue whose gang needs exactly 8 GPUs, and
	// returns the object its events are recorded on.
	Create(ctx context.Context, c client.Client, namespace, name, queue string) (client.Object, error)
	// CreateInvalid submits a job berth cannot queue as it is (runs no
	// pods, members disagree); invalidNote is part of the event's note.
	CreateInvalid(ctx context.Context, c client.Client, namespace, name, queue string) (obj client.Object, invalidNote string, err error)
	// PodSets are the names of the pod sets of a job made by Create.
	PodSets() []string
	// State reads whether the job runs, and each pod set's node selector.
	// Adapters of kinds whose pods an operator creates also play that
	// operator here, creating missing pods.
	State(ctx context.Context, c client.Client, obj client.Object) (started bool, nodeSelectors map[string]map[string]string, err error)
	// Finish marks the job finished, as its controller would; for a kind
	// that never finishes (a serving LeaderWorkerSet) it scales the job to
	// zero instead.
	Finish(ctx context.Context, c client.Client, obj client.Object) error
	// Finishes reports whether the kind finishes (false: Finish scales).
	Finishes() bool
	// Delete deletes the job as a user would.
	Delete(ctx context.Context, c client.Client, obj client.Object) error
	// Requeues reports whether an evicted job queues again by itself: false
	// for plain pods, which are deleted on eviction and do not come back.
	Requeues() bool
}

// DescribeAdapter declares the suite for an adapter. env returns the
// suite's environment, which is started in BeforeSuite.
func DescribeAdapter(env func() *framework.Env, a Adapter) bool {
	return ginkgo.Describe(a.Kind()+" adapter", func() {
		var ns, flavor string
		ginkgo.BeforeEach(func(ctx ginkgo.SpecContext) {
			ns, flavor = setupQueue(ctx, env().Client)
		})
		admissionSpecs(env, a, &ns, &flavor)
		templateSpecs(env, a, &ns)
		queueingSpecs(env, a, &ns, &flavor)
	})
}

// admissionSpecs declares how a job of the adapter's kind is held, started,
// stopped and released. ns and flavor are set by BeforeEach.
func admissionSpecs(env func() *framework.Env, a Adapter, nsp, flavorp *string) {
	ginkgo.It("holds a job until its whole gang is admitted, and admits it with each pod set's flavor node selector", func(ctx ginkgo.SpecContext) {
		ns := *nsp
		flavor := *flavorp
		c := env().Client
		first := create(ctx, c, a, ns, "first")
		gomega.Eventually(started(ctx, c, a, first), timeout, interval).Should(gomega.BeTrue())
		_, sel, err := a.State(ctx, c, first)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		for _, ps := range a.PodSets() {
			gomega.Expect(sel).To(gomega.HaveKeyWithValue(ps, gomega.HaveKeyWithValue(productLabel, flavor)), "pod set %s", ps)
		}
		second := create(ctx, c, a, ns, "second")
		// Waiting its turn is served by the engine (the visibility API,
		// kubectl berth explain), not written to the Workload's status.
		gomega.Eventually(pendingReason(ctx, env(), second), timeout, interval).Should(gomega.Equal(admission.InsufficientQuota))
		gomega.Consistently(started(ctx, c, a, second), held, interval).Should(gomega.BeFalse())
		gomega.Expect(quotaReserved(ctx, c, second)(gomega.Default)).To(gomega.BeFalse())
	})
	ginkgo.It("releases quota when a job finishes (or, for a kind that never does, is scaled to zero)", func(ctx ginkgo.SpecContext) {
		ns := *nsp
		c := env().Client
		first, second := runAndHold(ctx, c, a, ns)
		// Finish reads and writes the object berth also writes; retry
		// on a conflict as its controller would.
		gomega.Eventually(func() error { return a.Finish(ctx, c, first) }, timeout, interval).Should(gomega.Succeed())
		gomega.Eventually(started(ctx, c, a, second), timeout, interval).Should(gomega.BeTrue())
		if a.Finishes() {
			gomega.Eventually(conditionReason(ctx, c, first, berthv1.ConditionFinished), timeout, interval).Should(gomega.Equal(string(berthv1.ReasonSucceeded)))
		} else {
			gomega.Eventually(func() ([]berthv1.Workload, error) { return WorkloadsOf(ctx, c, first) }, timeout, interval).Should(gomega.BeEmpty())
		}
	})
	ginkgo.It("releases quota when a job is deleted", func(ctx ginkgo.SpecContext) {
		ns := *nsp
		c := env().Client
		first, second := runAndHold(ctx, c, a, ns)
		gomega.Expect(a.Delete(ctx, c, first)).To(gomega.Succeed())
		gomega.Eventually(started(ctx, c, a, second), timeout, interval).Should(gomega.BeTrue())
	})
	ginkgo.It("suspends a preempted job, requeues it, and starts it again when admitted again", func(ctx ginkgo.SpecContext) {
		ns := *nsp
		c := env().Client
		job := create(ctx, c, a, ns, "job")
		gomega.Eventually(started(ctx, c, a, job), timeout, interval).Should(gomega.BeTrue())
		ginkgo.By("preempting it with a higher-priority Job that needs all the quota")
		preemptor := highPriorityJob(ctx, c, ns)
		gomega.Eventually(started(ctx, c, a, job), timeout, interval).Should(gomega.BeFalse())
		if !a.Requeues() {
			ginkgo.By("deleting the pods, which nothing creates again, and releasing the quota")
			gomega.Eventually(func() ([]berthv1.Workload, error) { return WorkloadsOf(ctx, c, job) }, timeout, interval).Should(gomega.BeEmpty())
			return
		}
		gomega.Eventually(conditionReason(ctx, c, job, berthv1.ConditionEvicted), timeout, interval).Should(gomega.Equal(string(berthv1.ReasonRequeued)))
		gomega.Consistently(started(ctx, c, a, job), held, interval).Should(gomega.BeFalse())
		ginkgo.By("admitting it again once the preemptor is gone")
		gomega.Expect(c.Delete(ctx, preemptor, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(gomega.Succeed())
		gomega.Eventually(started(ctx, c, a, job), timeout, interval).Should(gomega.BeTrue())
	})
}

// templateSpecs declares what a job's Workload keeps of its pod templates.
func templateSpecs(env func() *framework.Env, a Adapter, nsp *string) {
	ginkgo.It("keeps each pod set's scheduling template in its Workload as the job declares it, also once started", func(ctx ginkgo.SpecContext) {
		ns := *nsp
		c := env().Client
		obj := create(ctx, c, a, ns, "templated")
		var before []berthv1.PodSet
		gomega.Eventually(func(g gomega.Gomega) {
			wls, err := WorkloadsOf(ctx, c, obj)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(wls).To(gomega.HaveLen(1))
			before = wls[0].Spec.PodSets
		}, timeout, interval).Should(gomega.Succeed())
		for _, ps := range before {
			gomega.Expect(ps.Template).NotTo(gomega.BeNil(), "pod set %s", ps.Name)
			gomega.Expect(ps.Template.Spec.Containers).NotTo(gomega.BeEmpty(), "pod set %s", ps.Name)
			for _, ctr := range ps.Template.Spec.Containers {
				gomega.Expect(ctr.Image).NotTo(gomega.BeEmpty(), "pod set %s container %s", ps.Name, ctr.Name)
				gomega.Expect(ctr.Command).To(gomega.BeEmpty(), "pod set %s: commands do not decide placement", ps.Name)
			}
			gomega.Expect(ps.Template.Labels).NotTo(gomega.HaveKey(berthv1.WorkloadLabel))
		}
		gomega.Eventually(started(ctx, c, a, obj), timeout, interval).Should(gomega.BeTrue())
		// Started, the job's pods carry the flavor's selector; the Workload
		// keeps the job's own, and the gang is not re-queued for it.
		gomega.Consistently(func(g gomega.Gomega) {
			wls, err := WorkloadsOf(ctx, c, obj)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(wls).To(gomega.HaveLen(1))
			g.Expect(wls[0].Status.Admission).NotTo(gomega.BeNil())
			for i, ps := range wls[0].Spec.PodSets {
				g.Expect(ps.Template.Spec.NodeSelector).NotTo(gomega.HaveKey(productLabel), "pod set %s", ps.Name)
				g.Expect(ps.Template).To(gomega.Equal(before[i].Template), "pod set %s", ps.Name)
			}
		}, held, interval).Should(gomega.Succeed())
	})
}

// queueingSpecs declares how a job of the adapter's kind that cannot be
// admitted as it is is reported. ns and flavor are set by BeforeEach.
func queueingSpecs(env func() *framework.Env, a Adapter, nsp, flavorp *string) {
	ginkgo.It("says that a job's LocalQueue is missing, and never starts it", func(ctx ginkgo.SpecContext) {
		ns := *nsp
		c := env().Client
		job, err := a.Create(ctx, c, ns, "lost", "no-such-queue")
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Eventually(quotaReason(ctx, c, job), timeout, interval).Should(gomega.Equal(string(berthv1.ReasonLocalQueueNotFound)))
		gomega.Consistently(started(ctx, c, a, job), held, interval).Should(gomega.BeFalse())
	})
	ginkgo.It("holds a job that asks for a topology level its flavor does not have, with a condition naming the flavor's levels", func(ctx ginkgo.SpecContext) {
		ns := *nsp
		flavor := *flavorp
		c := env().Client
		patch := func(obj client.Object, p string) {
			gomega.Eventually(func() error {
				return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(p)))
			}, timeout, interval).Should(gomega.Succeed())
		}
		rf := &berthv1.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: flavor}}
		patch(rf, `{"spec":{"topologyLevels":["example.com/rack"]}}`)
		cq := &berthv1.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		patch(cq, `{"spec":{"stopPolicy":"Hold"}}`)
		// berth reports the hold once its engine has it: a job created
		// before that could be admitted as the queue still stood.
		gomega.Eventually(func(g gomega.Gomega) {
			fresh := &berthv1.ClusterQueue{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cq), fresh)).To(gomega.Succeed())
			active := meta.FindStatusCondition(fresh.Status.Conditions, berthv1.ConditionActive)
			g.Expect(active).NotTo(gomega.BeNil())
			g.Expect(active.Reason).To(gomega.Equal(berthv1.ReasonStopped))
			g.Expect(active.ObservedGeneration).To(gomega.Equal(fresh.Generation))
		}, timeout, interval).Should(gomega.Succeed())
		ginkgo.By("queueing the job while its ClusterQueue holds, then asking for a level the flavor lacks")
		job := create(ctx, c, a, ns, "bad-level")
		gomega.Eventually(quotaReason(ctx, c, job), timeout, interval).Should(gomega.Equal(string(berthv1.ReasonClusterQueueStopped)))
		patch(job, `{"metadata":{"annotations":{"`+berthv1.TopologyRequiredAnnotation+`":"example.com/block"}}}`)
		gomega.Eventually(func(g gomega.Gomega) {
			wls, err := WorkloadsOf(ctx, c, job)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(wls).To(gomega.HaveLen(1))
			g.Expect(wls[0].Spec.Topology).To(gomega.Equal(&berthv1.TopologyRequest{Mode: berthv1.TopologyRequired, Level: "example.com/block"}))
		}, timeout, interval).Should(gomega.Succeed())
		patch(cq, `{"spec":{"stopPolicy":"None"}}`)
		gomega.Eventually(func(g gomega.Gomega) string {
			wls, err := WorkloadsOf(ctx, c, job)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(wls).To(gomega.HaveLen(1))
			cond := meta.FindStatusCondition(wls[0].Status.Conditions, berthv1.ConditionQuotaReserved)
			g.Expect(cond).NotTo(gomega.BeNil())
			return cond.Reason + ": " + cond.Message
		}, timeout, interval).Should(gomega.And(gomega.HavePrefix("UnknownTopologyLevel"), gomega.ContainSubstring(`"example.com/rack"`)))
		gomega.Consistently(started(ctx, c, a, job), held, interval).Should(gomega.BeFalse())
	})
	ginkgo.It("reports a job it cannot queue with an event that says why, and never starts it", func(ctx ginkgo.SpecContext) {
		ns := *nsp
		c := env().Client
		job, note, err := a.CreateInvalid(ctx, c, ns, "invalid", "team")
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Eventually(EventReasons(ctx, c, ns, job.GetName()), timeout, interval).Should(gomega.ContainElement(gomega.And(
			gomega.ContainSubstring("InvalidJob"), gomega.ContainSubstring(note))))
		gomega.Consistently(started(ctx, c, a, job), held, interval).Should(gomega.BeFalse())
	})
}

// runAndHold creates a job that takes the whole quota and waits until it
// started, then a second one and checks that it is held.
func runAndHold(ctx context.Context, c client.Client, a Adapter, ns string) (first, second client.Object) {
	first = create(ctx, c, a, ns, "first")
	gomega.Eventually(started(ctx, c, a, first), timeout, interval).Should(gomega.BeTrue())
	second = create(ctx, c, a, ns, "second")
	gomega.Consistently(started(ctx, c, a, second), held, interval).Should(gomega.BeFalse())
	return first, second
}

func create(ctx context.Context, c client.Client, a Adapter, ns, name string) client.Object {
	obj, err := a.Create(ctx, c, ns, name, "team")
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return obj
}

// setupQueue creates a namespace, a flavor, a ClusterQueue with 8 GPUs of
// it (where higher priority preempts) and a LocalQueue "team", and returns
// the namespace's and the flavor's names.
func setupQueue(ctx context.Context, c client.Client) (ns, flavor string) {
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "berth-it-"}}
	gomega.Expect(c.Create(ctx, nsObj)).To(gomega.Succeed())
	ns = nsObj.Name
	f := builders.Flavor(ns, map[string]string{productLabel: ns})
	gomega.Expect(c.Create(ctx, f)).To(gomega.Succeed())
	cqObj := builders.ClusterQueue(ns).Quota(f.Name, builders.GPU, "8", "").Obj()
	cqObj.Spec.Preemption.WithinClusterQueue = berthv1.PreemptLowerPriority
	gomega.Expect(c.Create(ctx, cqObj)).To(gomega.Succeed())
	// The LocalQueue lets its jobs take highPriorityJob's class.
	gomega.Expect(c.Create(ctx, builders.LocalQueue(ns, "team", ns, ns+"-urgent"))).To(gomega.Succeed())
	return ns, f.Name
}

// highPriorityJob submits a batch Job of 8 GPUs with a PriorityClass of
// value 1000 (named after the namespace), which preempts lower-priority
// workloads of the ClusterQueue.
func highPriorityJob(ctx context.Context, c client.Client, ns string) *batchv1.Job {
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-urgent"}, Value: 1000}
	gomega.Expect(c.Create(ctx, pc)).To(gomega.Succeed())
	job := builders.Job(ns, "urgent", "team").Request(builders.GPU, "8").Obj()
	job.Spec.Template.Spec.PriorityClassName = pc.Name
	gomega.Expect(c.Create(ctx, job)).To(gomega.Succeed())
	return job
}

func started(ctx context.Context, c client.Client, a Adapter, obj client.Object) func(gomega.Gomega) bool {
	return func(g gomega.Gomega) bool {
		ok, _, err := a.State(ctx, c, obj)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		return ok
	}
}

// WorkloadsOf lists the Workloads obj owns.
func WorkloadsOf(ctx context.Context, c client.Client, obj client.Object) ([]berthv1.Workload, error) {
	wls := &berthv1.WorkloadList{}
	if err := c.List(ctx, wls, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil, fmt.Errorf("listing workloads: %w", err)
	}
	var out []berthv1.Workload
	for i := range wls.Items {
		for _, ref := range wls.Items[i].OwnerReferences {
			if ref.UID == obj.GetUID() {
				out = append(out, wls.Items[i])
				break
			}
		}
	}
	return out, nil
}

// conditionReason reads the reason of a condition of obj's only Workload.
func conditionReason(ctx context.Context, c client.Client, obj client.Object, condType string) func(gomega.Gomega) string {
	return func(g gomega.Gomega) string {
		wls, err := WorkloadsOf(ctx, c, obj)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(wls).To(gomega.HaveLen(1))
		cond := meta.FindStatusCondition(wls[0].Status.Conditions, condType)
		g.Expect(cond).NotTo(gomega.BeNil())
		return cond.Reason
	}
}

func quotaReason(ctx context.Context, c client.Client, obj client.Object) func(gomega.Gomega) string {
	return conditionReason(ctx, c, obj, berthv1.ConditionQuotaReserved)
}

// quotaReserved reports whether obj's only Workload holds quota.
func quotaReserved(ctx context.Context, c client.Client, obj client.Object) func(gomega.Gomega) bool {
	return func(g gomega.Gomega) bool {
		wls, err := WorkloadsOf(ctx, c, obj)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(wls).To(gomega.HaveLen(1))
		return meta.IsStatusConditionTrue(wls[0].Status.Conditions, berthv1.ConditionQuotaReserved)
	}
}

// pendingReason is the engine's reason for obj's only Workload to wait:
// what the visibility API serves for it.
func pendingReason(ctx context.Context, env *framework.Env, obj client.Object) func(gomega.Gomega) admission.PendingReason {
	return func(g gomega.Gomega) admission.PendingReason {
		wls, err := WorkloadsOf(ctx, env.Client, obj)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(wls).To(gomega.HaveLen(1))
		ex, ok := env.Berth().Scheduler.Explain(lifecycle.KeyOf(&wls[0]))
		g.Expect(ok).To(gomega.BeTrue(), "Workload %s is not pending in the engine", wls[0].Name)
		return ex.Reason
	}
}

// EventReasons lists "Reason: note" of the events about the named object.
func EventReasons(ctx context.Context, c client.Client, namespace, name string) func(gomega.Gomega) []string {
	return func(g gomega.Gomega) []string {
		evs := &eventsv1.EventList{}
		g.Expect(c.List(ctx, evs, client.InNamespace(namespace))).To(gomega.Succeed())
		var out []string
		for _, e := range evs.Items {
			if e.Regarding.Name == name {
				out = append(out, e.Reason+": "+e.Note)
			}
		}
		return out
	}
}
