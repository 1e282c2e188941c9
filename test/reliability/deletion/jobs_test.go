package deletion_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/scale"
)

// state is where a gang is when it is deleted.
type state string

const (
	// stRunning: admitted, every pod running.
	stRunning state = "running"
	// stWaiting: queued behind a gang that holds the whole quota; the job
	// is suspended (pods: gated).
	stWaiting state = "waiting for quota"
	// stEvicting: preempted by a higher-priority job; its pods are being
	// deleted and still terminate, so it still holds its quota.
	stEvicting state = "being evicted"
)

var policies = []metav1.DeletionPropagation{
	metav1.DeletePropagationOrphan, metav1.DeletePropagationBackground, metav1.DeletePropagationForeground,
}

// deletionEntries is every kind × policy × state at full scale (`make
// test-long`). `make test` runs a covering subset: every kind in every
// state, each with one policy chosen so that every pair of the three
// dimensions still occurs (kind × state, kind × policy, policy × state);
// what it leaves out is a combination of pairs it runs.
func deletionEntries() []TableEntry {
	var out []TableEntry
	for si, st := range []state{stRunning, stWaiting, stEvicting} {
		for ki, k := range kinds {
			for pi, p := range policies {
				if !scale.Long() && pi != (ki+si)%len(policies) {
					continue
				}
				out = append(out, Entry(fmt.Sprintf("a %s %s, deleted with %s propagation", k.name, st, p), k, p, st))
			}
		}
	}
	return out
}

// Expected, whatever the kind and policy: the quota of a deleted gang is
// released once, when the last of its pods is gone, never before (pods
// that still terminate, or run orphaned, use their GPUs); its Workload goes
// with it; a gang that never started never starts; and what waited behind
// it is admitted exactly once.
var _ = Describe("deleting a gang", func() {
	DescribeTable("releases its quota once, after its pods are gone",
		func(ctx SpecContext, k kind, policy metav1.DeletionPropagation, st state) {
			s := newSpace(ctx, st == stEvicting)
			switch st {
			case stRunning:
				s.deleteRunning(ctx, k, policy)
			case stWaiting:
				s.deleteWaiting(ctx, k, policy)
			case stEvicting:
				s.deleteEvicting(ctx, k, policy)
			}
			s.settled(ctx)
		},
		deletionEntries(),
	)
})

// deleteRunning deletes a running gang whose pods linger, and checks that
// the job waiting behind it starts only once they are gone. Orphaned pods
// keep running (and their GPUs stay booked) until deleted themselves.
func (s *space) deleteRunning(ctx context.Context, k kind, policy metav1.DeletionPropagation) {
	victim := k.create(ctx, s.ns, "victim", "")
	wl := s.running(ctx, k, victim)
	next := s.next(ctx, "next")
	s.holdPods(ctx, victim)

	By("deleting the gang while its pods still hold the GPUs")
	victim.delete(ctx, policy)
	s.quotaHeld(ctx, wl, next)
	if policy == metav1.DeletePropagationOrphan {
		Consistently(func(g Gomega) {
			pods := s.gangPods(ctx, g, victim)
			g.Expect(pods).To(HaveLen(k.pods), "orphaned pods are not berth's to stop")
		}, held/2, interval).Should(Succeed())
		s.deleteOrphans(ctx, victim)
		s.quotaHeld(ctx, wl, next)
	}

	By("letting the pods go: the quota is released and the next job runs")
	s.releaseAll(ctx)
	s.workloadGone(ctx, wl)
	Eventually(func(g Gomega) bool { return victim.gone(ctx, g) }, timeout, interval).Should(BeTrue(), "nothing hangs")
	s.starts(ctx, next)
}

// deleteWaiting deletes a gang that waits for quota: its Workload goes at
// once, none of its pods ever starts, and the quota it never held is not
// released (the next job still waits for the running one).
func (s *space) deleteWaiting(ctx context.Context, k kind, policy metav1.DeletionPropagation) {
	blocker := jobKind.create(ctx, s.ns, "blocker", "")
	s.running(ctx, jobKind, blocker)
	victim := k.create(ctx, s.ns, "victim", "")
	wl := s.waiting(ctx, victim)

	victim.delete(ctx, policy)
	s.workloadGone(ctx, wl)
	Eventually(func(g Gomega) bool { return victim.gone(ctx, g) }, timeout, interval).Should(BeTrue(), "nothing hangs")
	next := s.next(ctx, "next")
	s.waits(ctx, next, "the running blocker still holds the quota")

	blocker.delete(ctx, metav1.DeletePropagationBackground)
	s.starts(ctx, next)
	s.neverStarted(ctx, victim)
}

