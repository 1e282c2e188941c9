package framework

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/berth-dev/berth/controllers/visibility"
)

// ServeVisibility serves berth's visibility API in this process from the
// engine of the berth StartBerth runs, with a serving certificate of its
// own CA, and registers it with the plane's aggregator (PointAPIService):
// calls to /apis/visibility.berth.dev go through the real API server's
// authentication, front proxy and berth's SubjectAccessReviews. stop stops
// the server; call it before Env.Stop, because the API server waits for
// the connections its aggregator keeps open.
func (e *Env) ServeVisibility(ctx context.Context) (stop func() error, err error) {
	b := e.Berth()
	if b == nil {
		return nil, errors.New("serving visibility: berth is not running")
	}
	dir, err := os.MkdirTemp("", "berth-visibility-")
	if err != nil {
		return nil, fmt.Errorf("serving visibility: %w", err)
	}
	caPEM, err := issueServingCert(dir, visibility.ServiceName+"."+visibility.ServiceNamespace+".svc")
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	port, err := freePort()
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	srv, err := visibility.New(visibility.Options{BindAddress: "127.0.0.1", Port: port, CertDir: dir,
		Kubeconfig: e.Plane.Kubeconfig}, b.Scheduler, e.Client)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	srvCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(srvCtx) }()
	stop = func() error {
		cancel()
		return errors.Join(<-done, os.RemoveAll(dir))
	}
	if err := PointAPIService(ctx, e.Client, visibility.ServiceNamespace, port, caPEM); err != nil {
		return nil, errors.Join(err, stop())
	}
	return stop, nil
}

// PointAPIService makes the aggregator send visibility.berth.dev to port
// on this host, and waits until the APIService is Available. The Service
// berth-visibility in namespace becomes an ExternalName for localhost (the
// plane runs no kube-proxy to route a ClusterIP); the APIService is created
// as the install names it, or updated if the install created it. A nil ca
// keeps the APIService's caBundle, which berth's certificate management
// injects.
func PointAPIService(ctx context.Context, c client.Client, namespace string, port int, ca []byte) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := client.IgnoreAlreadyExists(c.Create(ctx, ns)); err != nil {
		return fmt.Errorf("creating namespace %s: %w", ns.Name, err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: visibility.ServiceName}}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(svc), svc); client.IgnoreNotFound(err) != nil {
			return err
		}
		svc.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"}
		return createOrUpdate(ctx, c, svc)
	})
	if err != nil {
		return fmt.Errorf("pointing the visibility Service at localhost: %w", err)
	}
	api := &unstructured.Unstructured{}
	api.SetAPIVersion("apiregistration.k8s.io/v1")
	api.SetKind("APIService")
	api.SetName(visibility.APIServiceName)
	// berth may inject its CA between the read and the write: retried.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(api), api); client.IgnoreNotFound(err) != nil {
			return err
		}
		spec := map[string]any{
			"group": "visibility.berth.dev", "version": "v1alpha1",
			"groupPriorityMinimum": int64(100), "versionPriority": int64(100),
			"service": map[string]any{"namespace": namespace, "name": visibility.ServiceName, "port": int64(port)},
		}
		if ca != nil {
			spec["caBundle"] = ca
		} else if old, ok, _ := unstructured.NestedString(api.Object, "spec", "caBundle"); ok {
			spec["caBundle"] = old
		}
		api.Object["spec"] = spec
		return createOrUpdate(ctx, c, api)
	})
	if err != nil {
		return fmt.Errorf("pointing the APIService at port %d: %w", port, err)
	}
	return waitAvailable(ctx, c, api)
}

// createOrUpdate creates obj, or updates it if it was read from the server.
func createOrUpdate(ctx context.Context, c client.Client, obj client.Object) error {
	if obj.GetResourceVersion() == "" {
		return c.Create(ctx, obj)
	}
	return c.Update(ctx, obj)
}

// waitAvailable waits up to a minute for the APIService's Available
// condition, and says what the aggregator last reported if it never is.
func waitAvailable(ctx context.Context, c client.Client, api *unstructured.Unstructured) error {
	var last []any
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(api.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(api), got); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		last, _, _ = unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, cond := range last {
			if m, ok := cond.(map[string]any); ok && m["type"] == "Available" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("APIService %s not Available (conditions %v): %w", api.GetName(), last, err)
	}
	return nil
}

// issueServingCert writes tls.crt and tls.key to dir, a serving
// certificate for dnsName signed by a new CA, and returns the CA in PEM.
func issueServingCert(dir, dnsName string) ([]byte, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "berth-test-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("serving key: %w", err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: dnsName},
		DNSNames: []string{dnsName}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("serving key: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, fmt.Errorf("writing tls.crt: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, fmt.Errorf("writing tls.key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}

// freePort asks the kernel for a free port on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// InstallTenantRoles creates the ClusterRoles the install gives tenants and
// viewers of the visibility API (config/rbac/tenant_roles.yaml and
// config/visibility/viewer_roles.yaml), named as config/default's
// namePrefix names them. A plane without kube-controller-manager does not
// aggregate them into view, edit and admin: bind them directly.
func InstallTenantRoles(ctx context.Context, c client.Client) error {
	for _, file := range []string{filepath.Join("config", "rbac", "tenant_roles.yaml"), filepath.Join("config", "visibility", "viewer_roles.yaml")} {
		data, err := os.ReadFile(filepath.Join(RepoRoot(), file))
		if err != nil {
			return fmt.Errorf("reading %s: %w", file, err)
		}
		for _, doc := range strings.Split(string(data), "\n---") {
			role := &rbacv1.ClusterRole{}
			if err := yaml.Unmarshal([]byte(doc), role); err != nil {
				return fmt.Errorf("decoding %s: %w", file, err)
			}
			if role.Name == "" {
				continue
			}
			role.Name = "berth-" + role.Name
			if err := client.IgnoreAlreadyExists(c.Create(ctx, role)); err != nil {
				return fmt.Errorf("creating ClusterRole %s: %w", role.Name, err)
			}
		}
	}
	return nil
}
