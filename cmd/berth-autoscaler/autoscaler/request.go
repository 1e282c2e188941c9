package autoscaler

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/cmd/internal/autoscale"
	"github.com/berth-dev/berth/controllers/capacity"
)

// Condition reasons the autoscaler writes: cluster-autoscaler's own (the
// shared model's), and CapacityRevoked for the revocation fault it never
// produces.
const (
	ReasonAccepted          = autoscale.ReasonAccepted
	ReasonCapacityFound     = autoscale.ReasonCapacityFound
	ReasonCapacityNotFound  = autoscale.ReasonCapacityNotFound
	ReasonProvisioned       = autoscale.ReasonProvisioned
	ReasonFailedToCreatePod = autoscale.ReasonFailedToCreatePods
	ReasonBookingExpired    = autoscale.ReasonBookingExpired
	ReasonRevoked           = "CapacityRevoked"
)

// RequestReconciler answers ProvisioningRequests of the supported classes.
// It must run with one worker: bookings are decided one request at a time.
type RequestReconciler struct {
	// Client writes and reads the cache (pods, pools, templates).
	Client client.Client
	// Reader reads requests and nodes from the API server, so bookings and
	// node names just written are always seen.
	Reader client.Reader
	// Options are the autoscaler's options.
	Options Options

	// selectors evaluates DRA device selectors.
	selectors *capacity.Selectors
	// buffers: CapacityBuffer pod injection runs, so the view counts the
	// nodes buffers are still to create (Options.CapacityBufferPodInjection).
	buffers bool
	// pods: the scale-up for unschedulable pods runs, so the view reads
	// pools from the API server and counts the nodes recorded on them
	// (Options.ScaleUpUnschedulablePods).
	pods bool

	// decisions serialises what reads the cluster and then creates nodes
	// or books capacity — a request's decision and a buffer loop — so two
	// never plan on the same room or name the same new node.
	decisions sync.Mutex

	// loop is when the last request was answered or tried again: one per
	// Options.ScanInterval.
	loop struct {
		sync.Mutex
		last time.Time
	}
	// backoff holds, per pool that failed to grow, until when it is no
	// option: cluster-autoscaler keeps its node group backoffs in memory
	// too, and forgets them on a restart.
	backoff struct {
		sync.Mutex
		until map[string]time.Time
	}
}