// deleteEvicting deletes a gang preempted by a higher-priority job while
// its pods still terminate: the preemptor starts once they are gone, and
// the deleted gang is not queued again.
func (s *space) deleteEvicting(ctx context.Context, k kind, policy metav1.DeletionPropagation) {
	victim := k.create(ctx, s.ns, "victim", s.ns+"-low")
	wl := s.running(ctx, k, victim)
	s.holdPods(ctx, victim)
	high := s.preempt(ctx, wl)
	Eventually(func(g Gomega) {
		terminating := 0
		for _, p := range s.gangPods(ctx, g, victim) {
			if !p.DeletionTimestamp.IsZero() {
				terminating++
			}
		}
		g.Expect(terminating).To(BeNumerically(">", 0), "the evicted gang's pods are being deleted")
	}, timeout, interval).Should(Succeed())
	s.quotaHeld(ctx, wl, high)

	By("deleting the gang being evicted")
	victim.delete(ctx, policy)
	if policy == metav1.DeletePropagationOrphan {
		s.deleteOrphans(ctx, victim)
	}
	s.quotaHeld(ctx, wl, high)
	s.releaseAll(ctx)
	s.workloadGone(ctx, wl)
	Eventually(func(g Gomega) bool { return victim.gone(ctx, g) }, timeout, interval).Should(BeTrue(), "nothing hangs")
	s.starts(ctx, high)
	s.neverStarted(ctx, victim)
}

// preempt submits an 8-GPU Job of high priority and waits until it has
// preempted the Workload.
func (s *space) preempt(ctx context.Context, wl *berthv1.Workload) *batchv1.Job {
	high := builders.Job(s.ns, "high", "team").Request(builders.GPU, "8").PodAnnotations(controlplane.RunFor(time.Second)).Obj()
	high.Spec.Template.Spec.PriorityClassName = s.ns + "-high"
	Expect(env.Client.Create(ctx, high)).To(Succeed())
	Eventually(func(g Gomega) {
		fresh := &berthv1.Workload{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(wl), fresh)).To(Succeed())
		c := lifecycle.Condition(fresh, berthv1.ConditionEvicted)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(string(berthv1.ReasonPreempted)))
	}, timeout, interval).Should(Succeed())
	return high
}

// quotaHeld checks, for a while, that the Workload still exists and holds
// its quota, and that next is still held.
func (s *space) quotaHeld(ctx context.Context, wl *berthv1.Workload, next *batchv1.Job) {
	Consistently(func(g Gomega) {
		fresh := &berthv1.Workload{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(wl), fresh)).To(Succeed())
		g.Expect(fresh.UID).To(Equal(wl.UID))
		g.Expect(fresh.Status.Admission).NotTo(BeNil(), "the Workload holds the quota while its pods use the GPUs")
		job := &batchv1.Job{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(next), job)).To(Succeed())
		g.Expect(job.Spec.Suspend).To(HaveValue(BeTrue()), "%s waits for the GPUs", next.Name)
	}, held, interval).Should(Succeed())
}

// workloadGone waits until the Workload is deleted.
func (s *space) workloadGone(ctx context.Context, wl *berthv1.Workload) {
	// A job that still exists gets a new Workload of the same name.
	Eventually(func() bool {
		fresh := &berthv1.Workload{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(wl), fresh)
		return apierrors.IsNotFound(err) || (err == nil && fresh.UID != wl.UID)
	}, timeout, interval).Should(BeTrue(), "Workload %s goes", wl.Name)
}

// neverStarted checks that no pod of the gang runs: what is left of a gang
// deleted with orphan propagation before it started stays held.
func (s *space) neverStarted(ctx context.Context, gg gang) {
	Consistently(func(g Gomega) {
		for _, p := range s.gangPods(ctx, g, gg) {
			ended := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
			g.Expect(isBound(&p) && p.DeletionTimestamp.IsZero() && !ended).To(BeFalse(), "pod %s of a deleted gang runs", p.Name)
		}
	}, held/2, interval).Should(Succeed())
}
