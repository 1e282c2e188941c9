// Package faultproxy puts a fault-injecting HTTPS proxy between a client
// (berth) and the API server: it can let a write commit and then answer
// 504 or drop the connection, cut watch streams and refuse to resume them
// (410 Gone), delay requests and throttle them (429). The client talks to
// the proxy with the kubeconfig it writes; the proxy talks to the API
// server with the credentials of the rest.Config it is given, so every
// request reaches the API server as that user.
package faultproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Kind is a kind of fault.
type Kind string

// The faults the proxy injects.
const (
	// CommitThen504 forwards the request, lets it commit, and answers
	// 504 Gateway Timeout: the client cannot know the write happened.
	CommitThen504 Kind = "commit-then-504"
	// CommitThenDrop forwards the request, lets it commit, and closes the
	// connection without an answer.
	CommitThenDrop Kind = "commit-then-drop"
	// CutWatch ends a watch stream after Fault.After, and answers the
	// watch that resumes it with 410 Gone, so the client must list again.
	CutWatch Kind = "cut-watch"
	// Latency delays the request by Fault.Delay before forwarding it.
	Latency Kind = "latency"
	// Throttle answers 429 Too Many Requests with Retry-After: 1.
	Throttle Kind = "throttle"
)

// Fault is one fault and the requests it applies to.
type Fault struct {
	Kind Kind
	// Match selects the requests; nil selects all.
	Match func(r *http.Request, body []byte) bool
	// Probability is the share of matching requests that get the fault.
	Probability float64
	// After is how long a watch stream lives before CutWatch cuts it.
	After time.Duration
	// Delay is how long Latency holds a request.
	Delay time.Duration
}

// Proxy is a running fault-injecting proxy. It is safe for concurrent use.
type Proxy struct {
	server     *httptest.Server
	upstream   *httputil.ReverseProxy
	kubeconfig string

	mu       sync.Mutex
	faults   []Fault
	rng      *rand.Rand
	injected map[Kind]int
	gone     map[string]bool // watch paths whose next resume gets 410
}

// Start runs a proxy to the API server of cfg and writes a kubeconfig for
// it to kubeconfigPath. It stops when ctx ends.
func Start(ctx context.Context, cfg *rest.Config, kubeconfigPath string, seed uint64) (*Proxy, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("parsing the API server's address %q: %w", cfg.Host, err)
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the transport to the API server: %w", err)
	}
	p := &Proxy{rng: rand.New(rand.NewPCG(seed, 1)), injected: map[Kind]int{}, gone: map[string]bool{}}
	p.upstream = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			// The proxy's own credentials authenticate upstream.
			pr.Out.Header.Del("Authorization")
		},
		Transport:     transport,
		FlushInterval: -1, // watch events go through as they come
		// Cut streams and dropped connections are the point, not news.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	p.server = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	p.server.StartTLS()
	go func() {
		<-ctx.Done()
		p.server.CloseClientConnections()
		p.server.Close()
	}()
	if err := p.writeKubeconfig(kubeconfigPath); err != nil {
		p.server.Close()
		return nil, err
	}
	p.kubeconfig = kubeconfigPath
	return p, nil
}

// Kubeconfig is the path of the kubeconfig that talks to the proxy.
func (p *Proxy) Kubeconfig() string { return p.kubeconfig }

// Set replaces the faults the proxy injects; none lets every request
// through.
func (p *Proxy) Set(faults ...Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = faults
}

// Injected counts the faults injected so far, by kind.
func (p *Proxy) Injected() map[Kind]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[Kind]int, len(p.injected))
	for k, v := range p.injected {
		out[k] = v
	}
	return out
}

func (p *Proxy) writeKubeconfig(path string) error {
	cert := p.server.Certificate()
	if cert == nil {
		return errors.New("the proxy has no certificate")
	}
	ca := pemCertificate(cert.Raw)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["proxy"] = &clientcmdapi.Cluster{Server: p.server.URL, CertificateAuthorityData: ca}
	// Any token: the proxy drops it and authenticates with its own.
	kc.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{Token: "faultproxy"}
	kc.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	kc.CurrentContext = "proxy"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return fmt.Errorf("encoding the proxy's kubeconfig: %w", err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("writing the proxy's kubeconfig: %w", err)
	}
	return nil
}

// pick returns the fault to inject into the request, if any, and counts
// it.
func (p *Proxy) pick(r *http.Request, body []byte) (Fault, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.faults {
		if f.Kind == CutWatch && !isWatch(r) {
			continue
		}
		if (f.Match == nil || f.Match(r, body)) && p.rng.Float64() < f.Probability {
			p.injected[f.Kind]++
			return f, true
		}
	}
	return Fault{}, false
}

// status writes a Kubernetes Status error.
func status(w http.ResponseWriter, code int, reason, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"kind": "Status", "apiVersion": "v1", "status": "Failure",
		"code": code, "reason": reason, "message": message,
	})
}
