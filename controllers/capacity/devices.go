package capacity

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// Indexes of the DRA objects the device count reads.
const (
	// sliceNodeIndex indexes ResourceSlices by spec.nodeName (node-local
	// slices only).
	sliceNodeIndex = "spec.nodeName"
	// slicePoolIndex indexes ResourceSlices by driver/pool, to find the
	// node of an allocated device.
	slicePoolIndex = "driver/pool"
	// claimPoolIndex indexes ResourceClaims by the driver/pool of every
	// device allocated to them.
	claimPoolIndex = "allocation.driver/pool"
)

// devices counts, per node, the DRA devices of the mapped DeviceClasses
// that node-local ResourceSlices publish, and those of them ResourceClaims
// hold. It reads slices and classes from the manager's cache and claims
// from a cache of its own, stripped to what the count needs, because a
// cluster's claims are as many as its DRA pods.
type devices struct {
	mapping jobs.DeviceClassMapping
	// client reads ResourceSlices (indexed by sliceNodeIndex and
	// slicePoolIndex) and DeviceClasses.
	client client.Reader
	// claims reads ResourceClaims indexed by claimPoolIndex; claimCache is
	// the cache behind it, watched for changes (nil in unit tests).
	claims     client.Reader
	claimCache cache.Cache
	// pods reads bound pods.
	pods      client.Reader
	selectors *Selectors
	// api reads ResourceClaims from the API server, for pools published
	// after since (see allocated); nil never reads them there.
	api   client.Reader
	since time.Time
	// mu guards confirmed: the pools (driver/pool@generation) whose claims
	// were read from the API server once.
	mu        sync.Mutex
	confirmed map[string]bool
}

// +kubebuilder:rbac:groups=resource.k8s.io,resources=resourceslices;resourceclaims;deviceclasses,verbs=get;list;watch

// newDevices indexes the manager's ResourceSlices and creates the claim
// cache; it returns nil (no DRA reads, no watches) for an empty mapping, so
// a cluster that does not serve resource.k8s.io/v1 runs berth unchanged.
func newDevices(ctx context.Context, mgr ctrl.Manager, mapping jobs.DeviceClassMapping, pods client.Reader) (*devices, error) {
	if len(mapping) == 0 {
		return nil, nil
	}
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &resourcev1.ResourceSlice{}, sliceNodeIndex, func(o client.Object) []string {
		if n := o.(*resourcev1.ResourceSlice).Spec.NodeName; n != nil && *n != "" {
			return []string{*n}
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("indexing ResourceSlices by node: %w", err)
	}
	if err := idx.IndexField(ctx, &resourcev1.ResourceSlice{}, slicePoolIndex, func(o client.Object) []string {
		s := o.(*resourcev1.ResourceSlice)
		return []string{s.Spec.Driver + "/" + s.Spec.Pool.Name}
	}); err != nil {
		return nil, fmt.Errorf("indexing ResourceSlices by pool: %w", err)
	}
	claims, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{&resourcev1.ResourceClaim{}: {Transform: stripClaim}},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the ResourceClaim cache: %w", err)
	}
	if err := claims.IndexField(ctx, &resourcev1.ResourceClaim{}, claimPoolIndex, claimPools); err != nil {
		return nil, fmt.Errorf("indexing ResourceClaims by pool: %w", err)
	}
	if err := mgr.Add(claims); err != nil {
		return nil, fmt.Errorf("adding the ResourceClaim cache: %w", err)
	}
	return &devices{mapping: mapping, client: mgr.GetClient(), claims: claims, claimCache: claims, pods: pods, selectors: NewSelectors(),
		api: mgr.GetAPIReader(), since: time.Now(), confirmed: map[string]bool{}}, nil
}

