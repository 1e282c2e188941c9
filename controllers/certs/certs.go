// Package certs gets the webhook server its certificate and says when the
// webhooks may be served.
//
// With self-management, github.com/open-policy-agent/cert-controller (the
// library Gatekeeper and Kueue run) keeps a long-lived CA and a serving
// certificate in a Secret, renews the serving certificate while berth runs,
// and injects the CA into berth's webhook configurations. The Secret is
// mounted into every replica, the kubelet refreshes the files, and
// controller-runtime's webhook server reloads them (certwatcher): a renewal
// keeps the CA, so a replica still serving the previous certificate stays
// trusted. With external management another tool (cert-manager) writes the
// Secret and injects the CA; berth only waits for the files.
//
// Either way the webhooks are registered — and the webhook server started —
// only once the files exist, because the server cannot start without them.
package certs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Names of the files in the certificate directory (and keys of the Secret).
const (
	CAKey   = "ca.crt"
	CertKey = "tls.crt"
	KeyKey  = "tls.key"
)

// Names of the webhook configurations the CA is injected into: what the
// bundle and the Helm chart install.
const (
	MutatingWebhookConfiguration   = "berth-mutating-webhook-configuration"
	ValidatingWebhookConfiguration = "berth-validating-webhook-configuration"
)

// Management says who issues the webhook certificate.
type Management string

const (
	// Self means berth issues, renews and injects it.
	Self Management = "self"
	// External means another tool does; berth reads the files.
	External Management = "external"
)

// Options say where the certificate lives, whom it is for and how long it
// lasts.
type Options struct {
	Management Management
	// Namespace and SecretName name the Secret that holds the certificate.
	// With self-management the Secret must exist (the install creates it
	// empty) so that it can be mounted before it is filled.
	Namespace, SecretName string
	// ServiceName is the webhook Service; the certificate is valid for its
	// in-cluster DNS names and for ExtraDNSNames.
	ServiceName   string
	ExtraDNSNames []string
	// APIServices are aggregated APIs served with the same certificate:
	// it is valid for each one's Service too, and, with self-management,
	// the CA is injected into each APIService.
	APIServices []APIService
	// CertDir is where the webhook server reads tls.crt and tls.key.
	CertDir string
	// Validity of a serving certificate, how long before its expiry it is
	// renewed, and how often that is checked. Zero takes the defaults: one
	// year, 90 days, 12 hours. The CA lasts ten years.
	Validity, RenewBefore, CheckInterval time.Duration
}

// APIService names an APIService and the Service in Namespace it points at.
type APIService struct {
	Name, ServiceName string
}

// Validate says what to fix in o.
func (o Options) Validate() error {
	switch o.Management {
	case Self:
		if o.Namespace == "" || o.SecretName == "" || o.ServiceName == "" {
			return errors.New("self-managed webhook certificates need a namespace, a Secret and a Service name")
		}
	case External:
	default:
		return fmt.Errorf("--webhook-cert-management must be %s or %s, not %q", Self, External, o.Management)
	}
	if o.CertDir == "" {
		return errors.New("--webhook-cert-dir must not be empty")
	}
	if o.Validity < 0 || o.RenewBefore < 0 || o.CheckInterval < 0 {
		return errors.New("--webhook-cert-validity, --webhook-cert-renew-before and --webhook-cert-check-interval must not be negative")
	}
	if o.Validity > 0 && o.RenewBefore >= o.Validity {
		return fmt.Errorf("--webhook-cert-renew-before (%s) must be shorter than --webhook-cert-validity (%s)", o.RenewBefore, o.Validity)
	}
	return nil
}

// cert-controller watches Secrets through its own cache; scopeSecrets
// narrows its lists and watches to the certificate Secret's name, so the
// Role names that one Secret for every verb.
// +kubebuilder:rbac:groups="",namespace=berth-system,resources=secrets,resourceNames=berth-webhook-certs,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=get;list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,resourceNames=berth-mutating-webhook-configuration,verbs=update
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,resourceNames=berth-validating-webhook-configuration,verbs=update
// +kubebuilder:rbac:groups=apiregistration.k8s.io,resources=apiservices,verbs=get;list;watch
// +kubebuilder:rbac:groups=apiregistration.k8s.io,resources=apiservices,resourceNames=v1alpha1.visibility.berth.dev,verbs=update

// Manage adds to mgr what gets the certificate and returns a channel that
// is closed once the files are in CertDir and, with self-management, the
// CA is in the webhook configurations and APIServices. It runs on every replica, leader or
// not: every replica serves the webhooks.
func Manage(mgr ctrl.Manager, o Options) (<-chan struct{}, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ready := make(chan struct{})
	if o.Management == External {
		return ready, mgr.Add(filesPresent{dir: o.CertDir, ready: ready})
	}
	dns := fmt.Sprintf("%s.%s.svc", o.ServiceName, o.Namespace)
	extra := append([]string{dns + ".cluster.local"}, o.ExtraDNSNames...)
	webhooks := []rotator.WebhookInfo{
		{Name: MutatingWebhookConfiguration, Type: rotator.Mutating},
		{Name: ValidatingWebhookConfiguration, Type: rotator.Validating},
	}
	for _, a := range o.APIServices {
		svc := fmt.Sprintf("%s.%s.svc", a.ServiceName, o.Namespace)
		extra = append(extra, svc, svc+".cluster.local")
		webhooks = append(webhooks, rotator.WebhookInfo{Name: a.Name, Type: rotator.APIService})
	}
	r := &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: o.Namespace, Name: o.SecretName},
		CertDir:        o.CertDir,
		CAName:         "berth-webhook-ca",
		CAOrganization: "berth",
		DNSName:        dns,
		ExtraDNSNames:  extra,
		IsReady:        ready,
		Webhooks:       webhooks,
		FieldOwner:     "berth-controller",
		// Every replica keeps its files current; none restarts on renewal
		// (the files are reloaded), and none needs the lease.
		RequireLeaderElection:  false,
		RestartOnSecretRefresh: false,
		EnableReadinessCheck:   true,
		ServerCertDuration:     o.Validity,
		LookaheadInterval:      o.RenewBefore,
		RotationCheckFrequency: o.CheckInterval,
	}
	if err := rotator.AddRotator(scopeSecrets(mgr, o.Namespace, o.SecretName), r); err != nil {
		return nil, fmt.Errorf("adding the webhook certificate rotator: %w", err)
	}
	return ready, nil
}

// filesPresent waits for another tool's certificate to appear in dir: the
// kubelet fills a Secret volume some time after the pod starts.
type filesPresent struct {
	dir   string
	ready chan struct{}
}

// NeedLeaderElection is false: every replica serves the webhooks.
func (f filesPresent) NeedLeaderElection() bool { return false }

// Start polls until both files exist.
func (f filesPresent) Start(ctx context.Context) error {
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(context.Context) (bool, error) {
		for _, name := range []string{CertKey, KeyKey} {
			if _, err := os.Stat(filepath.Join(f.dir, name)); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("waiting for %s and %s in %s: %w", CertKey, KeyKey, f.dir, err)
	}
	ctrl.Log.WithName("certs").Info("webhook certificate files present", "dir", f.dir)
	close(f.ready)
	return nil
}
