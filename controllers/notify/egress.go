package notify

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"time"
)

// A tenant chooses the URL of its sink, and berth posts to it from inside
// the cluster network. Without rules that makes berth's pod a client any
// tenant can aim: at the cloud's metadata service, at the API server, at
// another tenant's pods. The rules below refuse the address berth is
// about to connect to, checked after name resolution in the dialer itself,
// so a name that resolves to a public address when the policy is read and
// to a private one when the report is sent (DNS rebinding) is refused too.

// DefaultSlackHosts are the hosts of Slack's incoming webhooks, the only
// ones a Slack sink posts to unless an admin allows others.
func DefaultSlackHosts() []string { return []string{"hooks.slack.com", "hooks.slack-gov.com"} }

// EgressOptions are an admin's say in where sinks may be reached.
type EgressOptions struct {
	// AllowedCIDRs are ranges berth connects to although a rule refuses
	// them: an admin's internal sinks. They win over every rule.
	AllowedCIDRs []netip.Prefix
	// ServiceCIDRs and PodCIDRs are the cluster's Service and pod ranges,
	// refused unless allowed. Ranges inside the private, CGNAT or link-local
	// blocks are refused anyway; these matter for clusters whose ranges are
	// public addresses.
	ServiceCIDRs, PodCIDRs []netip.Prefix
	// SlackHosts are the hosts a Slack sink may post to, each host or
	// host:port (443 when none) (nil: DefaultSlackHosts).
	SlackHosts []string
}

// egressRule refuses the addresses in its prefixes; name is what a refusal
// says.
type egressRule struct {
	name     string
	prefixes []netip.Prefix
}

// Egress decides which addresses berth connects to on behalf of a sink,
// and which hosts a Slack sink may name. It is immutable once built, so
// dialers of every worker share it.
type Egress struct {
	nat64      netip.Prefix
	allowed    []netip.Prefix
	rules      []egressRule
	slackHosts []string
}

// NewEgress returns the rules with the admin's options applied.
func NewEgress(o EgressOptions) *Egress {
	e := &Egress{nat64: netip.MustParsePrefix("64:ff9b::/96"), allowed: slices.Clone(o.AllowedCIDRs), slackHosts: DefaultSlackHosts()}
	if o.SlackHosts != nil {
		e.slackHosts = nil
		for _, h := range o.SlackHosts {
			e.slackHosts = append(e.slackHosts, normalHost(h))
		}
	}
	// The cluster's own ranges first: they are the most specific reason.
	if len(o.ServiceCIDRs) > 0 {
		e.rules = append(e.rules, egressRule{"the cluster's Service range (--cluster-service-cidrs)", slices.Clone(o.ServiceCIDRs)})
	}
	if len(o.PodCIDRs) > 0 {
		e.rules = append(e.rules, egressRule{"the cluster's pod range (--cluster-pod-cidrs)", slices.Clone(o.PodCIDRs)})
	}
	e.rules = append(e.rules,
		egressRule{"an unspecified address (0.0.0.0/8, ::)", prefixes("0.0.0.0/8", "::/128")},
		egressRule{"a loopback address (127.0.0.0/8, ::1)", prefixes("127.0.0.0/8", "::1/128")},
		egressRule{"a link-local address (169.254.0.0/16, fe80::/10), where cloud metadata services answer", prefixes("169.254.0.0/16", "fe80::/10")},
		egressRule{"a private address (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, fc00::/7)",
			prefixes("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")},
		egressRule{"a carrier-grade NAT address (100.64.0.0/10)", prefixes("100.64.0.0/10")},
		egressRule{"a multicast or broadcast address (224.0.0.0/4, 255.255.255.255, ff00::/8)",
			prefixes("224.0.0.0/4", "255.255.255.255/32", "ff00::/8")},
	)
	return e
}

func prefixes(cidrs ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(cidrs))
	for i, c := range cidrs {
		out[i] = netip.MustParsePrefix(c)
	}
	return out
}

// EgressError is a connection berth refused to make. It names the rule
// that refused it, never the address or the URL: the URL is a credential,
// and the address would tell a tenant what an internal name resolves to.
type EgressError struct {
	// Rule is the refused range, e.g. "a loopback address (127.0.0.0/8, ::1)".
	Rule string
}

