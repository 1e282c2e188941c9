package autoscaler

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/cmd/internal/autoscale"
)

// View is the cluster one decision is taken against: plain objects, so the
// decision is a pure function of it.
type View struct {
	// Nodes are all nodes.
	Nodes []corev1.Node
	// Pods are all pods (only scheduled, unterminated ones use capacity).
	Pods []corev1.Pod
	// Requests are all ProvisioningRequests; Specs holds the pod specs of
	// their pod sets (by namespace/name, then pod set index) where the
	// PodTemplates exist.
	Requests []autoscalingv1.ProvisioningRequest
	Specs    map[string][]*corev1.PodSpec
	// Pools are all CapacityPools.
	Pools []berthv1.CapacityPool
	// Slices and Claims are all ResourceSlices and ResourceClaims; they are
	// read only when the pods of the request being decided use devices.
	// Devices holds the device requests of the requests' pod sets, as Specs
	// holds their specs.
	Slices  []resourcev1.ResourceSlice
	Claims  []resourcev1.ResourceClaim
	Devices map[string][][]DeviceRequest
	// Pending are the nodes CapacityBuffer scale-ups and scale-ups for
	// unschedulable pods decided and have not created yet
	// (BufferPendingAnnotation on buffers and pools): they count against
	// their pools' maxNodes, and their names are taken.
	Pending []NewNode
	// Now and BookingTTL decide which bookings still hold.
	Now        time.Time
	BookingTTL time.Duration
}

// key is a request's namespace/name.
func key(pr *autoscalingv1.ProvisioningRequest) string {
	return pr.Namespace + "/" + pr.Name
}

// PodsOf expands pod sets (their specs, in spec.podSets order) into pods.
func PodsOf(pr *autoscalingv1.ProvisioningRequest, specs []*corev1.PodSpec) []Pod {
	var pods []Pod
	for i, ps := range pr.Spec.PodSets {
		if i >= len(specs) || specs[i] == nil {
			continue
		}
		reqs := PodRequests(specs[i])
		for range ps.Count {
			pods = append(pods, Pod{PodSet: i, Spec: specs[i], Requests: reqs})
		}
	}
	return pods
}

// booked sums, per node, the capacity booked by every request except self.
func (v *View) booked(self string) map[string]corev1.ResourceList {
	bound := boundPods(v.Pods)
	out := map[string]corev1.ResourceList{}
	for i := range v.Requests {
		pr := &v.Requests[i]
		k := key(pr)
		if k == self || !autoscale.Supported(pr.Spec.ProvisioningClassName) {
			continue
		}
		specs := v.Specs[k]
		for node, sets := range Booked(pr, bound[k], v.Now, v.BookingTTL) {
			for set, count := range sets {
				if set >= len(specs) || specs[set] == nil || count <= 0 {
					continue
				}
				reqs := PodRequests(specs[set])
				if out[node] == nil {
					out[node] = corev1.ResourceList{}
				}
				for range count {
					addPod(out[node], reqs)
				}
			}
		}
	}
	return out
}

// addPod adds one pod of reqs, and its pod slot, to usage.
func addPod(usage, reqs corev1.ResourceList) {
	add(usage, reqs)
	add(usage, corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(1, resource.DecimalSI)})
}

// Bins are the usable nodes with what is free on each after bound pods and
// other requests' bookings, sorted by name.
func (v *View) Bins(self string) []*Bin {
	booked := v.booked(self)
	used := map[string]corev1.ResourceList{}
	for i := range v.Pods {
		p := &v.Pods[i]
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if used[p.Spec.NodeName] == nil {
			used[p.Spec.NodeName] = corev1.ResourceList{}
		}
		addPod(used[p.Spec.NodeName], PodRequests(&p.Spec))
	}
	devices := nodeDevices(v.Slices, v.Claims)
	var bins []*Bin
	for i := range v.Nodes {
		n := &v.Nodes[i]
		if !NodeUsable(n) {
			continue
		}
		free := n.Status.Allocatable.DeepCopy()
		subtractUsage(free, used[n.Name])
		subtractUsage(free, booked[n.Name])
		bins = append(bins, &Bin{Name: n.Name, Labels: n.Labels, Taints: n.Spec.Taints, Free: free, Devices: devices[n.Name]})
	}
	slices.SortFunc(bins, func(a, b *Bin) int { return strings.Compare(a.Name, b.Name) })
	v.bookDevices(self, bins)
	return bins
}

