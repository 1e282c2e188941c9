// Package certs gives the webhook server a certificate without any other
// tool: a self-signed CA and a serving certificate for the webhook Service,
// kept in a Secret so that every replica serves the same one, written to the
// server's certificate directory, and injected as the CA bundle of berth's
// webhook configurations. Certificates are renewed when less than a third
// of their lifetime is left.
package certs

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Keys of the Secret and names of the files in the certificate directory.
const (
	CAKey   = "ca.crt"
	CertKey = "tls.crt"
	KeyKey  = "tls.key"
)

// Options say where the certificate lives and whom it is for.
type Options struct {
	// Namespace and SecretName of the Secret holding the certificate.
	Namespace, SecretName string
	// ServiceName is the webhook Service; the certificate is valid for its
	// in-cluster DNS names.
	ServiceName string
	// CertDir is the webhook server's certificate directory.
	CertDir string
	// MutatingWebhookConfigurations and ValidatingWebhookConfigurations get
	// the CA as caBundle.
	MutatingWebhookConfigurations, ValidatingWebhookConfigurations []string
	// Validity of new certificates.
	Validity time.Duration
	// Now returns the current time.
	Now func() time.Time
}

// +kubebuilder:rbac:groups="",namespace=berth-system,resources=secrets,verbs=get;create;update
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,resourceNames=berth-mutating-webhook-configuration,verbs=get;update;patch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,resourceNames=berth-validating-webhook-configuration,verbs=get;update;patch

// Ensure makes sure a valid certificate exists in the Secret, writes it to
// CertDir and injects its CA into the webhook configurations.
func Ensure(ctx context.Context, c client.Client, o Options) error {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Validity == 0 {
		o.Validity = 365 * 24 * time.Hour
	}
	secret, err := ensureSecret(ctx, c, o)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.CertDir, 0o700); err != nil {
		return fmt.Errorf("creating certificate directory: %w", err)
	}
	for _, k := range []string{CAKey, CertKey, KeyKey} {
		if err := os.WriteFile(filepath.Join(o.CertDir, k), secret.Data[k], 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", k, err)
		}
	}
	for _, name := range o.MutatingWebhookConfigurations {
		if err := injectCA(ctx, c, &admissionregv1.MutatingWebhookConfiguration{}, name, secret.Data[CAKey]); err != nil {
			return err
		}
	}
	for _, name := range o.ValidatingWebhookConfigurations {
		if err := injectCA(ctx, c, &admissionregv1.ValidatingWebhookConfiguration{}, name, secret.Data[CAKey]); err != nil {
			return err
		}
	}
	return nil
}

func ensureSecret(ctx context.Context, c client.Client, o Options) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.SecretName}, secret)
	switch {
	case apierrors.IsNotFound(err):
		data, gerr := Generate(o)
		if gerr != nil {
			return nil, gerr
		}
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.SecretName}, Type: corev1.SecretTypeTLS, Data: data}
		if cerr := c.Create(ctx, secret); cerr != nil {
			if apierrors.IsAlreadyExists(cerr) { // another replica won the race
				return ensureSecret(ctx, c, o)
			}
			return nil, fmt.Errorf("creating certificate secret: %w", cerr)
		}
		return secret, nil
	case err != nil:
		return nil, fmt.Errorf("reading certificate secret: %w", err)
	}
	if valid(secret.Data, o) {
		return secret, nil
	}
	data, err := Generate(o)
	if err != nil {
		return nil, err
	}
	secret.Data = data
	if err := c.Update(ctx, secret); err != nil {
		return nil, fmt.Errorf("renewing certificate secret: %w", err)
	}
	return secret, nil
}

// valid reports whether data holds a certificate for the service with more
// than a third of its lifetime left.
func valid(data map[string][]byte, o Options) bool {
	block, _ := pem.Decode(data[CertKey])
	if block == nil || len(data[KeyKey]) == 0 || len(data[CAKey]) == 0 {
		return false
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return false
	}
	life := cert.NotAfter.Sub(cert.NotBefore)
	if o.Now().After(cert.NotAfter.Add(-life / 3)) {
		return false
	}
	return cert.VerifyHostname(dnsNames(o)[0]) == nil
}

func dnsNames(o Options) []string {
	return []string{
		fmt.Sprintf("%s.%s.svc", o.ServiceName, o.Namespace),
		fmt.Sprintf("%s.%s.svc.cluster.local", o.ServiceName, o.Namespace),
		fmt.Sprintf("%s.%s", o.ServiceName, o.Namespace),
	}
}

// Generate creates a CA and a serving certificate signed by it.
func Generate(o Options) (map[string][]byte, error) {
	now := o.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: "berth-webhook-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(o.Validity), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating serving key: %w", err)
	}
	names := dnsNames(o)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano() + 1), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(o.Validity),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding serving key: %w", err)
	}
	return map[string][]byte{
		CAKey:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		CertKey: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyKey:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// injectCA sets the caBundle of every webhook of a Mutating- or
// ValidatingWebhookConfiguration.
func injectCA(ctx context.Context, c client.Client, cfg client.Object, name string, ca []byte) error {
	kind := fmt.Sprintf("%T", cfg)
	if err := c.Get(ctx, client.ObjectKey{Name: name}, cfg); err != nil {
		return fmt.Errorf("reading %s %s: %w", kind, name, err)
	}
	base := cfg.DeepCopyObject().(client.Object)
	changed := false
	set := func(cc *admissionregv1.WebhookClientConfig) {
		if !bytes.Equal(cc.CABundle, ca) {
			cc.CABundle, changed = ca, true
		}
	}
	switch w := cfg.(type) {
	case *admissionregv1.MutatingWebhookConfiguration:
		for i := range w.Webhooks {
			set(&w.Webhooks[i].ClientConfig)
		}
	case *admissionregv1.ValidatingWebhookConfiguration:
		for i := range w.Webhooks {
			set(&w.Webhooks[i].ClientConfig)
		}
	}
	if !changed {
		return nil
	}
	if err := c.Patch(ctx, cfg, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("injecting CA into %s %s: %w", kind, name, err)
	}
	return nil
}
