package framework

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync"
	"time"

	"github.com/berth-dev/berth/controllers/notify"
)

// SinkStandIn is an HTTPS server standing in for Slack's incoming webhooks
// and any other webhook berth posts failure reports to. It records every
// accepted post by URL path (give each spec's Secret its own path), and
// every request that reached a path at all; it can be told to answer an
// error status or a redirect, or to hang until released — a sink that is
// down but still accepts connections — on every path or on some.
type SinkStandIn struct {
	srv *httptest.Server

	mu       sync.Mutex
	status   map[string]int    // by path; 200 when not set
	redirect map[string]string // by path: answer 307 to this URL
	hold     chan struct{}
	holdAll  bool
	holdOn   map[string]bool // paths that hang when holdAll is false
	held     int
	hits     map[string]int
	posts    map[string][]Post
}

// Post is one report the stand-in accepted.
type Post struct {
	// Headline is a Slack message's text, or a webhook payload's headline.
	Headline string
	// Body is the whole JSON document.
	Body string
	// At is when the stand-in received it.
	At time.Time
}

// NewSinkStandIn starts a stand-in that accepts every post.
func NewSinkStandIn() *SinkStandIn {
	s := &SinkStandIn{status: map[string]int{}, redirect: map[string]string{}, holdOn: map[string]bool{},
		hits: map[string]int{}, posts: map[string][]Post{}}
	s.srv = httptest.NewTLSServer(http.HandlerFunc(s.serve))
	return s
}

func (s *SinkStandIn) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.hits[r.URL.Path]++
	hold, status, to := s.hold, s.status[r.URL.Path], s.redirect[r.URL.Path]
	if hold != nil && !s.holdAll && !s.holdOn[r.URL.Path] {
		hold = nil
	}
	if hold != nil {
		s.held++
	}
	s.mu.Unlock()
	if to != "" {
		http.Redirect(w, r, to, http.StatusTemporaryRedirect)
		return
	}
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if status != 0 && status != http.StatusOK {
		w.WriteHeader(status)
		return
	}
	var doc struct{ Text, Headline string }
	if err := json.Unmarshal(body, &doc); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.posts[r.URL.Path] = append(s.posts[r.URL.Path], Post{Headline: doc.Text + doc.Headline, Body: string(body), At: time.Now()})
	s.mu.Unlock()
}

// URL is the stand-in's address for path (which starts with /).
func (s *SinkStandIn) URL(path string) string { return s.srv.URL + path }

// Egress lets berth reach the stand-in, which listens on loopback, and
// post to it as Slack: an admin's allowlist and Slack host, as
// notify.EgressOptions.
func (s *SinkStandIn) Egress() notify.EgressOptions {
	u, err := url.Parse(s.srv.URL)
	if err != nil {
		panic(err) // httptest's own URL
	}
	ip := netip.MustParseAddr(u.Hostname())
	return notify.EgressOptions{AllowedCIDRs: []netip.Prefix{netip.PrefixFrom(ip, ip.BitLen())}, SlackHosts: []string{u.Host}}
}

// Client is an HTTP client that trusts the stand-in's certificate.
func (s *SinkStandIn) Client() *http.Client { return s.srv.Client() }

// Answer makes the stand-in answer status to every post on path (200
// accepts).
func (s *SinkStandIn) Answer(path string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status[path] = status
}

// Redirect makes the stand-in answer every request on path with a 307
// to the URL to: a sink that tries to move berth's post elsewhere.
func (s *SinkStandIn) Redirect(path, to string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.redirect[path] = to
}

// Stall makes posts hang until Release: on the given paths, or on every
// path when none is given.
func (s *SinkStandIn) Stall(paths ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold == nil {
		s.hold = make(chan struct{})
	}
	s.holdAll = len(paths) == 0
	for _, p := range paths {
		s.holdOn[p] = true
	}
}

// Release lets stalled posts go (answered 503) and accepts posts again.
func (s *SinkStandIn) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold != nil {
		close(s.hold)
		s.hold = nil
	}
	s.holdAll = false
	clear(s.holdOn)
}

// Stalled is how many posts hung.
func (s *SinkStandIn) Stalled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// Hits is how many requests reached path, whatever they were answered.
func (s *SinkStandIn) Hits(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

// Posts returns what was accepted on path.
func (s *SinkStandIn) Posts(path string) []Post {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Post(nil), s.posts[path]...)
}

// Headlines returns a poller of the headlines accepted on path, for
// Eventually.
func (s *SinkStandIn) Headlines(path string) func() []string {
	return func() []string {
		var out []string
		for _, p := range s.Posts(path) {
			out = append(out, p.Headline)
		}
		return out
	}
}

// Close releases stalled posts and stops the server.
func (s *SinkStandIn) Close() {
	s.Release()
	s.srv.Close()
}
