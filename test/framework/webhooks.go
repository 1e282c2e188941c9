package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/berth-dev/berth/controllers/certs"
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