func (e *EgressError) Error() string {
	return fmt.Sprintf("berth does not connect to %s, where the sink's address is; "+
		"an admin allows an internal sink with --notification-allowed-cidrs", e.Rule)
}

// Check returns an *EgressError when berth must not connect to ip, nil
// when it may.
func (e *Egress) Check(ip netip.Addr) error {
	// ::ffff:127.0.0.1 is 127.0.0.1, and a zone (fe80::1%eth0) would make
	// the address match no prefix.
	ip = ip.Unmap().WithZone("")
	if !ip.IsValid() {
		return &EgressError{Rule: "an address berth could not read"}
	}
	for _, p := range e.allowed {
		if p.Contains(ip) {
			return nil
		}
	}
	for _, r := range e.rules {
		for _, p := range r.prefixes {
			if p.Contains(ip) {
				return &EgressError{Rule: r.name}
			}
		}
	}
	// The well-known NAT64 prefix carries an IPv4 address that a NAT64
	// gateway connects to on berth's behalf: that one is checked too.
	if e.nat64.Contains(ip) {
		b := ip.As16()
		return e.Check(netip.AddrFrom4([4]byte(b[12:])))
	}
	return nil
}

// control is the dialer's hook between creating a socket and connecting
// it: address is the resolved IP and port about to be dialled.
func (e *Egress) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &EgressError{Rule: "an address berth could not read"}
	}
	return e.Check(ap.Addr())
}

// refuseRedirect makes the client return a redirect as the response instead
// of following it; statusError then fails the delivery.
func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Client returns the HTTP client berth posts to sinks with: every
// connection is checked by the egress rules, redirects are not followed,
// proxies from the environment are not used (a proxy would connect on
// berth's behalf, past the rules), and a request takes at most timeout.
func (e *Egress) Client(timeout time.Duration) *http.Client {
	c, _ := e.Guard(&http.Client{Timeout: timeout}) // only a foreign transport fails
	return c
}

// Guard returns a copy of c that keeps the rules of Client. Of c's
// transport only the TLS configuration is kept (tests trust their own
// server's certificate this way): the connection is made by a transport
// of berth's own, with no proxy, so no dial or proxy hook of c's can
// bypass the rules. It fails for a transport other than *http.Transport,
// whose TLS configuration it cannot take.
func (e *Egress) Guard(c *http.Client) (*http.Client, error) {
	// net/http's default transport's settings, without its proxy.
	t := &http.Transport{ForceAttemptHTTP2: true, MaxIdleConns: 100, IdleConnTimeout: 90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second, ExpectContinueTimeout: time.Second}
	switch tr := c.Transport.(type) {
	case nil:
	case *http.Transport:
		if tr.TLSClientConfig != nil {
			t.TLSClientConfig = tr.TLSClientConfig.Clone()
		}
	default:
		return nil, fmt.Errorf("the sinks' HTTP client has a %T: berth takes the TLS configuration of an *http.Transport only", tr)
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: e.control}
	t.DialContext = dialer.DialContext
	out := *c
	out.Transport = t
	out.CheckRedirect = refuseRedirect
	if out.Timeout == 0 {
		out.Timeout = 10 * time.Second
	}
	return &out, nil
}

// SlackHostAllowed reports whether a Slack sink may post to host (a URL's
// host, with or without a port). An allowed host without a port allows
// port 443 only; one with a port, that port only.
func (e *Egress) SlackHostAllowed(host string) bool {
	name, port := splitHostPort(host)
	for _, h := range e.slackHosts {
		if hn, hp := splitHostPort(h); hn == name && hp == port {
			return true
		}
	}
	return false
}

// splitHostPort is host's name, normalised, and port (443 when none).
func splitHostPort(host string) (name, port string) {
	name, port, err := net.SplitHostPort(host)
	if err != nil {
		name, port = host, ""
	}
	if port == "" {
		port = "443"
	}
	return normalHost(strings.Trim(name, "[]")), port
}

// SlackHosts are the hosts a Slack sink may post to.
func (e *Egress) SlackHosts() []string { return slices.Clone(e.slackHosts) }

// normalHost is a host name as compared: lower case, without the root's
// trailing dot.
func normalHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
}
