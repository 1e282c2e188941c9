package framework

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/berth-dev/berth/controllers/certs"
	"github.com/berth-dev/berth/test/controlplane"
)

// InstallWebhooks creates berth's webhook configurations, named as the
// install names them, from config/webhook/manifests.yaml, each webhook
// calling base plus its path by URL — where a process-run berth listens —
// with caBundle ca (nil: left for berth's certificate management to
// inject).
func InstallWebhooks(ctx context.Context, c client.Client, base string, ca []byte) error {
	file := filepath.Join(RepoRoot(), "config", "webhook", "manifests.yaml")
	rename := func(kind, _ string) string {
		if kind == "MutatingWebhookConfiguration" {
			return certs.MutatingWebhookConfiguration
		}
		return certs.ValidatingWebhookConfiguration
	}
	return createWebhooks(ctx, c, file, base, ca, rename)
}

// createWebhooks creates the webhook configurations of a manifest file,
// named by rename(kind, name), each webhook pointed at base plus its
// Service path, trusting ca.
func createWebhooks(ctx context.Context, c client.Client, file, base string, ca []byte, rename func(kind, name string) string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("reading webhook manifests: %w", err)
	}
	point := func(cc *admissionv1.WebhookClientConfig) {
		path := "/"
		if cc.Service != nil && cc.Service.Path != nil {
			path = *cc.Service.Path
		}
		url := base + path
		*cc = admissionv1.WebhookClientConfig{URL: &url, CABundle: ca}
	}
	for _, doc := range strings.Split(string(raw), "\n---") {
		var probe struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &probe); err != nil {
			return fmt.Errorf("decoding %s: %w", file, err)
		}
		var obj client.Object
		switch probe.Kind {
		case "MutatingWebhookConfiguration":
			m := &admissionv1.MutatingWebhookConfiguration{}
			if err := yaml.Unmarshal([]byte(doc), m); err != nil {
				return fmt.Errorf("decoding %s %s: %w", file, probe.Kind, err)
			}
			for i := range m.Webhooks {
				point(&m.Webhooks[i].ClientConfig)
			}
			obj = m
		case "ValidatingWebhookConfiguration":
			v := &admissionv1.ValidatingWebhookConfiguration{}
			if err := yaml.Unmarshal([]byte(doc), v); err != nil {
				return fmt.Errorf("decoding %s %s: %w", file, probe.Kind, err)
			}
			for i := range v.Webhooks {
				point(&v.Webhooks[i].ClientConfig)
			}
			obj = v
		default:
			continue
		}
		obj.SetName(rename(probe.Kind, obj.GetName()))
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating webhook configuration %s: %w", obj.GetName(), err)
		}
	}
	return nil
}

// followWebhooks makes the webhook configurations the plane installed
// (config/webhook/manifests.yaml, every kind's webhook) call only the
// paths mux serves. A suite's berth registers the webhooks of the job
// kinds it runs (setup.Options.Parts); the API server calls every
// installed webhook, and a path without a handler answers 404, which
// failurePolicy Fail turns into a refused create. Each start filters the
// configurations as installed, so a restart with more parts gets their
// webhooks back.
func (e *Env) followWebhooks(ctx context.Context, mux *http.ServeMux) error {
	served := servedBy(mux)
	wh := e.Plane.Env.WebhookInstallOptions
	for _, installed := range wh.MutatingWebhooks {
		live := &admissionv1.MutatingWebhookConfiguration{}
		hooks := slices.DeleteFunc(slices.Clone(installed.Webhooks), func(w admissionv1.MutatingWebhook) bool { return !served(w.ClientConfig) })
		if err := e.setWebhooks(ctx, installed.Name, live, func() bool {
			same := slices.EqualFunc(live.Webhooks, hooks, func(a, b admissionv1.MutatingWebhook) bool {
				return a.Name == b.Name && sameURL(a.ClientConfig, b.ClientConfig)
			})
			live.Webhooks = hooks
			return same
		}); err != nil {
			return err
		}
	}
	for _, installed := range wh.ValidatingWebhooks {
		live := &admissionv1.ValidatingWebhookConfiguration{}
		hooks := slices.DeleteFunc(slices.Clone(installed.Webhooks), func(w admissionv1.ValidatingWebhook) bool { return !served(w.ClientConfig) })
		if err := e.setWebhooks(ctx, installed.Name, live, func() bool {
			same := slices.EqualFunc(live.Webhooks, hooks, func(a, b admissionv1.ValidatingWebhook) bool {
				return a.Name == b.Name && sameURL(a.ClientConfig, b.ClientConfig)
			})
			live.Webhooks = hooks
			return same
		}); err != nil {
			return err
		}
	}
	return nil
}