// Register adds the reconciler to mgr: it watches ProvisioningRequests and
// the pods that consume them.
func (r *RequestReconciler) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("provisioningrequest").
		For(&autoscalingv1.ProvisioningRequest{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			name := o.GetAnnotations()[autoscalingv1.ProvisioningRequestPodAnnotationKey]
			if name == "" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Complete(r)
}

// +kubebuilder:rbac:groups=autoscaling.x-k8s.io,resources=provisioningrequests,verbs=get;list;watch
// +kubebuilder:rbac:groups=autoscaling.x-k8s.io,resources=provisioningrequests/status,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=podtemplates;pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;create
// (DRA reads and ResourceSlice writes: dra.go)
// +kubebuilder:rbac:groups=berth.dev,resources=capacitypools,verbs=get;list;watch;patch

// Reconcile moves one request on: accept it, then decide (fit, scale up,
// or no capacity and a retry after the backoff), create a scale-up's nodes
// once its latency passed, and end its booking when it expires or is
// revoked.
func (r *RequestReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pr := &autoscalingv1.ProvisioningRequest{}
	if err := r.Reader.Get(ctx, req.NamespacedName, pr); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !autoscale.Supported(pr.Spec.ProvisioningClassName) {
		return reconcile.Result{}, nil
	}
	now := r.Options.Clock.Now()
	switch PhaseOf(pr) {
	case PhaseDone:
		// A revocation takes capacity back from running pods too, as a
		// cloud reclaiming nodes does.
		if r.revoke(pr) && apimeta.IsStatusConditionTrue(pr.Status.Conditions, autoscalingv1.BookingExpired) {
			return reconcile.Result{}, r.write(ctx, pr, func(p *autoscalingv1.ProvisioningRequest) {
				setCondition(p, autoscalingv1.CapacityRevoked, metav1.ConditionTrue, ReasonRevoked,
					"capacity revoked through the "+RevokeAnnotation+" annotation after its booking ended", now)
			})
		}
		return reconcile.Result{}, nil
	case PhaseProvisioned:
		if Creating(pr) {
			if res, err := r.createNodes(ctx, pr, now); err != nil || Creating(pr) {
				return res, err
			}
		}
		return r.keepBooking(ctx, pr, now)
	}
	if at, err := time.Parse(time.RFC3339Nano, detail(pr, DetailRetryAt)); err == nil && now.Before(at) {
		return reconcile.Result{RequeueAfter: r.wait(at.Sub(now))}, nil // backing off
	}
	if next := r.nextLoop(now); next > 0 {
		return reconcile.Result{RequeueAfter: r.wait(next)}, nil // another request had this loop
	}
	// Accepted when a loop picks the request, as cluster-autoscaler marks it.
	if !apimeta.IsStatusConditionTrue(pr.Status.Conditions, autoscalingv1.Accepted) {
		if err := r.write(ctx, pr, func(p *autoscalingv1.ProvisioningRequest) {
			setCond(p, autoscale.Accepted(now))
		}); err != nil {
			return reconcile.Result{}, err
		}
	}
	return r.decide(ctx, pr, now)
}

// nextLoop takes the current loop for a request and returns 0, or returns
// how long until the next loop when a request already had this one:
// cluster-autoscaler answers one ProvisioningRequest per --scan-interval,
// so many requests queue. A ScanInterval of 0 answers them all at once.
func (r *RequestReconciler) nextLoop(now time.Time) time.Duration {
	r.loop.Lock()
	defer r.loop.Unlock()
	if next := r.loop.last.Add(r.Options.ScanInterval); !r.loop.last.IsZero() && now.Before(next) {
		return next.Sub(now)
	}
	r.loop.last = now
	return 0
}

// decide answers a new request from existing capacity, or scales up for
// best-effort-atomic-scale-up; without capacity it answers CapacityIsNotFound
// and tries again after the backoff.
func (r *RequestReconciler) decide(ctx context.Context, pr *autoscalingv1.ProvisioningRequest, now time.Time) (reconcile.Result, error) {
	r.decisions.Lock()
	defer r.decisions.Unlock()
	specs, labels, missing, err := r.specs(ctx, pr, true)
	if err != nil {
		return reconcile.Result{}, err
	}
	if missing != "" {
		// cluster-autoscaler cannot make the pods to simulate: it fails the
		// request for good (create the templates first).
		return reconcile.Result{}, r.write(ctx, pr, func(p *autoscalingv1.ProvisioningRequest) {
			setCondition(p, autoscalingv1.Failed, metav1.ConditionTrue, ReasonFailedToCreatePod, "PodTemplate "+missing+" does not exist", now)
		})
	}
	devs, missing, err := r.deviceRequests(ctx, pr.Namespace, specs, true)
	if err != nil {
		return reconcile.Result{}, err
	}
	if missing != "" {
		// cluster-autoscaler sets Failed only for check-capacity with
		// noRetry, a missing PodTemplate, or a request a week old: pods
		// whose claims cannot be made fit nowhere, and the request is
		// retried with the backoff, as for a stockout.
		return r.notFound(ctx, pr, "ResourceClaimTemplate "+missing+" does not exist", now)
	}
	v, err := r.view(ctx, now)
	if err != nil {
		return reconcile.Result{}, err
	}
	if devs != nil {
		if err := r.readDevices(ctx, v); err != nil {
			return reconcile.Result{}, err
		}
	}
	self := key(pr)
	pods := PodsOf(pr, specs)
	withDevices(pods, devs)
	withLabels(pods, labels)
	var pools []*Pool
	if autoscale.ScalesUp(pr.Spec.ProvisioningClassName) {
		pools = r.backedOff(v.ScalablePools(self), now)
	}
	plan := Place(pods, v.Bins(self), pools)
	placement := PlacementOf(pods, plan)
	outcome := autoscale.Decide(autoscale.Look{
		Class: pr.Spec.ProvisioningClassName, NoRetry: pr.Spec.Parameters["noRetry"] == "true",
		FitsFree: plan.Complete() && len(plan.NewNodes) == 0, Chosen: plan.Chosen,
	})
	switch outcome {
	case autoscale.Found:
		return r.provisioned(ctx, pr, placement, outcome, now)
	case autoscale.Provisioned:
		return r.scaleUp(ctx, pr, placement, plan, now)
	case autoscale.Failed:
		return reconcile.Result{}, r.write(ctx, pr, func(p *autoscalingv1.ProvisioningRequest) {
			setCond(p, outcome.Condition(Shortfall(pods, plan, nil), now))
		})
	case autoscale.StockedOut:
		r.backOff(plan.Chosen.Group, now)
		return r.notFound(ctx, pr, "the scale-up of pool "+plan.Chosen.Group+" failed: "+Shortfall(pods, plan, pools), now)
	}
	return r.notFound(ctx, pr, Shortfall(pods, plan, pools), now)
}

// backedOff marks the pools whose node group backoff has not ended at now.
func (r *RequestReconciler) backedOff(pools []*Pool, now time.Time) []*Pool {
	r.backoff.Lock()
	defer r.backoff.Unlock()
	for _, p := range pools {
		p.BackedOff = now.Before(r.backoff.until[p.Name])
	}
	return pools
}

// backOff leaves pool alone for Options.NodeGroupBackoff after it failed
// to grow, as cluster-autoscaler backs off a node group
// (--initial-node-group-backoff-duration).
func (r *RequestReconciler) backOff(pool string, now time.Time) {
	if r.Options.NodeGroupBackoff <= 0 {
		return
	}
	r.backoff.Lock()
	defer r.backoff.Unlock()
	if r.backoff.until == nil {
		r.backoff.until = map[string]time.Time{}
	}
	r.backoff.until[pool] = now.Add(r.Options.NodeGroupBackoff)
}

// notFound answers that no capacity is found, and tries again after the
// backoff: RetryBackoff doubled for each earlier try, up to MaxRetryBackoff.
func (r *RequestReconciler) notFound(ctx context.Context, pr *autoscalingv1.ProvisioningRequest, why string, now time.Time) (reconcile.Result, error) {
	retries, _ := strconv.Atoi(detail(pr, DetailRetries))
	backoff := r.Options.Backoff(retries)
	err := r.write(ctx, pr, func(p *autoscalingv1.ProvisioningRequest) {
		setDetail(p, DetailRetries, strconv.Itoa(retries+1))
		setDetail(p, DetailRetryAt, now.Add(backoff).UTC().Format(time.RFC3339Nano))
		setCond(p, autoscale.NotFound.Condition(why, now))
	})
	return reconcile.Result{RequeueAfter: r.wait(backoff)}, err
}

// scaleUp asks for a scale-up's nodes and answers Provisioned at once, as
// cluster-autoscaler does once the node groups are resized: the nodes join
// after the provisioning latency, and the plan is booked meanwhile.
func (r *RequestReconciler) scaleUp(ctx context.Context, pr *autoscalingv1.ProvisioningRequest, placement Placement, plan Plan, now time.Time) (reconcile.Result, error) {
	err := r.write(ctx, pr, func(p *autoscalingv1.ProvisioningRequest) {
		setDetail(p, DetailPlacement, placement.String())
		setDetail(p, DetailNodes, strings.Join(placement.Nodes(), ","))
		setDetail(p, DetailNewNodes, encodeNewNodes(plan.NewNodes))
		setDetail(p, DetailPools, strings.Join(poolsOf(plan.NewNodes), ","))
		setDetail(p, DetailScaleUpStarted, now.UTC().Format(time.RFC3339Nano))
		setCond(p, autoscale.Provisioned.Condition("", now))
	})
	if err != nil {
		return reconcile.Result{}, err
	}
	return r.createNodes(ctx, pr, now)
}

// provisioned books placement on existing nodes and sets Provisioned=True.
func (r *RequestReconciler) provisioned(ctx context.Context, pr *autoscalingv1.ProvisioningRequest, placement Placement, outcome autoscale.Outcome, now time.Time) (reconcile.Result, error) {
	err := r.write(ctx, pr, func(p *autoscalingv1.ProvisioningRequest) {
		setDetail(p, DetailPlacement, placement.String())
		setDetail(p, DetailNodes, strings.Join(placement.Nodes(), ","))
		setCond(p, outcome.Condition("", now))
	})
	if err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: r.wait(ExpiresAt(pr, r.Options.BookingTTL).Sub(now))}, nil
}

