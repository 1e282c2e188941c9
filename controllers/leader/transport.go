package leader

import (
	"net/http"
	"strings"
)

// FenceTransport returns a wrapper for a rest.Config's transport (its
// Wrap) under which every write fails with the error of fence while fence
// returns one. Writes every replica makes whether or not it leads — the
// webhook certificate Secret and configurations, the APIService, events,
// leases — are let through.
//
// The check sits in the transport, after client-go's client-side rate
// limiter and just before the request goes out: a check made when a
// controller calls the client would let through a write that then waited
// in the rate limiter — or in a paused process — past the renew deadline.
func FenceTransport(fence func() error) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return &fencedTransport{next: rt, fence: fence}
	}
}

type fencedTransport struct {
	next  http.RoundTripper
	fence func() error
}

// RoundTrip sends req unless it is a fenced write and fence refuses it.
func (t *fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if isWrite(req.Method) && !exemptPath(req.URL.Path) {
		if err := t.fence(); err != nil {
			if req.Body != nil {
				_ = req.Body.Close() // RoundTrip must close the body, even on errors
			}
			return nil, err
		}
	}
	return t.next.RoundTrip(req)
}

// WrappedRoundTripper lets client-go's transport helpers see through the
// fence.
func (t *fencedTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

// isWrite reports whether an HTTP method changes state on the API server.
func isWrite(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// exemptResources are the resources every replica may write, keyed by
// group and resource ("" is the core group).
var exemptResources = map[[2]string]bool{
	{"", "secrets"}: true, {"", "events"}: true, {"events.k8s.io", "events"}: true,
	{"coordination.k8s.io", "leases"}:                                   true,
	{"admissionregistration.k8s.io", "mutatingwebhookconfigurations"}:   true,
	{"admissionregistration.k8s.io", "validatingwebhookconfigurations"}: true,
	{"apiregistration.k8s.io", "apiservices"}:                           true,
}

// exemptPath reports whether a request path names a resource every
// replica may write. It reads the API server's paths:
// /api/v1[/namespaces/NS]/RESOURCE[/NAME[/SUB]] and
// /apis/GROUP/VERSION[/namespaces/NS]/RESOURCE[/NAME[/SUB]].
func exemptPath(path string) bool {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	var group string
	switch {
	case len(segs) >= 3 && segs[0] == "api":
		segs = segs[2:]
	case len(segs) >= 4 && segs[0] == "apis":
		group, segs = segs[1], segs[3:]
	default:
		return false
	}
	resource := segs[0]
	if resource == "namespaces" && len(segs) >= 3 {
		resource = segs[2]
	}
	return exemptResources[[2]string{group, resource}]
}
