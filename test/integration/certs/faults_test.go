package certs_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/controllers/certs"
)

// expireServingCertificate puts into the Secret a serving certificate,
// signed by the Secret's CA, that expired an hour ago.
func expireServingCertificate(ctx context.Context) {
	s := secret(ctx)
	caBlock, _ := pem.Decode(s.Data[certs.CAKey])
	Expect(caBlock).NotTo(BeNil())
	ca, err := x509.ParseCertificate(caBlock.Bytes)
	Expect(err).NotTo(HaveOccurred())
	keyBlock, _ := pem.Decode(s.Data["ca.key"])
	Expect(keyBlock).NotTo(BeNil())
	caKey := parseKey(keyBlock.Bytes)
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost", "berth-webhook-service.berth-system.svc"},
		NotBefore:    time.Now().Add(-2 * time.Hour),
		NotAfter:     time.Now().Add(-time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &leafKey.PublicKey, caKey)
	Expect(err).NotTo(HaveOccurred())
	keyDER, err := x509.MarshalPKCS8PrivateKey(leafKey)
	Expect(err).NotTo(HaveOccurred())
	s.Data[certs.CertKey] = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	s.Data[certs.KeyKey] = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	Expect(k8s.Update(ctx, s)).To(Succeed())
}

func parseKey(der []byte) crypto.Signer {
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return k
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	Expect(err).NotTo(HaveOccurred())
	signer, ok := k.(crypto.Signer)
	Expect(ok).To(BeTrue(), "the CA key signs")
	return signer
}

// expectCallsSucceed waits until webhook calls succeed again, then checks
// that they keep succeeding.
func expectCallsSucceed(ctx context.Context) {
	Eventually(func() error { return call(ctx, 0, 0) }).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
	Consistently(func() error { return call(ctx, 0, 1) }).WithContext(ctx).WithTimeout(2 * time.Second).Should(Succeed())
}

// wipeCABundles empties the CA bundle of every webhook of the validating
// configuration, as a careless apply of the bundle would.
func wipeCABundles(ctx context.Context) {
	v := &admissionv1.ValidatingWebhookConfiguration{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: certs.ValidatingWebhookConfiguration}, v)).To(Succeed())
	for i := range v.Webhooks {
		v.Webhooks[i].ClientConfig.CABundle = nil
	}
	Expect(k8s.Update(ctx, v)).To(Succeed())
}

// labelledAndPlainJobs dry-run creates a queued and an unqueued Job.
func labelledAndPlainJobs(ctx context.Context) (labelled, plain error) {
	for i, queued := range []bool{true, false} {
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: "down-"},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "c", Image: "busybox"}},
			}}},
		}
		if queued {
			job.Labels = map[string]string{"berth.dev/queue-name": "team"}
		}
		err := k8s.Create(ctx, job, client.DryRunAll)
		if i == 0 {
			labelled = err
		} else {
			plain = err
		}
	}
	return labelled, plain
}

// certificateFaultSpecs are the specs that break the certificates and the
// replicas behind the webhooks; stop stops the replicas.
func certificateFaultSpecs(stop func()) {
	It("replaces an expired serving certificate while running", func(ctx SpecContext) {
		expireServingCertificate(ctx)
		Eventually(func(g Gomega) {
			s := secret(ctx)
			block, _ := pem.Decode(s.Data[certs.CertKey])
			g.Expect(block).NotTo(BeNil())
			c, err := x509.ParseCertificate(block.Bytes)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.NotAfter).To(BeTemporally(">", time.Now()), "a fresh certificate")
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		expectCallsSucceed(ctx)
	}, SpecTimeout(3*time.Minute))

	It("puts a wiped CA bundle back into the webhook configuration", func(ctx SpecContext) {
		wipeCABundles(ctx)
		Eventually(func() [][]byte { return caBundles(ctx, certs.ValidatingWebhookConfiguration) }).
			WithContext(ctx).WithTimeout(time.Minute).Should(HaveEach(Equal(secret(ctx).Data[certs.CAKey])))
		expectCallsSucceed(ctx)
	}, SpecTimeout(3*time.Minute))

	It("refuses queued Jobs while berth is down and lets other Jobs through", func(ctx SpecContext) {
		stop()
		labelled, plain := labelledAndPlainJobs(ctx)
		// failurePolicy Fail: a queued Job that berth did not suspend
		// would start outside quota.
		Expect(labelled).To(MatchError(ContainSubstring(`failed calling webhook "mjob.berth.dev"`)))
		// The webhooks select queued objects only: berth being down
		// never blocks the rest of the cluster.
		Expect(plain).To(Succeed())
	}, SpecTimeout(3*time.Minute))
}
