package bypass_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
)

// reported is bad input berth accepts and reports: a Warning event on the
// job, and no pod.
type reported struct {
	make func(ns string) client.Object
	// event is the Warning event's "Reason: note", or a part of it.
	event string
	// onWorkload looks for the event on the job's Workload instead.
	onWorkload bool
}

var _ = Describe("bad input", func() {
	DescribeTable("is reported on the job",
		func(ctx SpecContext, r reported) {
			ns := newTeam(ctx, "8")
			obj := r.make(ns)
			Expect(env.Client.Create(ctx, obj)).To(Succeed())
			Eventually(func(g Gomega) {
				name := obj.GetName()
				if r.onWorkload {
					name = workloadOf(ctx, g, ns, string(obj.GetUID())).Name
				}
				g.Expect(events(ctx, g, ns, name)).To(ContainElement(ContainSubstring(r.event)))
			}, timeout, interval).Should(Succeed())
			expectNoPodOutsideQuota(ctx, ns)
		},
		Entry("a Job of 2^31-1 pods of 1 GPU", reported{onWorkload: true,
			make: func(ns string) client.Object {
				return builders.Job(ns, "many", queue).Pods(1<<31-1).Request(builders.GPU, "1").Obj()
			},
			event: "Inadmissible: requested 2147483647 of nvidia.com/gpu exceeds what ClusterQueue"}),
		Entry("a Job asking for 1e18 GPUs", reported{
			make: func(ns string) client.Object {
				return builders.Job(ns, "absurd", queue).Request(builders.GPU, "1e18").Obj()
			},
			event: `InvalidJob: cannot queue: pod set "main" requests 1e18 of nvidia.com/gpu per pod, more than berth can count (1.15e+15): request less`}),
		Entry("a Job with 64 resource names in one pod set", reported{
			make: func(ns string) client.Object {
				job := builders.Job(ns, "wide", queue).Obj()
				reqs := corev1.ResourceList{}
				for i := range 64 {
					reqs[corev1.ResourceName(fmt.Sprintf("example.com/r%d", i))] = resource.MustParse("1")
				}
				job.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: reqs, Limits: reqs}
				return job
			},
			event: `InvalidJob: cannot queue: pod set "main" requests 64 resources; a Workload holds at most 32 per pod set: request fewer resource names`}),
		Entry("an empty topology annotation", reported{
			make: func(ns string) client.Object {
				job := gpuJob(ns, "topo")
				job.Annotations = map[string]string{berthv1.TopologyRequiredAnnotation: ""}
				return job
			},
			event: "InvalidJob: cannot queue: annotation berth.dev/topology-required must name a topology level (a node label key of the flavor's topologyLevels)"}),
	)

	It("reports a topology level the flavor does not have on the Workload", func(ctx SpecContext) {
		ns := newTeam(ctx, "8")
		job := gpuJob(ns, "topo")
		job.Annotations = map[string]string{berthv1.TopologyPreferredAnnotation: "example.com/rack"}
		Expect(env.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := workloadOf(ctx, g, ns, string(job.UID))
			g.Expect(wl.Status.Conditions).To(ContainElement(And(
				HaveField("Type", berthv1.ConditionQuotaReserved), HaveField("Reason", string(berthv1.ReasonUnknownTopologyLevel)),
				HaveField("Message", ContainSubstring("example.com/rack")))))
		}, timeout, interval).Should(Succeed())
		expectNoPodOutsideQuota(ctx, ns)
	})
})
