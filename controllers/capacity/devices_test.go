package capacity

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

const testDriver = "gpu.example.com"

func gpuClass(name, expr string) *resourcev1.DeviceClass {
	dc := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if expr != "" {
		dc.Spec.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}}
	}
	return dc
}

// slice publishes devices named dev-0.. on node, with the given product
// attribute, in pool node (generation gen).
func slice(name, node string, gen int64, product string, n int) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.ResourceSliceSpec{
		Driver: testDriver, NodeName: ptr.To(node),
		Pool: resourcev1.ResourcePool{Name: node, Generation: gen, ResourceSliceCount: 1},
	}}
	for i := range n {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{
			Name:       "dev-" + string(rune('0'+i)),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"product": {StringValue: ptr.To(product)}},
		})
	}
	return s
}

// claim is allocated devices (dev names) of node's pool, reserved for pod.
func claim(node, pod string, devs ...string) *resourcev1.ResourceClaim {
	rc := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim-of-" + pod, Namespace: "ns"}}
	rc.Status.Allocation = &resourcev1.AllocationResult{}
	for _, d := range devs {
		rc.Status.Allocation.Devices.Results = append(rc.Status.Allocation.Devices.Results,
			resourcev1.DeviceRequestAllocationResult{Request: "gpu", Driver: testDriver, Pool: node, Device: d})
	}
	if pod != "" {
		rc.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: pod, UID: "u-" + types.UID(pod)}}
	}
	return rc
}

func pod(name string, placed bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{}}}
	if placed {
		p.Labels[berthv1.PlacementLabel] = "w"
	}
	return p
}

func newTestDevices(t *testing.T, mapping jobs.DeviceClassMapping, objs ...client.Object) *devices {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithIndex(&resourcev1.ResourceSlice{}, sliceNodeIndex, func(o client.Object) []string {
			return []string{ptr.Deref(o.(*resourcev1.ResourceSlice).Spec.NodeName, "")}
		}).
		WithIndex(&resourcev1.ResourceClaim{}, claimPoolIndex, claimPools).
		Build()
	return &devices{mapping: mapping, client: c, claims: c, pods: c, selectors: NewSelectors()}
}