// revoke reports whether a revocation is asked for and allowed.
func (r *RequestReconciler) revoke(pr *autoscalingv1.ProvisioningRequest) bool {
	return r.Options.AllowRevocation && pr.Annotations[RevokeAnnotation] == "true" &&
		!apimeta.IsStatusConditionTrue(pr.Status.Conditions, autoscalingv1.CapacityRevoked)
}

// keepBooking ends a provisioned request's booking when it is revoked or
// expires — BookingExpired comes BookingTTL after Provisioned whether or not
// the pods used the capacity, as cluster-autoscaler's does — and stops
// holding capacity once the pods consumed all of it.
func (r *RequestReconciler) keepBooking(ctx context.Context, pr *autoscalingv1.ProvisioningRequest, now time.Time) (reconcile.Result, error) {
	if r.revoke(pr) {
		return reconcile.Result{}, r.write(ctx, pr, func(p *autoscalingv1.ProvisioningRequest) {
			setCondition(p, autoscalingv1.CapacityRevoked, metav1.ConditionTrue, ReasonRevoked, "capacity revoked through the "+RevokeAnnotation+" annotation; the booking is released", now)
		})
	}
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.MatchingFields{consumerIndex: key(pr)}); err != nil {
		return reconcile.Result{}, err
	}
	if detail(pr, DetailConsumed) != "true" && int32(len(boundPods(pods.Items)[key(pr)])) >= TotalCount(pr) {
		if err := r.write(ctx, pr, func(p *autoscalingv1.ProvisioningRequest) { setDetail(p, DetailConsumed, "true") }); err != nil {
			return reconcile.Result{}, err
		}
	}
	left := ExpiresAt(pr, r.Options.BookingTTL).Sub(now)
	if left <= 0 {
		return reconcile.Result{}, r.write(ctx, pr, func(p *autoscalingv1.ProvisioningRequest) {
			setCond(p, autoscale.BookingExpired(now))
		})
	}
	return reconcile.Result{RequeueAfter: r.wait(left)}, nil
}

