package autoscaler

import (
	"context"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/capacity"
)

// DeviceRequest is one request of a pod's ResourceClaim: the scheduler
// satisfies it with the first of its alternatives that fits (one for an
// exactly request, the subrequests in order for firstAvailable).
type DeviceRequest struct {
	// Name is claim/request, for messages.
	Name string
	// Alternatives are tried in order.
	Alternatives []DeviceAlternative
}

// DeviceAlternative asks for Count devices that every selector selects:
// the DeviceClass's, then the request's own.
type DeviceAlternative struct {
	// Class names the DeviceClass; ClassMissing is true when it does not
	// exist, and then no device matches, as the scheduler finds none.
	Class        string
	ClassMissing bool
	Selectors    []resourcev1.DeviceSelector
	// Count is the exact number of devices (allocation mode ExactCount).
	// Allocation mode All is not simulated: All is true and nothing fits.
	Count int64
	All   bool
	// eval evaluates Selectors.
	eval *capacity.Selectors
}

// matches reports whether the device satisfies the alternative. A selector
// that cannot be evaluated matches nothing, as the scheduler cannot
// allocate through it.
func (a *DeviceAlternative) matches(d *NodeDevice) bool {
	if a.ClassMissing || a.All || a.eval == nil {
		return false
	}
	// The expressions are bounded by the CEL cost limit; no deadline needed.
	ok, err := a.eval.Match(context.Background(), a.Selectors, d.Driver, &d.Device)
	return err == nil && ok
}

// NodeDevice is one DRA device of a node, existing or to be created.
type NodeDevice struct {
	// Driver and Pool name it with Device.Name, as allocation results do.
	Driver, Pool string
	Device       resourcev1.Device
}

// key names the device as an allocation result does.
func (d *NodeDevice) key() string { return d.Driver + "/" + d.Pool + "/" + d.Device.Name }

// allocate picks, from the devices not used yet, one set of devices for
// each of the pod's requests in order (first fit, each device to one
// request only), and returns their indexes; false when a request cannot be
// satisfied. The scheduler's allocator backtracks over choices, so with
// devices that differ and selectors that overlap it may place a pod this
// refuses; for identical devices, the case node groups have, both agree.
func allocate(reqs []DeviceRequest, devs []NodeDevice, used []bool) ([]int, bool) {
	if len(reqs) == 0 {
		return nil, true
	}
	taken := slices.Clone(used)
	if taken == nil {
		taken = make([]bool, len(devs))
	}
	var picks []int
	for _, r := range reqs {
		ok := false
		for i := range r.Alternatives {
			alt := &r.Alternatives[i]
			var got []int
			for j := range devs {
				if int64(len(got)) == alt.Count {
					break
				}
				if !taken[j] && alt.matches(&devs[j]) {
					got = append(got, j)
				}
			}
			if alt.Count > 0 && int64(len(got)) == alt.Count {
				for _, j := range got {
					taken[j] = true
				}
				picks = append(picks, got...)
				ok = true
				break
			}
		}
		if !ok {
			return nil, false
		}
	}
	return picks, true
}

// TemplateDevices are the devices one new node of the pool publishes,
// named as SlicesFor names them, in a pool named after the node.
func TemplateDevices(cp *berthv1.CapacityPool, node string) []NodeDevice {
	devs := capacity.TemplateDevices(&cp.Spec.NodeTemplate)
	out := make([]NodeDevice, len(devs))
	for i, d := range devs {
		out[i] = NodeDevice{Driver: d.Driver, Pool: node, Device: d.Device}
	}
	return out
}

