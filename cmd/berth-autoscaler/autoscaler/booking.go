package autoscaler

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
)

// Keys of status.provisioningClassDetails the autoscaler writes. They are
// its whole memory of a request: after a restart it books and finishes
// scale-ups from them alone.
const (
	// DetailPlacement lists where the request's pods are booked:
	// <node>:<pod set index>:<count>, comma separated, sorted.
	DetailPlacement = "placement"
	// DetailNodes lists the nodes holding the booked capacity, sorted.
	DetailNodes = "nodes"
	// DetailNewNodes lists the nodes created (or being created) for the
	// request as <pool>/<node>, in creation order.
	DetailNewNodes = "newNodes"
	// DetailPools lists the CapacityPools the request scaled up, sorted.
	DetailPools = "pools"
	// DetailScaleUpStarted is when the scale-up was decided (RFC 3339);
	// the nodes are created once the provisioning latency has passed.
	DetailScaleUpStarted = "scaleUpStarted"
	// DetailNodesCreated is "true" once the scale-up's nodes were created
	// (those a partial failure left out never come).
	DetailNodesCreated = "nodesCreated"
	// DetailConsumed is "true" once as many pods as the request asks for
	// consumed it: the stand-in stops holding capacity for it (the
	// booking still expires at its time).
	DetailConsumed = "consumed"
	// DetailRetries counts the answers CapacityIsNotFound; DetailRetryAt
	// is when the request is tried again (RFC 3339).
	DetailRetries = "retries"
	DetailRetryAt = "retryAt"
)

// Placement maps node → pod set index → pods booked there.
type Placement map[string]map[int]int32

// PlacementOf turns a plan into a placement.
func PlacementOf(pods []Pod, plan Plan) Placement {
	p := Placement{}
	for i, node := range plan.Assigned {
		if node == "" {
			continue
		}
		if p[node] == nil {
			p[node] = map[int]int32{}
		}
		p[node][pods[i].PodSet]++
	}
	return p
}

// Nodes are the placement's nodes, sorted.
func (p Placement) Nodes() []string {
	nodes := make([]string, 0, len(p))
	for n := range p {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	return nodes
}

// String encodes the placement for DetailPlacement.
func (p Placement) String() string {
	var parts []string
	for _, n := range p.Nodes() {
		sets := make([]int, 0, len(p[n]))
		for s := range p[n] {
			sets = append(sets, s)
		}
		slices.Sort(sets)
		for _, s := range sets {
			if p[n][s] > 0 {
				parts = append(parts, fmt.Sprintf("%s:%d:%d", n, s, p[n][s]))
			}
		}
	}
	return strings.Join(parts, ",")
}

// ParsePlacement decodes DetailPlacement.
func ParsePlacement(s string) (Placement, error) {
	p := Placement{}
	if s == "" {
		return p, nil
	}
	for _, part := range strings.Split(s, ",") {
		f := strings.Split(part, ":")
		if len(f) != 3 {
			return nil, fmt.Errorf("placement entry %q is not node:podSet:count", part)
		}
		set, err1 := strconv.Atoi(f[1])
		count, err2 := strconv.ParseInt(f[2], 10, 32)
		if err1 != nil || err2 != nil || set < 0 || count < 0 {
			return nil, fmt.Errorf("placement entry %q is not node:podSet:count", part)
		}
		if p[f[0]] == nil {
			p[f[0]] = map[int]int32{}
		}
		p[f[0]][set] += int32(count)
	}
	return p, nil
}

// Consume removes from the placement one pod per node name in boundTo (the
// nodes the request's consuming pods are bound to): from that node when it
// holds booked pods, else from the first node that does. Those pods' own
// requests now count on their nodes, so their share of the booking ends.
func (p Placement) Consume(boundTo []string) {
	for _, node := range boundTo {
		if !p.takeOne(node) {
			for _, n := range p.Nodes() {
				if p.takeOne(n) {
					break
				}
			}
		}
	}
}

// takeOne removes one pod booked on node, lowest pod set first.
func (p Placement) takeOne(node string) bool {
	sets := make([]int, 0, len(p[node]))
	for s, c := range p[node] {
		if c > 0 {
			sets = append(sets, s)
		}
	}
	if len(sets) == 0 {
		return false
	}
	slices.Sort(sets)
	p[node][sets[0]]--
	return true
}

// Phase is where a request stands for the autoscaler.
type Phase int

// The phases of a request.
const (
	// PhaseNew: nothing decided yet, or no capacity found and waiting for
	// the next try.
	PhaseNew Phase = iota
	// PhaseProvisioned: Provisioned=True; the booking holds until it
	// expires (a scale-up's nodes may still be joining).
	PhaseProvisioned
	// PhaseDone: Failed, BookingExpired or CapacityRevoked: nothing more
	// happens and nothing is booked.
	PhaseDone
)

// PhaseOf classifies a request from its conditions.
func PhaseOf(pr *autoscalingv1.ProvisioningRequest) Phase {
	c := pr.Status.Conditions
	switch {
	case apimeta.IsStatusConditionTrue(c, autoscalingv1.Failed),
		apimeta.IsStatusConditionTrue(c, autoscalingv1.BookingExpired),
		apimeta.IsStatusConditionTrue(c, autoscalingv1.CapacityRevoked):
		return PhaseDone
	case apimeta.IsStatusConditionTrue(c, autoscalingv1.Provisioned):
		return PhaseProvisioned
	}
	return PhaseNew
}

// Creating reports whether a provisioned scale-up's nodes are still to be
// created.
func Creating(pr *autoscalingv1.ProvisioningRequest) bool {
	return PhaseOf(pr) == PhaseProvisioned && detail(pr, DetailScaleUpStarted) != "" && detail(pr, DetailNodesCreated) != "true"
}

// ExpiresAt is when a provisioned request's booking expires: ttl after
// Provisioned became True.
func ExpiresAt(pr *autoscalingv1.ProvisioningRequest, ttl time.Duration) time.Time {
	c := apimeta.FindStatusCondition(pr.Status.Conditions, autoscalingv1.Provisioned)
	if c == nil {
		return time.Time{}
	}
	return c.LastTransitionTime.Add(ttl)
}

// Booked is the placement a provisioned request holds at now: what its
// bound consuming pods have not taken yet, until the booking expires or the
// pods took all of it; any other request holds nothing.
func Booked(pr *autoscalingv1.ProvisioningRequest, boundTo []string, now time.Time, ttl time.Duration) Placement {
	if PhaseOf(pr) != PhaseProvisioned || detail(pr, DetailConsumed) == "true" || !now.Before(ExpiresAt(pr, ttl)) {
		return nil
	}
	p, err := ParsePlacement(detail(pr, DetailPlacement))
	if err != nil {
		return nil
	}
	p.Consume(boundTo)
	return p
}

// TotalCount is the number of pods the request asks for.
func TotalCount(pr *autoscalingv1.ProvisioningRequest) int32 {
	var n int32
	for _, ps := range pr.Spec.PodSets {
		n += ps.Count
	}
	return n
}

// NewNodesOf decodes DetailNewNodes.
func NewNodesOf(pr *autoscalingv1.ProvisioningRequest) []NewNode {
	s := detail(pr, DetailNewNodes)
	if s == "" {
		return nil
	}
	var out []NewNode
	for _, part := range strings.Split(s, ",") {
		pool, name, ok := strings.Cut(part, "/")
		if ok {
			out = append(out, NewNode{Pool: pool, Name: name})
		}
	}
	return out
}

// encodeNewNodes encodes DetailNewNodes.
func encodeNewNodes(nodes []NewNode) string {
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		parts[i] = n.Pool + "/" + n.Name
	}
	return strings.Join(parts, ",")
}