// bookDevices marks used, on each bin, the devices other requests' booked
// pods will claim there, as their requests are taken from Free. Pods
// already bound hold theirs through allocated claims.
func (v *View) bookDevices(self string, bins []*Bin) {
	if len(v.Devices) == 0 {
		return
	}
	byName := make(map[string]*Bin, len(bins))
	for _, b := range bins {
		byName[b.Name] = b
	}
	bound := boundPods(v.Pods)
	for i := range v.Requests {
		pr := &v.Requests[i]
		k := key(pr)
		if k == self || !autoscale.Supported(pr.Spec.ProvisioningClassName) || len(v.Devices[k]) == 0 {
			continue
		}
		for node, sets := range Booked(pr, bound[k], v.Now, v.BookingTTL) {
			b := byName[node]
			if b == nil {
				continue
			}
			for set, count := range sets {
				if set >= len(v.Devices[k]) || len(v.Devices[k][set]) == 0 {
					continue
				}
				pod := &Pod{Devices: v.Devices[k][set]}
				for range count {
					if picks, ok := b.devicesFor(pod); ok {
						b.use(picks)
					}
				}
			}
		}
	}
}

// ScalablePools are the pools new nodes may come from, sorted by name, each
// with the names still free under its maxNodes: existing nodes of the pool,
// nodes other requests are creating in it and nodes buffers are still to
// create in it (Pending) count against it. A pool
// whose cloud is out of stock (StockoutAnnotation) is marked so: it is
// still an option, whose scale-up fails.
func (v *View) ScalablePools(self string) []*Pool {
	names := map[string]bool{}
	existing := map[string]int32{}
	for i := range v.Nodes {
		names[v.Nodes[i].Name] = true
		if p := v.Nodes[i].Labels[berthv1.CapacityPoolLabel]; p != "" {
			existing[p]++
		}
	}
	inFlight := map[string]int32{}
	for _, n := range v.Pending {
		if !names[n.Name] {
			names[n.Name] = true
			inFlight[n.Pool]++
		}
	}
	for i := range v.Requests {
		pr := &v.Requests[i]
		if key(pr) == self || !Creating(pr) {
			continue
		}
		for _, n := range NewNodesOf(pr) {
			if !names[n.Name] {
				names[n.Name] = true
				inFlight[n.Pool]++
			}
		}
	}
	var pools []*Pool
	for i := range v.Pools {
		cp := &v.Pools[i]
		room := cp.Spec.MaxNodes - existing[cp.Name] - inFlight[cp.Name]
		p := &Pool{
			Name: cp.Name, Labels: TemplateLabels(cp), Taints: cp.Spec.NodeTemplate.Taints,
			Allocatable: cp.Spec.NodeTemplate.Allocatable, Max: cp.Spec.MaxNodes,
			Devices:    TemplateDevices(cp, ""),
			OutOfStock: cp.Annotations[StockoutAnnotation] == "true",
		}
		for n := 0; int32(len(p.Names)) < room; n++ {
			name := fmt.Sprintf("%s-%d", cp.Name, n)
			if !names[name] {
				p.Names = append(p.Names, name)
			}
		}
		pools = append(pools, p)
	}
	slices.SortFunc(pools, func(a, b *Pool) int { return strings.Compare(a.Name, b.Name) })
	return pools
}

// TemplateLabels are the labels every node of the pool carries, but the
// per-node hostname.
func TemplateLabels(cp *berthv1.CapacityPool) map[string]string {
	labels := make(map[string]string, len(cp.Spec.NodeTemplate.Labels)+1)
	for k, v := range cp.Spec.NodeTemplate.Labels {
		labels[k] = v
	}
	labels[berthv1.CapacityPoolLabel] = cp.Name
	return labels
}

// NodeFor is the kwok fake node name of pool cp, created for the request
// reqKey: the template's labels, taints and allocatable, the pool label and
// its hostname.
func NodeFor(cp *berthv1.CapacityPool, name, reqKey string) *corev1.Node {
	labels := TemplateLabels(cp)
	labels[corev1.LabelHostname] = name
	n := &corev1.Node{}
	n.Name = name
	n.Labels = labels
	n.Annotations = map[string]string{
		KwokNodeAnnotation:   "fake",
		CreatedForAnnotation: reqKey,
	}
	n.Spec.Taints = append([]corev1.Taint(nil), cp.Spec.NodeTemplate.Taints...)
	n.Status.Capacity = cp.Spec.NodeTemplate.Allocatable.DeepCopy()
	n.Status.Allocatable = cp.Spec.NodeTemplate.Allocatable.DeepCopy()
	return n
}

// subtractUsage subtracts usage from free; pod slots only where the node
// counts them.
func subtractUsage(free, usage corev1.ResourceList) {
	for name, q := range usage {
		if _, counted := free[name]; name == corev1.ResourcePods && !counted {
			continue
		}
		diff := free[name]
		diff.Sub(q)
		free[name] = diff
	}
}