// claimPools are the driver/pool keys of a claim's allocated devices.
func claimPools(o client.Object) []string {
	rc := o.(*resourcev1.ResourceClaim)
	if rc.Status.Allocation == nil {
		return nil
	}
	var out []string
	for _, r := range rc.Status.Allocation.Devices.Results {
		if k := r.Driver + "/" + r.Pool; !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// stripClaim keeps only what the count reads: who holds the claim and
// which devices are allocated to it.
func stripClaim(obj any) (any, error) {
	rc, ok := obj.(*resourcev1.ResourceClaim)
	if !ok {
		return obj, nil
	}
	out := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: rc.Name, Namespace: rc.Namespace, UID: rc.UID,
			ResourceVersion: rc.ResourceVersion, OwnerReferences: rc.OwnerReferences},
		Status: resourcev1.ResourceClaimStatus{ReservedFor: rc.Status.ReservedFor},
	}
	if a := rc.Status.Allocation; a != nil {
		results := make([]resourcev1.DeviceRequestAllocationResult, len(a.Devices.Results))
		for i, r := range a.Devices.Results {
			results[i] = resourcev1.DeviceRequestAllocationResult{Driver: r.Driver, Pool: r.Pool, Device: r.Device, AdminAccess: r.AdminAccess}
		}
		out.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: results}}
	}
	return out, nil
}

// watch adds to the node controller the DRA objects a node's device count
// depends on: its ResourceSlices, the claims allocated from them, and the
// mapped DeviceClasses (a class's selectors decide the count of every node).
func (d *devices) watch(b *builder.Builder, allNodes handler.MapFunc) *builder.Builder {
	if d == nil {
		return b
	}
	return b.
		Watches(&resourcev1.ResourceSlice{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if n := o.(*resourcev1.ResourceSlice).Spec.NodeName; n != nil && *n != "" {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: *n}}}
			}
			return nil
		})).
		Watches(&resourcev1.DeviceClass{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			if _, mapped := d.mapping[o.GetName()]; !mapped {
				return nil
			}
			return allNodes(ctx, o)
		})).
		WatchesRawSource(source.Kind(d.claimCache, &resourcev1.ResourceClaim{}, handler.TypedEnqueueRequestsFromMapFunc(d.nodesOfClaim)))
}

// nodesOfClaim maps a claim to the nodes whose slices hold its devices.
func (d *devices) nodesOfClaim(ctx context.Context, rc *resourcev1.ResourceClaim) []reconcile.Request {
	var out []reconcile.Request
	for _, pool := range claimPools(rc) {
		list := &resourcev1.ResourceSliceList{}
		if err := d.client.List(ctx, list, client.MatchingFields{slicePoolIndex: pool}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing the ResourceSlices of an allocated claim", "pool", pool)
			continue
		}
		for i := range list.Items {
			if n := list.Items[i].Spec.NodeName; n != nil && *n != "" {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Name: *n}})
			}
		}
	}
	return out
}

// synced waits for the claim cache; true on a nil receiver.
func (d *devices) synced(ctx context.Context) bool {
	return d == nil || d.claimCache.WaitForCacheSync(ctx)
}

// deviceKey names one device: driver, pool and device name, as allocation
// results name it.
type deviceKey struct{ driver, pool, device string }

// add adds the node's devices of the mapped classes to allocatable and free
// under the mapped resource names, less the devices claims hold there. A
// resource the node already reports in status.allocatable (an extended
// resource of a device plugin) is left as the node reports it, so the same
// GPUs are not counted twice. It does nothing on a nil receiver.
func (d *devices) add(ctx context.Context, node *corev1.Node, allocatable, free corev1.ResourceList) error {
	if d == nil {
		return nil
	}
	owned, fresh, err := d.count(ctx, node.Name)
	if err != nil {
		return err
	}
	if len(owned) == 0 {
		return nil
	}
	held, err := d.allocated(ctx, owned, fresh)
	if err != nil {
		return err
	}
	for key, class := range owned {
		dq := d.mapping[class]
		if _, reported := node.Status.Allocatable[dq.Resource]; reported {
			continue
		}
		addQuantity(allocatable, dq.Resource, dq.PerDevice)
		if !held[key] {
			addQuantity(free, dq.Resource, dq.PerDevice)
		} else if _, ok := free[dq.Resource]; !ok {
			free[dq.Resource] = resource.Quantity{}
		}
	}
	return nil
}