// poolsOf are the distinct pools of nodes, sorted.
func poolsOf(nodes []NewNode) []string {
	var pools []string
	for _, n := range nodes {
		if !slices.Contains(pools, n.Pool) {
			pools = append(pools, n.Pool)
		}
	}
	slices.Sort(pools)
	return pools
}

// detail reads one provisioningClassDetails value.
func detail(pr *autoscalingv1.ProvisioningRequest, key string) string {
	return string(pr.Status.ProvisioningClassDetails[key])
}

// setDetail writes one provisioningClassDetails value.
func setDetail(pr *autoscalingv1.ProvisioningRequest, key, value string) {
	if pr.Status.ProvisioningClassDetails == nil {
		pr.Status.ProvisioningClassDetails = map[string]autoscalingv1.Detail{}
	}
	pr.Status.ProvisioningClassDetails[key] = autoscalingv1.Detail(value)
}

// setCondition sets a condition at now. As cluster-autoscaler does, the
// transition time is now at every write, even when the status stays: a
// client must not read from it since when a state lasted.
func setCondition(pr *autoscalingv1.ProvisioningRequest, typ string, status metav1.ConditionStatus, reason, msg string, now time.Time) {
	apimeta.RemoveStatusCondition(&pr.Status.Conditions, typ)
	apimeta.SetStatusCondition(&pr.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: pr.Generation, LastTransitionTime: metav1.NewTime(now),
	})
}

// setCond sets c as setCondition does.
func setCond(pr *autoscalingv1.ProvisioningRequest, c metav1.Condition) {
	setCondition(pr, c.Type, c.Status, c.Reason, c.Message, c.LastTransitionTime.Time)
}

// boundPods returns, per request (namespace/name), the nodes its consuming
// pods are bound to: pods annotated with the consume annotation and
// scheduled, whatever their phase.
func boundPods(pods []corev1.Pod) map[string][]string {
	out := map[string][]string{}
	for i := range pods {
		p := &pods[i]
		name := p.Annotations[autoscalingv1.ProvisioningRequestPodAnnotationKey]
		if name == "" || p.Spec.NodeName == "" {
			continue
		}
		key := p.Namespace + "/" + name
		out[key] = append(out[key], p.Spec.NodeName)
	}
	return out
}