func TestDevicesAdd(t *testing.T) {
	gpus := jobs.DeviceClassMapping{"gpu": {Resource: "nvidia.com/gpu", PerDevice: resource.MustParse("1")}}
	h200 := gpuClass("gpu", `device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].product == "H200"`)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Allocatable: rl("cpu", "8")}}
	tests := []struct {
		name          string
		mapping       jobs.DeviceClassMapping
		node          *corev1.Node
		objs          []client.Object
		alloc, free   string // nvidia.com/gpu, "" when absent
		wantUnchanged bool
	}{
		{name: "devices the class selects count", mapping: gpus, node: node,
			objs: []client.Object{h200, slice("s1", "n1", 1, "H200", 4)}, alloc: "4", free: "4"},
		{name: "the selector rejects other products", mapping: gpus, node: node,
			objs: []client.Object{h200, slice("s1", "n1", 1, "A100", 4)}, wantUnchanged: true},
		{name: "another node's slice does not count", mapping: gpus, node: node,
			objs: []client.Object{h200, slice("s1", "n2", 1, "H200", 4)}, wantUnchanged: true},
		{name: "a missing class selects nothing", mapping: gpus, node: node,
			objs: []client.Object{slice("s1", "n1", 1, "H200", 4)}, wantUnchanged: true},
		{name: "an older generation of the pool is ignored", mapping: gpus, node: node,
			objs: []client.Object{h200, slice("old", "n1", 1, "H200", 4), slice("new", "n1", 2, "H200", 2)}, alloc: "2", free: "2"},
		{name: "allocated devices are not free", mapping: gpus, node: node,
			objs: []client.Object{h200, slice("s1", "n1", 1, "H200", 4), claim("n1", "p1", "dev-0", "dev-1"), pod("p1", false)}, alloc: "4", free: "2"},
		{name: "a claim of another node's pool takes nothing here", mapping: gpus, node: node,
			objs: []client.Object{h200, slice("s1", "n1", 1, "H200", 4), claim("n2", "p1", "dev-0"), pod("p1", false)}, alloc: "4", free: "4"},
		{name: "claims of placed gangs are the engine's to reserve", mapping: gpus, node: node,
			objs: []client.Object{h200, slice("s1", "n1", 1, "H200", 4), claim("n1", "p1", "dev-0"), pod("p1", true)}, alloc: "4", free: "4"},
		{name: "of two pods only the unplaced one's claim takes devices", mapping: gpus, node: node,
			objs: []client.Object{h200, slice("s1", "n1", 1, "H200", 4), claim("n1", "p1", "dev-0"), pod("p1", true),
				claim("n1", "p2", "dev-1"), pod("p2", false)}, alloc: "4", free: "3"},
		{name: "an allocated claim with no consumer still holds its devices", mapping: gpus, node: node,
			objs: []client.Object{h200, slice("s1", "n1", 1, "H200", 2), claim("n1", "", "dev-0", "dev-1")}, alloc: "2", free: "0"},
		{name: "the per-device amount multiplies", node: node,
			mapping: jobs.DeviceClassMapping{"gpu": {Resource: "nvidia.com/gpu", PerDevice: resource.MustParse("500m")}},
			objs:    []client.Object{h200, slice("s1", "n1", 1, "H200", 4), claim("n1", "p1", "dev-0"), pod("p1", false)}, alloc: "2", free: "1500m"},
		{name: "a device two classes select counts once", node: node,
			mapping: jobs.DeviceClassMapping{"gpu": gpus["gpu"], "any": {Resource: "nvidia.com/gpu", PerDevice: resource.MustParse("1")}},
			objs:    []client.Object{h200, gpuClass("any", ""), slice("s1", "n1", 1, "H200", 4)}, alloc: "4", free: "4"},
		{name: "a resource the node reports itself is not counted twice", mapping: gpus,
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Allocatable: rl("nvidia.com/gpu", "8")}},
			objs: []client.Object{h200, slice("s1", "n1", 1, "H200", 4)}, wantUnchanged: true},
		{name: "a selector that cannot be evaluated selects nothing", mapping: gpus, node: node,
			objs: []client.Object{gpuClass("gpu", `device.attributes["gpu.example.com"].missing == "x"`), slice("s1", "n1", 1, "H200", 4)}, wantUnchanged: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newTestDevices(t, tc.mapping, tc.objs...)
			alloc, free := tc.node.Status.Allocatable.DeepCopy(), tc.node.Status.Allocatable.DeepCopy()
			if err := d.add(context.Background(), tc.node, alloc, free); err != nil {
				t.Fatalf("add: %v", err)
			}
			if tc.wantUnchanged {
				if len(alloc) != len(tc.node.Status.Allocatable) || len(free) != len(tc.node.Status.Allocatable) {
					t.Fatalf("want allocatable and free unchanged, got %v and %v", alloc, free)
				}
				if q, want := alloc["nvidia.com/gpu"], tc.node.Status.Allocatable["nvidia.com/gpu"]; q.Cmp(want) != 0 {
					t.Fatalf("allocatable nvidia.com/gpu = %s, want %s", q.String(), want.String())
				}
				return
			}
			for _, c := range []struct {
				what string
				got  corev1.ResourceList
				want string
			}{{"allocatable", alloc, tc.alloc}, {"free", free, tc.free}} {
				q, ok := c.got["nvidia.com/gpu"]
				if !ok || q.Cmp(resource.MustParse(c.want)) != 0 {
					t.Errorf("%s nvidia.com/gpu = %s (present %v), want %s", c.what, q.String(), ok, c.want)
				}
			}
		})
	}
}

func TestDevicesNilCountsNothing(t *testing.T) {
	var d *devices
	alloc := rl("cpu", "1")
	if err := d.add(context.Background(), &corev1.Node{}, alloc, alloc); err != nil || len(alloc) != 1 {
		t.Fatalf("a nil device counter must leave capacity alone: %v %v", alloc, err)
	}
}

