package kinds_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// The pod webhook guards a replica's quota record on its own here: this
// plane installs no admission policies, so every refusal below is the
// webhook's (the bypass suite makes the same attacks on the policy path).
var _ = Describe("a replica's record on its pod", func() {
	It("cannot be written, changed or removed by a tenant with the edit role", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		tenant, err := env.Tenant(ctx, ns, "record-forger", "edit")
		Expect(err).NotTo(HaveOccurred())
		const record = `{"workload":"deployment-api-12345","spec":{"queueName":"team","podSets":[{"name":"main","count":1}]},"admission":{"clusterQueue":"cq","podSetAssignments":[{"name":"main","count":1}]}}`
		plain := func(name string, labels map[string]string) *corev1.Pod {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels,
				Annotations: map[string]string{berthv1.AdmissionRecordAnnotation: record}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.com/server"}}}}
		}

		By("creating a pod with a record, queued or not")
		for _, p := range []*corev1.Pod{plain("queued", map[string]string{berthv1.QueueNameLabel: "team"}), plain("unqueued", nil)} {
			Expect(tenant.Create(ctx, p)).To(MatchError(And(
				ContainSubstring("metadata.annotations[berth.dev/admission-record]"), ContainSubstring("cannot be set on a new pod"))), p.Name)
		}

		By("adding, changing or removing one on a pod that exists")
		p := plain("server", nil)
		p.Annotations = nil
		Expect(tenant.Create(ctx, p)).To(Succeed())
		err = tenant.Patch(ctx, p, client.RawPatch("application/merge-patch+json",
			[]byte(`{"metadata":{"annotations":{"berth.dev/admission-record":"{}"}}}`)))
		Expect(err).To(MatchError(ContainSubstring("cannot be set, changed or removed")))
		// As berth's release would have written it (an administrator's
		// write, which the webhook leaves alone like berth's own).
		Expect(env.Client.Patch(ctx, p, client.RawPatch("application/merge-patch+json",
			[]byte(`{"metadata":{"annotations":{"berth.dev/admission-record":"x"}}}`)))).To(Succeed())
		for _, patch := range []string{
			`{"metadata":{"annotations":{"berth.dev/admission-record":"{}"}}}`,
			`{"metadata":{"annotations":{"berth.dev/admission-record":null}}}`,
		} {
			Expect(tenant.Patch(ctx, p, client.RawPatch("application/merge-patch+json", []byte(patch)))).
				To(MatchError(ContainSubstring("cannot be set, changed or removed")), patch)
		}
		fresh := &corev1.Pod{}
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(p), fresh)).To(Succeed())
		Expect(fresh.Annotations).To(HaveKeyWithValue(berthv1.AdmissionRecordAnnotation, "x"))

		By("while other edits of the pod go through")
		Expect(tenant.Patch(ctx, p, client.RawPatch("application/merge-patch+json",
			[]byte(`{"metadata":{"annotations":{"example.com/note":"ok"}}}`)))).To(Succeed())
	})
})