// wait is how long to wait for something due in d: at most RetryInterval,
// so a clock that jumps (a test's fake clock) is noticed.
func (r *RequestReconciler) wait(d time.Duration) time.Duration {
	return max(min(d, r.Options.RetryInterval), time.Millisecond)
}

// write applies mutate to pr's status and patches it when it changed,
// with an optimistic lock; pr is updated to the written object.
func (r *RequestReconciler) write(ctx context.Context, pr *autoscalingv1.ProvisioningRequest, mutate func(*autoscalingv1.ProvisioningRequest)) error {
	before := pr.DeepCopy()
	mutate(pr)
	if equality.Semantic.DeepEqual(before.Status, pr.Status) {
		return nil
	}
	return r.Client.Status().Patch(ctx, pr, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

// specs reads the pod specs of pr's pod sets, and their labels. With fresh,
// a template the cache does not hold yet is read from the API server.
// missing names the first template that does not exist.
func (r *RequestReconciler) specs(ctx context.Context, pr *autoscalingv1.ProvisioningRequest, fresh bool) (specs []*corev1.PodSpec, labels []map[string]string, missing string, err error) {
	for _, ps := range pr.Spec.PodSets {
		t := &corev1.PodTemplate{}
		name := types.NamespacedName{Namespace: pr.Namespace, Name: ps.PodTemplateRef.Name}
		err := r.Client.Get(ctx, name, t)
		if apierrors.IsNotFound(err) && fresh {
			err = r.Reader.Get(ctx, name, t)
		}
		switch {
		case apierrors.IsNotFound(err):
			if missing == "" {
				missing = name.String()
			}
			specs, labels = append(specs, nil), append(labels, nil)
			continue
		case err != nil:
			return nil, nil, "", err
		}
		specs, labels = append(specs, &t.Template.Spec), append(labels, t.Template.Labels)
	}
	return specs, labels, missing, nil
}

// view reads the cluster: requests and nodes from the API server, pods and
// pools from the cache, and the templates of requests that book capacity.
func (r *RequestReconciler) view(ctx context.Context, now time.Time) (*View, error) {
	v := &View{Now: now, BookingTTL: r.Options.BookingTTL, Specs: map[string][]*corev1.PodSpec{}}
	reqs := &autoscalingv1.ProvisioningRequestList{}
	nodes := &corev1.NodeList{}
	pods := &corev1.PodList{}
	pools := &berthv1.CapacityPoolList{}
	if err := r.Reader.List(ctx, reqs); err != nil {
		return nil, err
	}
	if err := r.Reader.List(ctx, nodes); err != nil {
		return nil, err
	}
	if err := r.Client.List(ctx, pods); err != nil {
		return nil, err
	}
	// With the unschedulable pods' scale-up the pools carry its record of
	// nodes to create, which must be the latest: read them fresh.
	var poolReader client.Reader = r.Client
	if r.pods {
		poolReader = r.Reader
	}
	if err := poolReader.List(ctx, pools); err != nil {
		return nil, err
	}
	v.Requests, v.Nodes, v.Pods, v.Pools = reqs.Items, nodes.Items, pods.Items, pools.Items
	if r.buffers {
		pending, err := r.pendingBufferNodes(ctx)
		if err != nil {
			return nil, err
		}
		v.Pending = pending
	}
	if r.pods {
		v.Pending = append(v.Pending, poolPending(v.Pools)...)
	}
	for i := range v.Requests {
		pr := &v.Requests[i]
		if PhaseOf(pr) != PhaseProvisioned {
			continue
		}
		specs, _, _, err := r.specs(ctx, pr, false)
		if err != nil {
			return nil, err
		}
		v.Specs[key(pr)] = specs
	}
	return v, nil
}