func addQuantity(l corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	sum := l[name]
	sum.Add(q)
	l[name] = sum
}

// count returns the node's devices of a mapped class, each with the class
// it counts for, and the pools (driver/pool@generation) published after
// berth started whose claims were not yet read from the API server (see
// allocated). A device that several mapped classes select counts once,
// for the first of them by name, so that overlapping classes do not
// multiply it. Only slices of a pool's newest generation count, as the
// scheduler ignores older ones while a driver republishes.
func (d *devices) count(ctx context.Context, node string) (map[deviceKey]string, map[string]string, error) {
	list := &resourcev1.ResourceSliceList{}
	if err := d.client.List(ctx, list, client.MatchingFields{sliceNodeIndex: node}); err != nil {
		return nil, nil, fmt.Errorf("listing the ResourceSlices of node %s: %w", node, err)
	}
	if len(list.Items) == 0 {
		return nil, nil, nil
	}
	classes, err := d.classes(ctx)
	if err != nil {
		return nil, nil, err
	}
	newest := map[string]int64{}
	for i := range list.Items {
		s := &list.Items[i]
		k := s.Spec.Driver + "/" + s.Spec.Pool.Name
		newest[k] = max(newest[k], s.Spec.Pool.Generation)
	}
	out, fresh := map[deviceKey]string{}, map[string]string{}
	for i := range list.Items {
		s := &list.Items[i]
		pool := s.Spec.Driver + "/" + s.Spec.Pool.Name
		if s.Spec.Pool.Generation < newest[pool] {
			continue
		}
		if version := fmt.Sprintf("%s@%d", pool, s.Spec.Pool.Generation); d.unconfirmed(version, s.CreationTimestamp.Time) {
			fresh[pool] = version
		}
		for j := range s.Spec.Devices {
			dev := &s.Spec.Devices[j]
			if class := d.classOf(ctx, classes, s.Spec.Driver, dev); class != "" {
				out[deviceKey{s.Spec.Driver, s.Spec.Pool.Name, dev.Name}] = class
			}
		}
	}
	return out, fresh, nil
}

