package notify

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// The rules are checked here on addresses alone: no test connects
// anywhere but to its own servers on loopback.
func TestEgressCheck(t *testing.T) {
	cluster := EgressOptions{
		ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("34.118.224.0/20")},
		PodCIDRs:     []netip.Prefix{netip.MustParsePrefix("35.200.0.0/14")},
	}
	allowed := cluster
	allowed.AllowedCIDRs = []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("127.0.0.1/32")}
	cases := []struct {
		ip       string
		opts     EgressOptions
		wantRule string // "" when allowed
	}{
		{"203.0.113.10", cluster, ""},
		{"2001:db8::1", cluster, ""},
		{"127.0.0.1", cluster, "loopback"},
		{"127.1.2.3", cluster, "loopback"},
		{"::1", cluster, "loopback"},
		{"::ffff:127.0.0.1", cluster, "loopback"},
		{"169.254.169.254", cluster, "link-local"},
		{"fe80::1", cluster, "link-local"},
		{"fe80::1%eth0", cluster, "link-local"},
		{"10.0.0.1", cluster, "private"},
		{"172.16.5.4", cluster, "private"},
		{"192.168.1.1", cluster, "private"},
		{"fd00:ec2::254", cluster, "private"},
		{"100.64.0.1", cluster, "carrier-grade NAT"},
		{"0.0.0.0", cluster, "unspecified"},
		{"::", cluster, "unspecified"},
		{"224.0.0.251", cluster, "multicast"},
		{"255.255.255.255", cluster, "multicast or broadcast"},
		{"ff02::1", cluster, "multicast"},
		{"64:ff9b::a9fe:a9fe", cluster, "link-local"}, // 169.254.169.254 through NAT64
		{"34.118.230.1", cluster, "Service range"},
		{"35.201.0.9", cluster, "pod range"},
		// An admin's allowlist wins over every rule, and only for its ranges.
		{"10.20.3.4", allowed, ""},
		{"10.21.3.4", allowed, "private"},
		{"127.0.0.1", allowed, ""},
		{"127.0.0.2", allowed, "loopback"},
	}
	for _, tc := range cases {
		t.Run(tc.ip, func(t *testing.T) {
			err := NewEgress(tc.opts).Check(netip.MustParseAddr(tc.ip))
			if tc.wantRule == "" {
				if err != nil {
					t.Fatalf("Check(%s) = %v, want allowed", tc.ip, err)
				}
				return
			}
			var ee *EgressError
			if !errors.As(err, &ee) || !strings.Contains(ee.Rule, tc.wantRule) {
				t.Fatalf("Check(%s) = %v, want refused as %s", tc.ip, err, tc.wantRule)
			}
			// The refusal names the rule, not the address (unless the
			// rule's own range is written as that address).
			if rest := strings.Replace(err.Error(), ee.Rule, "", 1); strings.Contains(rest, strings.Split(tc.ip, "%")[0]) {
				t.Errorf("the refusal %q quotes the address", err)
			}
		})
	}
}

// loopbackServer serves on 127.0.0.1 and counts its requests.
func loopbackServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	var hits atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func ok(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }

var loopbackOnly = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}

// TestEgressDialer: the address is checked where it is dialled, after
// resolution, so a name that resolves to a refused address is refused.
func TestEgressDialer(t *testing.T) {
	srv, hits := loopbackServer(t, ok)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	byName := "https://localhost:" + strconv.Itoa(port) + secretPath
	cases := []struct {
		name    string
		allowed []netip.Prefix
		url     string
		wantOK  bool
	}{
		{"loopback by address, not allowed", nil, srv.URL + secretPath, false},
		{"loopback by a name that resolves to it, not allowed", nil, byName, false},
		{"loopback allowed by the admin", loopbackOnly, srv.URL + secretPath, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := hits.Load()
			c, err := NewEgress(EgressOptions{AllowedCIDRs: tc.allowed}).Guard(srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantOK {
				err = NewWebhookSink(tc.url, c).Send(context.Background(), sampleReport())
				if err != nil || hits.Load() != before+1 {
					t.Fatalf("Send = %v, %d requests; want delivered", err, hits.Load()-before)
				}
				return
			}
			for _, s := range []Sink{NewSlackSink(tc.url, c), NewWebhookSink(tc.url, c)} {
				expectRefused(t, s.Send(context.Background(), sampleReport()))
			}
			if hits.Load() != before {
				t.Errorf("the server got %d requests from a refused client", hits.Load()-before)
			}
		})
	}
}

