package main

import (
	"context"
)

// webhookStarter registers the webhooks once the certificate is ready, on
// every replica (the webhooks are served by all of them, not only by the
// leader).
type webhookStarter struct {
	certsReady <-chan struct{}
	register   func() error
}

// NeedLeaderElection is false: non-leaders serve the webhooks too.
func (w *webhookStarter) NeedLeaderElection() bool { return false }

// Start waits for the certificate, then registers; the webhook server the
// registration adds to the manager keeps running after Start returns.
func (w *webhookStarter) Start(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-w.certsReady:
		return w.register()
	}
}