// unconfirmed reports whether a pool version, published at created, must
// have its claims read from the API server: it was published after berth
// started (those published before are in the claim cache, which synced
// before the first count) and was not read yet.
func (d *devices) unconfirmed(version string, created time.Time) bool {
	if d.api == nil || !created.After(d.since) {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.confirmed[version]
}

// classes reads the mapped DeviceClasses that exist, sorted by name.
func (d *devices) classes(ctx context.Context) ([]*resourcev1.DeviceClass, error) {
	var out []*resourcev1.DeviceClass
	for name := range d.mapping {
		dc := &resourcev1.DeviceClass{}
		if err := d.client.Get(ctx, client.ObjectKey{Name: name}, dc); err != nil {
			if client.IgnoreNotFound(err) == nil {
				continue // a class not created yet selects nothing
			}
			return nil, fmt.Errorf("reading DeviceClass %s: %w", name, err)
		}
		out = append(out, dc)
	}
	slices.SortFunc(out, func(a, b *resourcev1.DeviceClass) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// classOf is the first class whose selectors select the device, or "". A
// selector that cannot be evaluated selects nothing, as the scheduler cannot
// allocate through it; it is logged, since only the class's author can fix it.
func (d *devices) classOf(ctx context.Context, classes []*resourcev1.DeviceClass, driver string, dev *resourcev1.Device) string {
	if dev.NodeName != nil || dev.NodeSelector != nil || dev.AllNodes != nil {
		return "" // per-device node selection: not a plain node-local device
	}
	for _, dc := range classes {
		ok, err := d.selectors.Match(ctx, dc.Spec.Selectors, driver, dev)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "DeviceClass selector cannot be evaluated; its devices are not counted", "deviceClass", dc.Name)
			continue
		}
		if ok {
			return dc.Name
		}
	}
	return ""
}

// allocated returns which of the devices are allocated to a claim that
// does not belong to a placed gang. The engine reserves the capacity of
// placed gangs itself, as it does for their pods' requests; claims used
// with admin access do not take the device from others.
//
// Claims come from the claim cache, except for the pools in fresh: a pool
// published while berth runs (a node joined, a driver republished its
// devices) may have claims allocated from it that the claim cache has not
// caught up with — its informer and the slices' are independent — and
// counting their devices free would admit onto them. Those pools' claims
// are read once from the API server.
func (d *devices) allocated(ctx context.Context, owned map[deviceKey]string, fresh map[string]string) (map[deviceKey]bool, error) {
	pools := map[string]bool{}
	for k := range owned {
		pools[k.driver+"/"+k.pool] = true
	}
	held := map[deviceKey]bool{}
	for pool := range pools {
		claims, err := d.claimsOf(ctx, pool, fresh[pool])
		if err != nil {
			return nil, err
		}
		for i := range claims {
			rc := &claims[i]
			placed, err := d.placed(ctx, rc)
			if err != nil {
				return nil, err
			}
			if placed {
				continue
			}
			for _, r := range rc.Status.Allocation.Devices.Results {
				if r.AdminAccess != nil && *r.AdminAccess {
					continue
				}
				held[deviceKey{r.Driver, r.Pool, r.Device}] = true
			}
		}
	}
	return held, nil
}

// claimsOf lists the claims allocated from pool: from the claim cache, or,
// for a fresh pool version, from the API server, after which the version
// is confirmed and read from the cache again.
func (d *devices) claimsOf(ctx context.Context, pool, freshVersion string) ([]resourcev1.ResourceClaim, error) {
	cached := &resourcev1.ResourceClaimList{}
	if err := d.claims.List(ctx, cached, client.MatchingFields{claimPoolIndex: pool}); err != nil {
		return nil, fmt.Errorf("listing the ResourceClaims allocated from pool %s: %w", pool, err)
	}
	if freshVersion == "" {
		return cached.Items, nil
	}
	fromAPI, err := d.apiClaimsOf(ctx, pool)
	if err != nil {
		return nil, err
	}
	// Confirmed once the cache holds every claim the API server does: from
	// then on the cache is as good, and its events keep the count right.
	inCache := map[types.NamespacedName]bool{}
	for _, rc := range cached.Items {
		inCache[types.NamespacedName{Namespace: rc.Namespace, Name: rc.Name}] = true
	}
	caughtUp := true
	for _, rc := range fromAPI {
		caughtUp = caughtUp && inCache[types.NamespacedName{Namespace: rc.Namespace, Name: rc.Name}]
	}
	if caughtUp {
		d.mu.Lock()
		d.confirmed[freshVersion] = true
		d.mu.Unlock()
	}
	return fromAPI, nil
}

// apiClaimsOf reads the claims allocated from pool from the API server, a
// page at a time: no index serves it there.
func (d *devices) apiClaimsOf(ctx context.Context, pool string) ([]resourcev1.ResourceClaim, error) {
	var out []resourcev1.ResourceClaim
	opts := []client.ListOption{client.Limit(500)}
	for {
		page := &resourcev1.ResourceClaimList{}
		if err := d.api.List(ctx, page, opts...); err != nil {
			return nil, fmt.Errorf("reading the ResourceClaims of newly published pool %s from the API server: %w", pool, err)
		}
		for _, rc := range page.Items {
			if slices.Contains(claimPools(&rc), pool) {
				out = append(out, rc)
			}
		}
		if page.Continue == "" {
			break
		}
		opts = []client.ListOption{client.Limit(500), client.Continue(page.Continue)}
	}
	return out, nil
}

// placed reports whether a pod of a placed gang uses the claim: one it is
// reserved for, or, before the scheduler reserves it, the pod that owns it
// (a claim generated from a ResourceClaimTemplate). Pods are read from the
// bound-pod cache: a consumer not bound yet is taken as not placed, which
// can only undercount free devices until it binds and its node is counted
// again.
func (d *devices) placed(ctx context.Context, rc *resourcev1.ResourceClaim) (bool, error) {
	var names []string
	for _, c := range rc.Status.ReservedFor {
		if c.APIGroup == "" && c.Resource == "pods" {
			names = append(names, c.Name)
		}
	}
	if len(names) == 0 {
		for _, o := range rc.OwnerReferences {
			if o.Kind == "Pod" && o.APIVersion == "v1" && o.Controller != nil && *o.Controller {
				names = append(names, o.Name)
			}
		}
	}
	for _, name := range names {
		p := &corev1.Pod{}
		if err := d.pods.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: name}, p); err != nil {
			if client.IgnoreNotFound(err) == nil {
				continue
			}
			return false, fmt.Errorf("reading pod %s/%s of ResourceClaim %s: %w", rc.Namespace, name, rc.Name, err)
		}
		if _, ok := p.Labels[berthv1.PlacementLabel]; ok {
			return true, nil
		}
	}
	return false, nil
}

