package controller_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
)

var _ = Describe("API validation", func() {
	DescribeTable("rejects an invalid ClusterQueue with a message that says what to fix",
		func(ctx SpecContext, mutate func(*berthv1.ClusterQueue), want string) {
			cq := builders.ClusterQueue("invalid-cq").Cohort("c").Quota("h200", builders.GPU, "8", "").Obj()
			mutate(cq)
			err := env.Client.Create(ctx, cq)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(want))
		},
		Entry("negative nominal quota", func(cq *berthv1.ClusterQueue) {
			cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota = resource.MustParse("-1")
		}, `nominalQuota: Invalid value: "-1": must not be negative`),
		Entry("borrowingLimit without a cohort", func(cq *berthv1.ClusterQueue) {
			cq.Spec.Cohort = ""
			cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].BorrowingLimit = ptr.To(resource.MustParse("4"))
		}, "borrowingLimit and lendingLimit require a cohort"),
		Entry("lendingLimit above nominal quota", func(cq *berthv1.ClusterQueue) {
			cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].LendingLimit = ptr.To(resource.MustParse("9"))
		}, "lendingLimit: Invalid value: \"9\": must not exceed nominalQuota (8)"),
		Entry("flavor quota for a resource the group does not cover", func(cq *berthv1.ClusterQueue) {
			cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].Name = "cpu"
		}, "each flavor must list quota for exactly the group's coveredResources"),
		Entry("a flavor in two resource groups", func(cq *berthv1.ClusterQueue) {
			cq.Spec.ResourceGroups = append(cq.Spec.ResourceGroups, *cq.Spec.ResourceGroups[0].DeepCopy())
			cq.Spec.ResourceGroups[1].CoveredResources[0] = "cpu"
			cq.Spec.ResourceGroups[1].Flavors[0].Resources[0].Name = "cpu"
		}, "a flavor belongs to one group"),
		Entry("unknown queueing strategy", func(cq *berthv1.ClusterQueue) {
			cq.Spec.QueueingStrategy = "Random"
		}, "supported values: \"StrictFIFO\", \"BestEffortFIFO\""),
	)

	It("keeps a LocalQueue's ClusterQueue immutable", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		lq := builders.LocalQueue(ns, "team", "cq-a")
		Expect(env.Client.Create(ctx, lq)).To(Succeed())
		// A merge patch carries no resourceVersion, so berth's status writes
		// cannot make it conflict: only validation can reject it.
		base := lq.DeepCopy()
		lq.Spec.ClusterQueue = "cq-b"
		err := env.Client.Patch(ctx, lq, client.MergeFrom(base))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("clusterQueue is immutable"))
	})
})
