package controller_test

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/controllers/certs"
)

var _ = Describe("self-managed webhook certificates", func() {
	It("stores one certificate in a Secret, writes it to disk and injects its CA", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		// A webhook that never matches anything, so injecting a CA into it
		// cannot disturb the suite's own webhooks.
		none := admissionregv1.SideEffectClassNone
		cfg := &admissionregv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-webhooks"},
			Webhooks: []admissionregv1.ValidatingWebhook{{
				Name: "never.berth.dev", SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
				ClientConfig:   admissionregv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/never")},
				ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"never": ns}},
			}},
		}
		Expect(env.Client.Create(ctx, cfg)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(env.Client.Delete(ctx, cfg)).To(Succeed()) })

		o := certs.Options{Namespace: ns, SecretName: "certs", ServiceName: "berth-webhook-service",
			CertDir: GinkgoT().TempDir(), ValidatingWebhookConfigurations: []string{cfg.Name}}
		Expect(certs.Ensure(ctx, env.Client, o)).To(Succeed())

		secret := &corev1.Secret{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "certs"}, secret)).To(Succeed())
		onDisk, err := os.ReadFile(filepath.Join(o.CertDir, certs.CertKey))
		Expect(err).NotTo(HaveOccurred())
		Expect(onDisk).To(Equal(secret.Data[certs.CertKey]))
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg)).To(Succeed())
		Expect(cfg.Webhooks[0].ClientConfig.CABundle).To(Equal(secret.Data[certs.CAKey]))

		By("reusing the stored certificate on the next start, as another replica would")
		o.CertDir = GinkgoT().TempDir()
		Expect(certs.Ensure(ctx, env.Client, o)).To(Succeed())
		again := &corev1.Secret{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "certs"}, again)).To(Succeed())
		Expect(again.Data).To(Equal(secret.Data))
		Expect(again.ResourceVersion).To(Equal(secret.ResourceVersion), "a valid certificate is not rewritten")

		By("failing with a clear error when a webhook configuration is missing")
		o.ValidatingWebhookConfigurations = []string{ns + "-missing"}
		Expect(certs.Ensure(ctx, env.Client, o)).To(MatchError(ContainSubstring(ns + "-missing")))
	})
})