// DriverDevice is one device of a node template, with its driver.
type DriverDevice struct {
	Driver string
	Device resourcev1.Device
}

// TemplateDevices are the devices every node of a pool publishes: each
// entry's count devices named <name>-0 to <name>-<count-1>, with its
// attributes and capacity, in the template's order.
func TemplateDevices(t *berthv1.NodeTemplate) []DriverDevice {
	var out []DriverDevice
	for _, td := range t.Devices {
		for i := range td.Count {
			d := resourcev1.Device{Name: fmt.Sprintf("%s-%d", td.Name, i)}
			if len(td.Attributes) > 0 {
				d.Attributes = make(map[resourcev1.QualifiedName]resourcev1.DeviceAttribute, len(td.Attributes))
				for k, v := range td.Attributes {
					d.Attributes[k] = *v.DeepCopy()
				}
			}
			if len(td.Capacity) > 0 {
				d.Capacity = make(map[resourcev1.QualifiedName]resourcev1.DeviceCapacity, len(td.Capacity))
				for k, v := range td.Capacity {
					d.Capacity[k] = resourcev1.DeviceCapacity{Value: v.DeepCopy()}
				}
			}
			out = append(out, DriverDevice{Driver: td.Driver, Device: d})
		}
	}
	return out
}

// poolToEngine is PoolToEngine with the template's devices of mapped
// classes added to the capacity of one node, as for an existing node (a
// resource the template's allocatable names is left as it says), so that
// the engine plans new nodes for gangs that claim devices.
func (r *Reconciler) poolToEngine(ctx context.Context, cp *berthv1.CapacityPool, nodes int32) (admission.Pool, error) {
	p := lifecycle.PoolToEngine(cp, nodes)
	d := r.devices
	if d == nil || len(cp.Spec.NodeTemplate.Devices) == 0 {
		return p, nil
	}
	classes, err := d.classes(ctx)
	if err != nil {
		return admission.Pool{}, err
	}
	for _, dev := range TemplateDevices(&cp.Spec.NodeTemplate) {
		class := d.classOf(ctx, classes, dev.Driver, &dev.Device)
		if class == "" {
			continue
		}
		dq := d.mapping[class]
		if _, reported := cp.Spec.NodeTemplate.Allocatable[dq.Resource]; reported {
			continue
		}
		p.NodeCapacity[admission.ResourceName(dq.Resource)] += dq.PerDevice.MilliValue()
	}
	return p, nil
}

// watchPools re-reads every pool when a mapped DeviceClass changes: its
// selectors decide what a template's devices count as.
func (d *devices) watchPools(b *builder.Builder, allPools handler.MapFunc) *builder.Builder {
	if d == nil {
		return b
	}
	return b.Watches(&resourcev1.DeviceClass{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		if _, mapped := d.mapping[o.GetName()]; !mapped {
			return nil
		}
		return allPools(ctx, o)
	}))
}

// allPools maps anything to every CapacityPool.
func (r *Reconciler) allPools(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.every(ctx, &berthv1.CapacityPoolList{}, "CapacityPools after a DeviceClass change")
}