// sameURL reports whether two client configurations call the same URL.
func sameURL(a, b admissionv1.WebhookClientConfig) bool {
	return ptr.Deref(a.URL, "") == ptr.Deref(b.URL, "")
}

// moveWebhookPort points the plane's webhook configurations, as installed,
// at a new free port for berth's webhook server: the one chosen when the
// plane started was taken by another process. The next start writes them
// to the API server (followWebhooks).
func (e *Env) moveWebhookPort() error {
	port, err := controlplane.FreePort()
	if err != nil {
		return fmt.Errorf("choosing a new webhook port: %w", err)
	}
	wh := &e.Plane.Env.WebhookInstallOptions
	oldHost := net.JoinHostPort(wh.LocalServingHost, strconv.Itoa(wh.LocalServingPort))
	newHost := net.JoinHostPort(wh.LocalServingHost, strconv.Itoa(port))
	wh.LocalServingPort = port
	move := func(cc *admissionv1.WebhookClientConfig) {
		if cc.URL != nil {
			cc.URL = ptr.To(strings.Replace(*cc.URL, "//"+oldHost+"/", "//"+newHost+"/", 1))
		}
	}
	for i := range wh.MutatingWebhooks {
		for j := range wh.MutatingWebhooks[i].Webhooks {
			move(&wh.MutatingWebhooks[i].Webhooks[j].ClientConfig)
		}
	}
	for i := range wh.ValidatingWebhooks {
		for j := range wh.ValidatingWebhooks[i].Webhooks {
			move(&wh.ValidatingWebhooks[i].Webhooks[j].ClientConfig)
		}
	}
	return nil
}

// servedBy reports whether mux has a handler for the path a webhook's
// client configuration calls. A configuration without a URL (one that
// names a Service, which the plane's never do) is kept as it is.
func servedBy(mux *http.ServeMux) func(admissionv1.WebhookClientConfig) bool {
	return func(cc admissionv1.WebhookClientConfig) bool {
		if cc.URL == nil {
			return true
		}
		u, err := url.Parse(*cc.URL)
		if err != nil || mux == nil {
			return false
		}
		// envtest writes the URL as host + "/" + the Service path, which
		// starts with a slash itself: "//validate--v1-pod". The handler
		// is registered under the clean path.
		p := path.Clean(u.Path)
		_, pattern := mux.Handler(&http.Request{Method: http.MethodPost, URL: &url.URL{Path: p}})
		return pattern == p
	}
}

// setWebhooks reads the configuration name into live, lets set replace
// its webhooks (set reports whether they were already those), and writes
// it back when they changed.
func (e *Env) setWebhooks(ctx context.Context, name string, live client.Object, set func() (same bool)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := e.Client.Get(ctx, client.ObjectKey{Name: name}, live); err != nil {
			return fmt.Errorf("reading webhook configuration %s: %w", name, err)
		}
		if set() {
			return nil
		}
		if err := e.Client.Update(ctx, live); err != nil {
			return fmt.Errorf("updating webhook configuration %s: %w", name, err)
		}
		return nil
	})
}
