package kubectlberth_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/discovery"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

var _ = Describe("berth's resource names", func() {
	// The plane serves Kueue's CRDs beside berth's, as a cluster moving from
	// Kueue to berth would.
	It("share no short name or category with Kueue's or any other group's resources", func() {
		dc, err := discovery.NewDiscoveryClientForConfig(env.Plane.Config)
		Expect(err).NotTo(HaveOccurred())
		lists, err := dc.ServerPreferredResources()
		Expect(err).NotTo(HaveOccurred())
		owners := map[string][]string{} // short name or category → group/resource
		berthNames := map[string]bool{}
		for _, l := range lists {
			for _, r := range l.APIResources {
				for _, n := range append(append([]string{}, r.ShortNames...), r.Categories...) {
					owners[n] = append(owners[n], l.GroupVersion+"/"+r.Name)
					if l.GroupVersion == berthv1.GroupVersion.String() {
						berthNames[n] = true
					}
				}
			}
		}
		Expect(berthNames).To(HaveKey("bwl"), "discovery lists berth's short names")
		Expect(berthNames).To(HaveKey("berth"), "and its category")
		Expect(owners).To(HaveKeyWithValue("cq", ContainElement(HavePrefix("kueue.x-k8s.io/"))), "and Kueue's")
		for n := range berthNames {
			if n == "berth" {
				// The category is shared by berth's own resources only.
				for _, o := range owners[n] {
					Expect(o).To(HavePrefix(berthv1.GroupVersion.String()+"/"), "category berth")
				}
				continue
			}
			Expect(owners[n]).To(HaveLen(1), "short name %s", n)
		}
	})
})
