package setup

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestHTTP1Only: a server that offers HTTP/2 (as controller-runtime's
// webhook server does) negotiates HTTP/1.1 once HTTP1Only has been applied,
// with a client that offers both.
func TestHTTP1Only(t *testing.T) {
	ts := httptest.NewTLSServer(http.NotFoundHandler())
	defer ts.Close()
	cert := ts.TLS.Certificates
	for _, tc := range []struct {
		name string
		opts []func(*tls.Config)
		want string
	}{
		{name: "as the webhook server sets it up", want: "h2"},
		{name: "with HTTP1Only", opts: []func(*tls.Config){HTTP1Only}, want: "http/1.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &tls.Config{Certificates: cert, NextProtos: []string{"h2"}}
			for _, o := range tc.opts {
				o(cfg)
			}
			sc, cc := net.Pipe()
			defer sc.Close()
			defer cc.Close()
			srv := tls.Server(sc, cfg)
			done := make(chan error, 1)
			go func() { done <- srv.Handshake() }()
			cli := tls.Client(cc, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}) //nolint:gosec // a handshake with a test certificate
			if err := cli.Handshake(); err != nil {
				t.Fatalf("handshake: %v", err)
			}
			if err := <-done; err != nil {
				t.Fatalf("server handshake: %v", err)
			}
			if got := cli.ConnectionState().NegotiatedProtocol; got != tc.want {
				t.Errorf("negotiated %q, want %q", got, tc.want)
			}
		})
	}
}
