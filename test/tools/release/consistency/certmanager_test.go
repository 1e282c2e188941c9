package consistency

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestCertManagement: with certManagement=cert-manager the chart hands the
// webhook certificate to cert-manager — an Issuer (or the user's), a
// Certificate writing the Secret the pods mount, the CA injected by
// annotation, berth in external mode — and ships no empty Secret for
// berth to fill. With self (the default) it is the other way round.
func TestCertManagement(t *testing.T) {
	const ns = "queues"
	cases := []struct {
		name   string
		values map[string]any
		// issuer is the Certificate's issuerRef; empty means self mode.
		issuer     map[string]any
		ownIssuer  bool
		wantArg    string
		wantSecret bool
	}{{
		name:       "self",
		values:     nil,
		wantArg:    "--webhook-cert-management=self",
		wantSecret: true,
	}, {
		name:      "cert-manager, self-signed",
		values:    map[string]any{"certManagement": "cert-manager"},
		issuer:    map[string]any{"name": "berth-selfsigned-issuer", "kind": "Issuer", "group": "cert-manager.io"},
		ownIssuer: true,
		wantArg:   "--webhook-cert-management=external",
	}, {
		name: "cert-manager, the cluster's issuer",
		values: map[string]any{
			"certManagement": "cert-manager",
			"certManager":    map[string]any{"issuerRef": map[string]any{"name": "corp-ca", "kind": "ClusterIssuer"}},
		},
		issuer:  map[string]any{"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"},
		wantArg: "--webhook-cert-management=external",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs := render(t, ns, c.values)
			args := manager(t, objs).Args
			if !slices.Contains(args, c.wantArg) {
				t.Errorf("args %q lack %s", args, c.wantArg)
			}
			if got := len(find(objs, "Secret", "berth-webhook-certs")); got != count(c.wantSecret) {
				t.Errorf("%d Secrets berth-webhook-certs, want the empty one only in self mode", got)
			}
			if got := len(find(objs, "Issuer", "")); got != count(c.ownIssuer) {
				t.Errorf("%d Issuers, want %v", got, c.ownIssuer)
			}
			if c.issuer == nil {
				if n := len(find(objs, "Certificate", "")); n != 0 {
					t.Errorf("%d Certificates in self mode", n)
				}
				checkInjection(t, objs, "")
				return
			}
			cert := one(t, objs, "Certificate", "berth-webhook-cert")
			checkCertificate(t, cert, ns, c.issuer)
			checkInjection(t, objs, ns+"/berth-webhook-cert")
			volume := controller(t, objs).Spec.Template.Spec.Volumes[0]
			if volume.Secret == nil || volume.Secret.SecretName != "berth-webhook-certs" {
				t.Errorf("the pods mount %+v, not the Secret cert-manager writes", volume)
			}
		})
	}
}

// checkCertificate: the Certificate writes berth's Secret, for the webhook
// Service's names, from issuer.
func checkCertificate(t *testing.T, cert *unstructured.Unstructured, ns string, issuer map[string]any) {
	t.Helper()
	secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	if secret != "berth-webhook-certs" {
		t.Errorf("Certificate writes Secret %q, want berth-webhook-certs", secret)
	}
	names, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	want := []string{"berth-webhook-service." + ns + ".svc", "berth-webhook-service." + ns + ".svc.cluster.local",
		"berth-visibility." + ns + ".svc", "berth-visibility." + ns + ".svc.cluster.local"}
	if !slices.Equal(names, want) {
		t.Errorf("Certificate DNS names %q, want %q", names, want)
	}
	ref, _, _ := unstructured.NestedMap(cert.Object, "spec", "issuerRef")
	for k, v := range issuer {
		if ref[k] != v {
			t.Errorf("issuerRef.%s = %v, want %v", k, ref[k], v)
		}
	}
}

// checkInjection: both webhook configurations and the APIService carry cert-manager's
// inject-ca-from annotation pointing at from, or no annotation at all when
// from is empty (berth injects the CA itself).
func checkInjection(t *testing.T, objs []*unstructured.Unstructured, from string) {
	t.Helper()
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "APIService"} {
		if len(find(objs, kind, "")) == 0 {
			t.Errorf("no %s to inject the CA into", kind)
		}
		for _, o := range find(objs, kind, "") {
			got, ok := o.GetAnnotations()["cert-manager.io/inject-ca-from"]
			if from == "" && ok {
				t.Errorf("%s %s: inject-ca-from %q in self mode", kind, o.GetName(), got)
			}
			if from != "" && got != from {
				t.Errorf("%s %s: inject-ca-from %q, want %q", kind, o.GetName(), got, from)
			}
		}
	}
}

// TestCertManagerDurations: the certificate's lifetime values apply to the
// Certificate in cert-manager mode, and to berth's flags only in self mode.
func TestCertManagerDurations(t *testing.T) {
	webhook := map[string]any{"certValidity": "720h", "certRenewBefore": "240h", "certDNSNames": []any{"berth.example.com"}}
	objs := render(t, "berth-system", map[string]any{"certManagement": "cert-manager", "webhook": webhook})
	cert := one(t, objs, "Certificate", "berth-webhook-cert")
	for field, want := range map[string]string{"duration": "720h", "renewBefore": "240h"} {
		if got, _, _ := unstructured.NestedString(cert.Object, "spec", field); got != want {
			t.Errorf("Certificate %s = %q, want %q", field, got, want)
		}
	}
	if names, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames"); !slices.Contains(names, "berth.example.com") {
		t.Errorf("Certificate DNS names %q lack webhook.certDNSNames", names)
	}
	for _, a := range manager(t, objs).Args {
		for _, flag := range []string{"--webhook-cert-validity=", "--webhook-cert-renew-before=", "--webhook-cert-dns-names="} {
			if hasArg([]string{a}, flag) {
				t.Errorf("self-managed certificate flag %s passed in cert-manager mode", a)
			}
		}
	}
}

// count is how many objects a test expects when want says whether one is.
func count(want bool) int {
	if want {
		return 1
	}
	return 0
}