// SlicesFor are the ResourceSlices a new node of the pool publishes, as a
// DRA driver's kubelet plugin would: one per driver, its pool named after
// the node, owned by the node so that they go when it goes.
func SlicesFor(cp *berthv1.CapacityPool, node *corev1.Node) []*resourcev1.ResourceSlice {
	byDriver := map[string][]resourcev1.Device{}
	for _, d := range TemplateDevices(cp, node.Name) {
		byDriver[d.Driver] = append(byDriver[d.Driver], d.Device)
	}
	drivers := make([]string, 0, len(byDriver))
	for d := range byDriver {
		drivers = append(drivers, d)
	}
	slices.Sort(drivers)
	out := make([]*resourcev1.ResourceSlice, 0, len(drivers))
	for _, driver := range drivers {
		s := &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{
				Name: node.Name + "-" + driver,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
					Controller: ptr.To(true)}},
			},
			Spec: resourcev1.ResourceSliceSpec{
				Driver: driver, NodeName: ptr.To(node.Name),
				Pool:    resourcev1.ResourcePool{Name: node.Name, Generation: 1, ResourceSliceCount: 1},
				Devices: byDriver[driver],
			},
		}
		out = append(out, s)
	}
	return out
}

// nodeDevices are the devices of the node-local slices of each node (the
// newest generation of each pool), less those allocated to claims, sorted
// by driver, pool and name.
func nodeDevices(slicesList []resourcev1.ResourceSlice, claims []resourcev1.ResourceClaim) map[string][]NodeDevice {
	newest := map[string]int64{}
	for i := range slicesList {
		s := &slicesList[i]
		k := s.Spec.Driver + "/" + s.Spec.Pool.Name
		newest[k] = max(newest[k], s.Spec.Pool.Generation)
	}
	allocated := map[string]bool{}
	for i := range claims {
		if a := claims[i].Status.Allocation; a != nil {
			for _, r := range a.Devices.Results {
				if !ptr.Deref(r.AdminAccess, false) {
					allocated[r.Driver+"/"+r.Pool+"/"+r.Device] = true
				}
			}
		}
	}
	out := map[string][]NodeDevice{}
	for i := range slicesList {
		s := &slicesList[i]
		node := ptr.Deref(s.Spec.NodeName, "")
		if node == "" || s.Spec.Pool.Generation < newest[s.Spec.Driver+"/"+s.Spec.Pool.Name] {
			continue
		}
		for j := range s.Spec.Devices {
			d := NodeDevice{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name, Device: s.Spec.Devices[j]}
			if !allocated[d.key()] {
				out[node] = append(out[node], d)
			}
		}
	}
	for _, devs := range out {
		slices.SortFunc(devs, func(a, b NodeDevice) int { return strings.Compare(a.key(), b.key()) })
	}
	return out
}

// DeviceRequestsOf turns the requests of a pod's ResourceClaimTemplates
// into DeviceRequests: claims are the templates' claim specs in the order
// of the pod's resourceClaims, classes the DeviceClasses by name.
func DeviceRequestsOf(claims map[string]*resourcev1.ResourceClaimSpec, classes map[string]*resourcev1.DeviceClass, eval *capacity.Selectors) []DeviceRequest {
	names := make([]string, 0, len(claims))
	for n := range claims {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []DeviceRequest
	for _, claim := range names {
		for _, r := range claims[claim].Devices.Requests {
			dr := DeviceRequest{Name: claim + "/" + r.Name}
			switch {
			case r.Exactly != nil:
				dr.Alternatives = append(dr.Alternatives, alternative(r.Exactly.DeviceClassName, r.Exactly.Selectors, r.Exactly.AllocationMode, r.Exactly.Count, classes, eval))
			default:
				for _, s := range r.FirstAvailable {
					dr.Alternatives = append(dr.Alternatives, alternative(s.DeviceClassName, s.Selectors, s.AllocationMode, s.Count, classes, eval))
				}
			}
			out = append(out, dr)
		}
	}
	return out
}

func alternative(class string, own []resourcev1.DeviceSelector, mode resourcev1.DeviceAllocationMode, count int64, classes map[string]*resourcev1.DeviceClass, eval *capacity.Selectors) DeviceAlternative {
	a := DeviceAlternative{Class: class, Count: max(count, 1), All: mode == resourcev1.DeviceAllocationModeAll, eval: eval}
	dc, ok := classes[class]
	if !ok {
		a.ClassMissing = true
		return a
	}
	a.Selectors = append(slices.Clone(dc.Spec.Selectors), own...)
	return a
}
