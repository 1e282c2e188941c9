package visibility

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	visv1 "github.com/berth-dev/berth/apis/visibility/v1alpha1"
)

// Engine is what the API reads: the leader's admission engine.
type Engine interface {
	// Serving is true once the engine holds the cluster's queues, that is
	// on the leader after its initial load.
	Serving() bool
	// Pending lists a page of a ClusterQueue's pending workloads.
	Pending(q admission.PendingQuery) (admission.PendingPage, bool)
}

// parent is the clusterqueues or localqueues resource: it only anchors
// the pendingworkloads subresource and has no verbs of its own.
type parent struct {
	namespaced bool
	singular   string
}

var (
	_ rest.Storage              = parent{}
	_ rest.Scoper               = parent{}
	_ rest.SingularNameProvider = parent{}
)

func (p parent) New() runtime.Object {
	if p.namespaced {
		return &visv1.LocalQueue{}
	}
	return &visv1.ClusterQueue{}
}
func (parent) Destroy()                  {}
func (p parent) NamespaceScoped() bool   { return p.namespaced }
func (p parent) GetSingularName() string { return p.singular }

// pending serves clusterqueues/NAME/pendingworkloads and
// localqueues/NAME/pendingworkloads from the engine: no API read but the
// cache, no write.
type pending struct {
	namespaced bool
	engine     Engine
	reader     client.Reader
}

var (
	_ rest.Storage              = &pending{}
	_ rest.Scoper               = &pending{}
	_ rest.GetterWithOptions    = &pending{}
	_ rest.SingularNameProvider = &pending{}
)

func (*pending) New() runtime.Object     { return &visv1.PendingWorkloadsSummary{} }
func (*pending) Destroy()                {}
func (p *pending) NamespaceScoped() bool { return p.namespaced }
func (*pending) GetSingularName() string { return "pendingworkloads" }
func (*pending) NewGetOptions() (runtime.Object, bool, string) {
	return &visv1.PendingWorkloadOptions{}, false, ""
}

// Get lists the queue's pending workloads from the requested offset.
func (p *pending) Get(ctx context.Context, name string, opts runtime.Object) (runtime.Object, error) {
	o, ok := opts.(*visv1.PendingWorkloadOptions)
	if !ok {
		return nil, fmt.Errorf("unexpected options %T", opts)
	}
	limit := o.Limit
	switch {
	case limit == 0:
		limit = visv1.DefaultLimit
	case limit > visv1.MaxLimit:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("limit=%d: at most %d workloads are listed at once; page with offset", limit, visv1.MaxLimit))
	}
	if !p.engine.Serving() {
		return nil, notLeader()
	}
	ns := genericrequest.NamespaceValue(ctx)
	workload, err := p.workloadKey(ns, o.Workload)
	if err != nil {
		return nil, err
	}
	q := admission.PendingQuery{ClusterQueue: name, Offset: int(o.Offset), Limit: int(limit), Workload: workload}
	if p.namespaced {
		lq := &berthv1.LocalQueue{}
		if err := p.reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, lq); err != nil {
			return nil, lookupError(err, "localqueues", name)
		}
		q.ClusterQueue, q.Namespace, q.LocalQueue = lq.Spec.ClusterQueue, ns, name
	}
	page, ok := p.engine.Pending(q)
	if !ok {
		// The engine forgets a ClusterQueue it holds nothing for: if the
		// queue exists, nothing is pending in it.
		page = admission.PendingPage{}
		if !p.namespaced {
			if err := p.reader.Get(ctx, client.ObjectKey{Name: name}, &berthv1.ClusterQueue{}); err != nil {
				return nil, lookupError(err, "clusterqueues", name)
			}
		}
	}
	return p.summary(ctx, page, q.Namespace)
}

// workloadKey is the workload a lookup names: NAME in a LocalQueue's line
// (of the request's namespace), NAMESPACE/NAME in a ClusterQueue's; the zero
// key when none is named.
func (p *pending) workloadKey(ns, workload string) (admission.WorkloadKey, error) {
	if workload == "" {
		return admission.WorkloadKey{}, nil
	}
	if p.namespaced {
		if errs := validation.IsDNS1123Subdomain(workload); len(errs) > 0 {
			return admission.WorkloadKey{}, apierrors.NewBadRequest(fmt.Sprintf(
				"workload=%q: in a LocalQueue's line name the Workload alone, without a namespace: %s", workload, strings.Join(errs, "; ")))
		}
		return admission.WorkloadKey{Namespace: ns, Name: workload}, nil
	}
	namespace, name, ok := strings.Cut(workload, "/")
	if !ok || validation.IsDNS1123Label(namespace) != nil || validation.IsDNS1123Subdomain(name) != nil {
		return admission.WorkloadKey{}, apierrors.NewBadRequest(fmt.Sprintf(
			"workload=%q: in a ClusterQueue's line name the Workload as NAMESPACE/NAME", workload))
	}
	return admission.WorkloadKey{Namespace: namespace, Name: name}, nil
}

// notLeader is the answer of a replica that does not run the engine: the
// client retries and, behind a Service, likely reaches the leader.
func notLeader() error {
	err := apierrors.NewServiceUnavailable("this berth-controller replica is not the leader; pending workloads are served by the leader, retry")
	err.ErrStatus.Details = &metav1.StatusDetails{RetryAfterSeconds: 1}
	return err
}

func lookupError(err error, resource, name string) error {
	if apierrors.IsNotFound(err) {
		return apierrors.NewNotFound(visv1.GroupVersion.WithResource(resource).GroupResource(), name)
	}
	return apierrors.NewInternalError(fmt.Errorf("reading %s %s: %w", resource, name, err))
}
