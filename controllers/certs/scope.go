package certs

import (
	"net/http"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
)

// secretScoped is a manager whose REST config narrows every list and watch
// of Secrets in one namespace to the Secret of one name. cert-controller's
// rotator builds its own cache from the manager's config and watches the
// namespace's Secrets without a selector, which RBAC can only allow by
// letting berth list — and so read — every Secret there. The API server
// authorizes a list or watch whose field selector is metadata.name=NAME as
// a request for that name, so with the selector added berth's Role grants
// get, list, watch and update on berth's certificate Secret alone.
type secretScoped struct {
	ctrl.Manager
	config *rest.Config
}

// GetConfig is the manager's config with Secret lists and watches scoped.
func (m secretScoped) GetConfig() *rest.Config { return m.config }

// scopeSecrets returns mgr with lists and watches of the Secrets of
// namespace narrowed to name.
func scopeSecrets(mgr ctrl.Manager, namespace, name string) ctrl.Manager {
	cfg := rest.CopyConfig(mgr.GetConfig())
	path := "/api/v1/namespaces/" + namespace + "/secrets"
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return nameScope{next: rt, path: path, name: name}
	})
	return secretScoped{Manager: mgr, config: cfg}
}

// nameScope adds fieldSelector=metadata.name=name to GET requests of the
// collection at path (a list or a watch); other requests pass unchanged.
type nameScope struct {
	next http.RoundTripper
	path string
	name string
}

// RoundTrip scopes collection reads of path to name.
func (s nameScope) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || req.URL.Path != s.path {
		return s.next.RoundTrip(req)
	}
	q := req.URL.Query()
	selector := "metadata.name=" + s.name
	if existing := q.Get("fieldSelector"); existing != "" {
		selector = existing + "," + selector
	}
	q.Set("fieldSelector", selector)
	scoped := req.Clone(req.Context())
	u := *req.URL
	u.RawQuery = q.Encode()
	scoped.URL = &u
	return s.next.RoundTrip(scoped)
}
