package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	visv1 "github.com/berth-dev/berth/apis/visibility/v1alpha1"
)

// visibilityClient reads berth's aggregated API visibility.berth.dev
// through the kube-apiserver, as the kubeconfig's user (and --as): the API
// server authenticates, and berth authorizes each queue's line.
type visibilityClient struct {
	rest rest.Interface
}

// visibility returns a client of visibility.berth.dev.
func (e *env) visibility() (*visibilityClient, error) {
	cfg, err := e.flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	gv := visv1.GroupVersion
	cfg.GroupVersion, cfg.APIPath = &gv, "/apis"
	// Answers are decoded by hand; the codecs decode the API server's
	// Status errors.
	cfg.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to visibility.berth.dev: %w", err)
	}
	return &visibilityClient{rest: rc}, nil
}

// page reads one page of a queue's pending workloads.
func (v *visibilityClient) page(ctx context.Context, namespace, queue string, offset, limit int64) (*visv1.PendingWorkloadsSummary, error) {
	return v.get(ctx, namespace, queue, "offset", strconv.FormatInt(offset, 10), "limit", strconv.FormatInt(limit, 10))
}

// entry reads one Workload's entry in a LocalQueue's line, with the line's
// total and fair-share standing; no entry when it is not in the line. berth
// looks it up by name and explains it alone, where reading the whole line
// would cost it an explanation per workload.
func (v *visibilityClient) entry(ctx context.Context, namespace, queue, workload string) (*visv1.PendingWorkloadsSummary, error) {
	p, err := v.get(ctx, namespace, queue, "workload", workload)
	if err != nil {
		return nil, visibilityError(err, fmt.Sprintf("LocalQueue %s/%s", namespace, queue), "localqueues")
	}
	return p, nil
}

// get reads a queue's pendingworkloads with the query parameters given as
// name, value pairs. A non-leader replica answers 503 with Retry-After,
// which the REST client retries.
func (v *visibilityClient) get(ctx context.Context, namespace, queue string, params ...string) (*visv1.PendingWorkloadsSummary, error) {
	req := v.rest.Get().Name(queue).SubResource("pendingworkloads")
	for i := 0; i+1 < len(params); i += 2 {
		req = req.Param(params[i], params[i+1])
	}
	if namespace != "" {
		req = req.Namespace(namespace).Resource("localqueues")
	} else {
		req = req.Resource("clusterqueues")
	}
	raw, err := req.DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	out := &visv1.PendingWorkloadsSummary{}
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("decoding the pending workloads: %w", err)
	}
	return out, nil
}

// localQueueLine reads a LocalQueue's whole line, MaxLimit at a time: what
// a tenant who may view the namespace is allowed to see. The summary's
// Items are all of them.
func (v *visibilityClient) localQueueLine(ctx context.Context, namespace, name string) (*visv1.PendingWorkloadsSummary, error) {
	var all *visv1.PendingWorkloadsSummary
	for {
		var offset int64
		if all != nil {
			offset = int64(len(all.Items))
		}
		p, err := v.page(ctx, namespace, name, offset, visv1.MaxLimit)
		if err != nil {
			return nil, visibilityError(err, fmt.Sprintf("LocalQueue %s/%s", namespace, name), "localqueues")
		}
		if all == nil {
			all = p
		} else {
			all.Items = append(all.Items, p.Items...)
		}
		// The line moves while it is paged: stop at its end, or when a
		// page comes back empty.
		if len(p.Items) == 0 || int64(len(all.Items)) >= p.Total {
			return all, nil
		}
	}
}

// clusterQueueStanding reads a ClusterQueue's summary without its items
// (limit 1): its total and fair-share standing.
func (v *visibilityClient) clusterQueueStanding(ctx context.Context, name string) (*visv1.PendingWorkloadsSummary, error) {
	p, err := v.page(ctx, "", name, 0, 1)
	if err != nil {
		return nil, visibilityError(err, "ClusterQueue "+name, "clusterqueues")
	}
	return p, nil
}

// visibilityError says what a failed read of a queue's line means and
// what to do about it.
func visibilityError(err error, what, resource string) error {
	switch {
	case apierrors.IsForbidden(err):
		role := "berth-visibility-localqueue-viewer"
		if resource == "clusterqueues" {
			role = "berth-visibility-clusterqueue-viewer"
		}
		return fmt.Errorf("reading the pending workloads of %s: get on %s/pendingworkloads in visibility.berth.dev is forbidden (bind the ClusterRole %s): %w",
			what, resource, role, err)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("reading the pending workloads of %s: not found (is berth's visibility API installed? kubectl get apiservice v1alpha1.visibility.berth.dev): %w",
			what, err)
	}
	return fmt.Errorf("reading the pending workloads of %s from visibility.berth.dev: %w", what, err)
}
