// Package visibility_test serves visibility.berth.dev from berth's engine
// behind a real kube-apiserver's aggregator: the API server authenticates
// callers, proxies to berth through its front proxy, and berth authorizes
// them by SubjectAccessReview, as in a cluster.
package visibility_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/berth-dev/berth/controllers/visibility"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/framework"
)

const (
	serviceNamespace = "berth-system"
	serviceName      = "berth-visibility"
	frontProxyName   = "front-proxy-client"
)

var (
	env *framework.Env
	// stopServer stops the visibility server; the API server waits for
	// the connections its aggregator keeps open, so it goes first.
	stopServer = func() error { return nil }
)

func TestVisibility(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "visibility API suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(time.Minute)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	dir := GinkgoT().TempDir()
	proxyCA := newCA("front-proxy-ca")
	proxyCA.write(dir, "front-proxy-ca")
	proxyCA.issue(dir, "front-proxy-client", x509.ExtKeyUsageClientAuth)
	servingCA := newCA("berth-visibility-ca")
	certDir := filepath.Join(dir, "serving")
	Expect(os.MkdirAll(certDir, 0o700)).To(Succeed())
	servingCA.issue(certDir, "tls", x509.ExtKeyUsageServerAuth, serviceName+"."+serviceNamespace+".svc")

	var err error
	env, err = framework.StartWithBerth(ctx, framework.StartOptions{ExtraArgs: map[controlplane.Component][]string{
		controlplane.KubeAPIServer: {
			"--requestheader-client-ca-file=" + filepath.Join(dir, "front-proxy-ca.crt"),
			"--requestheader-allowed-names=" + frontProxyName,
			"--requestheader-username-headers=X-Remote-User",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--proxy-client-cert-file=" + filepath.Join(dir, "front-proxy-client.crt"),
			"--proxy-client-key-file=" + filepath.Join(dir, "front-proxy-client.key"),
		},
	}}, framework.BerthOptions{})
	Expect(err).NotTo(HaveOccurred())

	port := freePort()
	srv, err := visibility.New(visibility.Options{BindAddress: "127.0.0.1", Port: port, CertDir: certDir,
		Kubeconfig: env.Plane.Kubeconfig}, env.Berth().Scheduler, env.Client)
	Expect(err).NotTo(HaveOccurred())
	srvCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(srvCtx) }()
	stopServer = func() error { stop(); return <-done }

	register(ctx, port, servingCA.certPEM)
}, NodeTimeout(5*time.Minute))

var _ = AfterSuite(func() {
	Expect(stopServer()).To(Succeed())
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// register points the aggregator at the server: a Service of type
// ExternalName resolves to this host (the plane runs no kube-proxy to
// route a ClusterIP), and the APIService trusts the serving CA.
func register(ctx context.Context, port int, caPEM []byte) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: serviceNamespace}}
	Expect(env.Client.Create(ctx, ns)).To(Succeed())
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: serviceNamespace, Name: serviceName},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"}}
	Expect(env.Client.Create(ctx, svc)).To(Succeed())
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1alpha1.visibility.berth.dev"},
		"spec": map[string]any{
			"group": "visibility.berth.dev", "version": "v1alpha1",
			"groupPriorityMinimum": int64(100), "versionPriority": int64(100),
			"caBundle": caPEM,
			"service":  map[string]any{"namespace": serviceNamespace, "name": serviceName, "port": int64(port)},
		},
	}}
	Expect(env.Client.Create(ctx, apiService)).To(Succeed())
	Eventually(func(g Gomega) {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(apiService.GroupVersionKind())
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: apiService.GetName()}, got)).To(Succeed())
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		g.Expect(conds).To(ContainElement(SatisfyAll(
			HaveKeyWithValue("type", "Available"), HaveKeyWithValue("status", "True"))), "APIService conditions %v", conds)
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ca is a test certificate authority.
type ca struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newCA(name string) ca {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	Expect(err).NotTo(HaveOccurred())
	cert, err := x509.ParseCertificate(der)
	Expect(err).NotTo(HaveOccurred())
	return ca{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (c ca) write(dir, name string) {
	Expect(os.WriteFile(filepath.Join(dir, name+".crt"), c.certPEM, 0o600)).To(Succeed())
}

// issue writes NAME.crt and NAME.key, a certificate for cn (and dnsNames)
// signed by c.
func (c ca) issue(dir, name string, usage x509.ExtKeyUsage, dnsNames ...string) {
	cn := name
	if len(dnsNames) > 0 {
		cn = dnsNames[0]
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		DNSNames: dnsNames, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	Expect(err).NotTo(HaveOccurred())
	keyDER, err := x509.MarshalECPrivateKey(key)
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(filepath.Join(dir, name+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)).To(Succeed())
	Expect(os.WriteFile(filepath.Join(dir, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)).To(Succeed())
	fmt.Fprintf(GinkgoWriter, "issued %s for %s\n", name, cn)
}
