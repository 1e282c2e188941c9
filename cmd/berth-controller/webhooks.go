package main

import (
	"context"
)

// afterCerts runs run once the serving certificate is ready, on every
// replica: the webhooks and the visibility API are served by all of them,
// not only by the leader.
type afterCerts struct {
	certsReady <-chan struct{}
	run        func(context.Context) error
}

// NeedLeaderElection is false: non-leaders serve too.
func (a *afterCerts) NeedLeaderElection() bool { return false }

// Start waits for the certificate, then runs. The webhooks' run registers
// them and returns (the webhook server it adds to the manager keeps
// running); the visibility API's serves until ctx ends.
func (a *afterCerts) Start(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-a.certsReady:
		return a.run(ctx)
	}
}