// expectRefused checks a delivery the loopback rule refused.
func expectRefused(t *testing.T, err error) {
	t.Helper()
	var se *SendError
	if !errors.As(err, &se) || se.Retryable || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("Send = %v, want a non-retryable refusal naming the loopback rule", err)
	}
	if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("the refusal %q quotes the URL or the address", err)
	}
	if oc := OutcomeOf(err); oc.Reason != "EgressRefused" {
		t.Errorf("outcome %+v, want EgressRefused", oc)
	}
}

// TestNoRedirects: a sink that redirects fails, without following it,
// and says so without the URL.
func TestNoRedirects(t *testing.T) {
	target, targetHits := loopbackServer(t, ok)
	for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		redirector, _ := loopbackServer(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/stolen"+r.URL.Path, code)
		})
		c, err := NewEgress(EgressOptions{AllowedCIDRs: loopbackOnly}).Guard(redirector.Client())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []Sink{NewSlackSink(redirector.URL+secretPath, c), NewWebhookSink(redirector.URL+secretPath, c)} {
			t.Run(s.Type()+" "+http.StatusText(code), func(t *testing.T) {
				err := s.Send(context.Background(), sampleReport())
				var se *SendError
				if !errors.As(err, &se) || se.Retryable || !se.Redirected() || !strings.Contains(err.Error(), "redirected") {
					t.Fatalf("Send = %v, want a non-retryable redirect failure", err)
				}
				if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "stolen") {
					t.Errorf("the error %q quotes a URL", err)
				}
				if n := targetHits.Load(); n != 0 {
					t.Errorf("the redirect was followed: the target got %d requests", n)
				}
				if oc := OutcomeOf(err); oc.Reason != "SinkRedirected" {
					t.Errorf("outcome %+v, want SinkRedirected", oc)
				}
			})
		}
	}
}

// TestNoProxy: a proxy configured on the client it is given (or in the
// environment) would connect on berth's behalf, past the rules: the
// guarded client goes direct.
func TestNoProxy(t *testing.T) {
	proxy, proxyHits := loopbackServer(t, ok)
	target, targetHits := loopbackServer(t, ok)
	proxyURL, err := url.Parse(proxy.URL)
	if err != nil {
		t.Fatal(err)
	}
	given := target.Client()
	tr, isTransport := given.Transport.(*http.Transport)
	if !isTransport {
		t.Fatalf("httptest's client has a %T", given.Transport)
	}
	tr.Proxy = http.ProxyURL(proxyURL)
	c, err := NewEgress(EgressOptions{AllowedCIDRs: loopbackOnly}).Guard(given)
	if err != nil {
		t.Fatal(err)
	}
	if err := NewWebhookSink(target.URL, c).Send(context.Background(), sampleReport()); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if proxyHits.Load() != 0 || targetHits.Load() != 1 {
		t.Errorf("proxy got %d requests, target %d; want 0 and 1", proxyHits.Load(), targetHits.Load())
	}
}

func TestSlackHostAllowed(t *testing.T) {
	cases := []struct {
		hosts []string
		host  string
		want  bool
	}{
		{nil, "hooks.slack.com", true},
		{nil, "HOOKS.Slack.com.", true},
		{nil, "hooks.slack.com:443", true},
		{nil, "hooks.slack-gov.com", true},
		{nil, "hooks.slack.com:8443", false},
		{nil, "hooks.slack.com.evil.example", false},
		{nil, "evil.example", false},
		{nil, "127.0.0.1", false},
		{[]string{"chat.internal.example"}, "chat.internal.example", true},
		{[]string{"chat.internal.example"}, "hooks.slack.com", false},
		{[]string{"127.0.0.1:8443"}, "127.0.0.1:8443", true},
		{[]string{"127.0.0.1:8443"}, "127.0.0.1", false},
		{[]string{"[::1]:8443"}, "[::1]:8443", true},
	}
	for _, tc := range cases {
		if got := NewEgress(EgressOptions{SlackHosts: tc.hosts}).SlackHostAllowed(tc.host); got != tc.want {
			t.Errorf("hosts %v: SlackHostAllowed(%q) = %v, want %v", tc.hosts, tc.host, got, tc.want)
		}
	}
}
