package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// Balancer stands in for a Service in front of several replicas (what
// kube-proxy does): each TCP connection goes to the next backend in turn.
// The API server keeps webhook connections alive, so a test that needs
// every replica to serve should check Served rather than assume it.
type Balancer struct {
	// Addr is where it listens.
	Addr     string
	backends []string
	served   []atomic.Int64
	next     atomic.Uint64
	l        net.Listener
	wg       sync.WaitGroup
}

// NewBalancer listens on a free loopback port and forwards to backends
// until ctx ends.
func NewBalancer(ctx context.Context, backends ...string) (*Balancer, error) {
	return NewBalancerOn(ctx, "127.0.0.1:0", backends...)
}

// NewBalancerOn is NewBalancer listening on addr, e.g. where an installed
// webhook configuration already points.
func NewBalancerOn(ctx context.Context, addr string, backends ...string) (*Balancer, error) {
	if len(backends) == 0 {
		return nil, errors.New("a balancer needs a backend")
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	b := &Balancer{Addr: l.Addr().String(), backends: backends, served: make([]atomic.Int64, len(backends)), l: l}
	go func() {
		<-ctx.Done()
		_ = l.Close()
	}()
	b.wg.Add(1)
	go b.accept()
	return b, nil
}

// Served is how many connections each backend got, in backends' order.
func (b *Balancer) Served() []int64 {
	out := make([]int64, len(b.served))
	for i := range b.served {
		out[i] = b.served[i].Load()
	}
	return out
}

// Wait returns once the balancer stopped accepting.
func (b *Balancer) Wait() { b.wg.Wait() }

func (b *Balancer) accept() {
	defer b.wg.Done()
	for {
		conn, err := b.l.Accept()
		if err != nil {
			return
		}
		i := int((b.next.Add(1) - 1) % uint64(len(b.backends)))
		b.served[i].Add(1)
		go forward(conn, b.backends[i])
	}
}

// forward copies both ways until either side closes.
func forward(in net.Conn, backend string) {
	defer func() { _ = in.Close() }()
	out, err := net.Dial("tcp", backend)
	if err != nil {
		return
	}
	defer func() { _ = out.Close() }()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
	go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
	<-done
}
