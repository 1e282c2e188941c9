package framework

import (
	"errors"
	"fmt"
	"net"
	"sync"
)

// ConnRecorder is a TCP listener that stands for an address inside the
// cluster network a tenant might aim berth at (a metadata service, the API
// server, another team's pod): it accepts connections, counts them and
// closes them at once. A test asserts it was never reached.
type ConnRecorder struct {
	l    net.Listener
	mu   sync.Mutex
	n    int
	done chan struct{}
}

// NewConnRecorder listens on addr ("127.0.0.2:0" for a free port on an
// address of the loopback block other than the one a suite allows).
func NewConnRecorder(addr string) (*ConnRecorder, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	r := &ConnRecorder{l: l, done: make(chan struct{})}
	go r.accept()
	return r, nil
}

func (r *ConnRecorder) accept() {
	defer close(r.done)
	for {
		c, err := r.l.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		r.mu.Lock()
		r.n++
		r.mu.Unlock()
		_ = c.Close()
	}
}

// Addr is the host:port the recorder listens on.
func (r *ConnRecorder) Addr() string { return r.l.Addr().String() }

// Connections is how many connections reached the recorder.
func (r *ConnRecorder) Connections() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// Close stops listening.
func (r *ConnRecorder) Close() error {
	err := r.l.Close()
	<-r.done
	return err
}