func rl(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func TestPoolToEngineCountsTemplateDevices(t *testing.T) {
	gpus := jobs.DeviceClassMapping{"gpu": {Resource: "nvidia.com/gpu", PerDevice: resource.MustParse("1")}}
	h200 := gpuClass("gpu", `device.attributes["gpu.example.com"].product == "H200"`)
	pool := func(product string, allocatable corev1.ResourceList) *berthv1.CapacityPool {
		return &berthv1.CapacityPool{Spec: berthv1.CapacityPoolSpec{MaxNodes: 2, NodeTemplate: berthv1.NodeTemplate{
			Allocatable: allocatable,
			Devices: []berthv1.TemplateDevices{{Name: "gpu", Driver: testDriver, Count: 8,
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"product": {StringValue: ptr.To(product)}}}},
		}}}
	}
	tests := []struct {
		name string
		pool *berthv1.CapacityPool
		want int64 // milli nvidia.com/gpu per node
	}{
		{"selected devices count per node", pool("H200", rl("cpu", "64")), 8000},
		{"devices the class does not select do not", pool("A100", rl("cpu", "64")), 0},
		{"the template's own extended resource wins", pool("H200", rl("nvidia.com/gpu", "4")), 4000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reconciler{devices: newTestDevices(t, gpus, h200)}
			got, err := r.poolToEngine(context.Background(), tc.pool, 0)
			if err != nil {
				t.Fatal(err)
			}
			if g := got.NodeCapacity["nvidia.com/gpu"]; g != tc.want {
				t.Errorf("node capacity nvidia.com/gpu = %d, want %d", g, tc.want)
			}
		})
	}
}

// TestDevicesFreshPool: the claims of a pool published after berth started
// are read from the API server until the claim cache holds them all, so a
// claim the cache has not caught up with still holds its device.
func TestDevicesFreshPool(t *testing.T) {
	gpus := jobs.DeviceClassMapping{"gpu": {Resource: "nvidia.com/gpu", PerDevice: resource.MustParse("1")}}
	h200 := gpuClass("gpu", `device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].product == "H200"`)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Allocatable: rl("cpu", "8")}}
	since := time.Unix(1000, 0)
	published := func(at time.Time) *resourcev1.ResourceSlice {
		s := slice("s1", "n1", 1, "H200", 4)
		s.CreationTimestamp = metav1.NewTime(at)
		return s
	}
	held := claim("n1", "p1", "dev-0")
	tests := []struct {
		name       string
		slice      *resourcev1.ResourceSlice
		cacheHas   bool // the claim cache has caught up with the claim
		wantFree   string
		wantReread bool // the next count reads the API server again
	}{
		{name: "a pool older than berth is read from the cache", slice: published(since.Add(-time.Hour)), wantFree: "4"},
		{name: "a new pool's claim the cache lacks still holds its device", slice: published(since.Add(time.Minute)),
			wantFree: "3", wantReread: true},
		{name: "a new pool whose claims the cache holds is confirmed", slice: published(since.Add(time.Minute)), cacheHas: true,
			wantFree: "3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{h200, tc.slice, pod("p1", false)}
			if tc.cacheHas {
				objs = append(objs, held.DeepCopy())
			}
			d := newTestDevices(t, gpus, objs...)
			api := &countingReader{Reader: newTestDevices(t, gpus, held.DeepCopy()).claims}
			d.api, d.since, d.confirmed = api, since, map[string]bool{}
			for range 2 {
				alloc, free := node.Status.Allocatable.DeepCopy(), node.Status.Allocatable.DeepCopy()
				if err := d.add(context.Background(), node, alloc, free); err != nil {
					t.Fatalf("add: %v", err)
				}
				if got := free["nvidia.com/gpu"]; got.String() != tc.wantFree {
					t.Fatalf("free = %s, want %s", got.String(), tc.wantFree)
				}
			}
			wantReads := 0
			switch {
			case tc.wantReread:
				wantReads = 2
			case tc.slice.CreationTimestamp.After(since):
				wantReads = 1
			}
			if api.lists != wantReads {
				t.Errorf("the API server was read %d times in two counts, want %d", api.lists, wantReads)
			}
		})
	}
}

// countingReader counts the lists it serves.
type countingReader struct {
	client.Reader
	lists int
}

func (r *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	r.lists++
	return r.Reader.List(ctx, list, opts...)
}
