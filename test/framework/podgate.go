package framework

import (
	"context"
	"fmt"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/podgate"
)

// MutatePodPath is the path of berth's pod gate webhook (mpod.berth.dev).
const MutatePodPath = "/mutate--v1-pod"

// WebhookCalls is how many requests the webhook server of the berth running
// in this process answered, by path, as controller-runtime counts them.
func WebhookCalls() (map[string]float64, error) {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return nil, fmt.Errorf("gathering controller-runtime's metrics: %w", err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "controller_runtime_webhook_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "webhook" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out, nil
}

// WaitForPodGatePolicy waits until the API server gates queued pods by
// itself: a dry-run create of a queued pod in namespace ns comes back
// gated without a call to berth's pod gate webhook (berth must run in this
// process). The API server loads a new policy a moment after it is
// created.
func WaitForPodGatePolicy(ctx context.Context, c client.Client, ns string) error {
	probe := func(ctx context.Context) (bool, error) {
		before, err := WebhookCalls()
		if err != nil {
			return false, err
		}
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "gate-probe-",
				Labels: map[string]string{berthv1.QueueNameLabel: "probe"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/probe:latest"}}},
		}
		if err := c.Create(ctx, p, client.DryRunAll); err != nil {
			return false, fmt.Errorf("dry-run creating a queued pod in %s: %w", ns, err)
		}
		after, err := WebhookCalls()
		if err != nil {
			return false, err
		}
		gated := len(p.Spec.SchedulingGates) > 0 && p.Spec.SchedulingGates[0].Name == berthv1.AdmissionGate
		return gated && after[MutatePodPath] == before[MutatePodPath], nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, probe); err != nil {
		return fmt.Errorf("waiting for the API server to gate queued pods by the pod-gate policy: %w", err)
	}
	return nil
}

// waitForHandOffCondition waits until berth has widened its pod gate
// webhook's condition in configuration name for the gang scheduling
// hand-off (package podgate): each start installs the configuration as
// generated, and a pod created before berth widens it would not join its
// PodGroup.
func (e *Env) waitForHandOffCondition(ctx context.Context, name string) error {
	widened := func(ctx context.Context) (bool, error) {
		cfg := &admissionv1.MutatingWebhookConfiguration{}
		if err := e.Client.Get(ctx, client.ObjectKey{Name: name}, cfg); err != nil {
			return false, fmt.Errorf("reading webhook configuration %s: %w", name, err)
		}
		for _, w := range cfg.Webhooks {
			if w.Name == podgate.Webhook {
				return len(w.MatchConditions) == 1 && w.MatchConditions[0].Expression == podgate.HandOffCondition, nil
			}
		}
		return true, nil // this berth runs no pod webhook
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, widened); err != nil {
		return fmt.Errorf("waiting for berth to widen the pod gate webhook's condition for the hand-off: %w", err)
	}
	return nil
}
