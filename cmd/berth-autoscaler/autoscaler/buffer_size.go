package autoscaler

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	cbv1beta1 "github.com/berth-dev/berth/apis/capacitybuffer/v1beta1"
)

// Errors BufferReplicas returns; the buffer controller writes them in the
// ReadyForProvisioning=False message, so they say what to fix.
var (
	// ErrNoSize: nothing sizes the buffer (cluster-autoscaler: "replicas,
	// percentage and limits are not defined").
	ErrNoSize = errors.New("replicas, percentage and limits are not defined: set spec.replicas, spec.limits, or spec.percentage with a scalableRef")
	// ErrLimitsNotRequested: no resource of spec.limits is requested by the
	// pod (cluster-autoscaler: "resources in configured limits not found in
	// the pod template").
	ErrLimitsNotRequested = errors.New("resources in configured limits not found in the pod template: spec.limits must name a resource the pod requests")
)

// BufferReplicas is the replica count of a buffer, as cluster-autoscaler's
// newest sizing (capacitybuffer/translators/replicas.go, after
// kubernetes/autoscaler#9959) computes it:
// min(max(replicas, ceil(percentage × scalableReplicas / 100)), limitsFit).
// percentage counts only when scalableReplicas is given (a scalableRef
// buffer); a percentage that rounds to 0 stays 0. limits only caps, unless
// it is the only thing set. requests is one pod's (PodRequests).
func BufferReplicas(spec *cbv1beta1.CapacityBufferSpec, requests corev1.ResourceList, scalableReplicas *int32) (int32, error) {
	var want *int64
	if spec.Replicas != nil {
		want = ptrTo(int64(*spec.Replicas))
	}
	if spec.Percentage != nil && scalableReplicas != nil {
		// Ceiling division in int64: two int32 factors cannot overflow.
		p := (int64(*spec.Percentage)*int64(*scalableReplicas) + 99) / 100
		if want == nil || p > *want {
			want = &p
		}
	}
	if spec.Limits != nil {
		fit, err := LimitsFit(spec.Limits, requests)
		if err != nil {
			return 0, err
		}
		if want == nil || fit < *want {
			want = &fit
		}
	}
	if want == nil {
		return 0, ErrNoSize
	}
	return clampInt32(*want), nil
}

// LimitsFit is how many pods of requests fit in limits: over the resources
// the pod requests (more than zero) that limits names, the smallest
// floor(limit / request), counted in milli-units as cluster-autoscaler
// does. It fails when limits names no requested resource.
func LimitsFit(limits, requests corev1.ResourceList) (int64, error) {
	fit := int64(-1)
	for name, req := range requests {
		limit, ok := limits[name]
		if !ok || req.Sign() <= 0 {
			continue
		}
		n := limit.MilliValue() / req.MilliValue()
		if fit < 0 || n < fit {
			fit = n
		}
	}
	if fit < 0 {
		return 0, ErrLimitsNotRequested
	}
	return fit, nil
}

func ptrTo[T any](v T) *T { return &v }

// clampInt32 clamps n to [0, MaxInt32].
func clampInt32(n int64) int32 {
	return int32(min(max(n, 0), math.MaxInt32))
}

// QuotaBuffer is one buffer as the quota allocation sees it.
type QuotaBuffer struct {
	// Replicas is the count before quotas.
	Replicas int32
	// Requests are one pod's requests (PodRequests: limits stand in for
	// missing requests).
	Requests corev1.ResourceList
	// Spec is the pod's spec, to match quota scopes.
	Spec *corev1.PodSpec
}

// QuotaResult is what the quotas leave of one buffer.
type QuotaResult struct {
	// Replicas is the count the quotas allow (at most the buffer's).
	Replicas int32
	// Limited: fewer than the buffer's; Quotas names the quotas that cut
	// it, sorted.
	Limited bool
	Quotas  []string
}

// Message is the LimitedByQuotas=True message, cluster-autoscaler's
// wording (capacitybuffer/controller/resourcequotas.go).
func (r QuotaResult) Message(from int32) string {
	if !r.Limited {
		return ""
	}
	return fmt.Sprintf("Buffer replicas limited from %d to %d due to quotas: %s", from, r.Replicas, strings.Join(r.Quotas, ", "))
}

// CapByQuotas allocates the namespace's ResourceQuotas to its buffers, in
// the order given (creation time, then name), as cluster-autoscaler's
// controller does: buffers are not pods, so the quota system never counts
// them, and the controller makes each fit what the quotas leave. Per
// quota whose scopes match the pod and per resource of its status.hard
// that the pod requests (keyed "cpu" or "requests.cpu"), a buffer gets
// floor((hard − used − allocated to earlier buffers) / request), 0 when
// negative; limits.* and the pods count are not considered.
func CapByQuotas(buffers []QuotaBuffer, quotas []corev1.ResourceQuota) []QuotaResult {
	allocated := make([]corev1.ResourceList, len(quotas))
	out := make([]QuotaResult, len(buffers))
	for i, b := range buffers {
		res := QuotaResult{Replicas: b.Replicas}
		for qi := range quotas {
			q := &quotas[qi]
			if !quotaApplies(q, b.Spec) {
				continue
			}
			allowed := quotaFit(q, allocated[qi], b.Requests)
			if allowed < int64(b.Replicas) {
				res.Limited = true
				res.Quotas = append(res.Quotas, q.Name)
				res.Replicas = min(res.Replicas, clampInt32(allowed))
			}
		}
		slices.Sort(res.Quotas)
		out[i] = res
		for qi := range quotas {
			if !quotaApplies(&quotas[qi], b.Spec) {
				continue
			}
			if allocated[qi] == nil {
				allocated[qi] = corev1.ResourceList{}
			}
			for range res.Replicas {
				add(allocated[qi], b.Requests)
			}
		}
	}
	return out
}

// quotaFit is how many pods of requests quota q still admits after its
// used and allocated; MaxInt64 when it constrains none of the requests.
func quotaFit(q *corev1.ResourceQuota, allocated, requests corev1.ResourceList) int64 {
	fit := int64(math.MaxInt64)
	for name, hard := range q.Status.Hard {
		req, ok := requests[corev1.ResourceName(strings.TrimPrefix(string(name), "requests."))]
		if !ok || req.Sign() <= 0 {
			continue
		}
		avail := hard.DeepCopy()
		avail.Sub(q.Status.Used[name])
		if a, ok := allocated[corev1.ResourceName(strings.TrimPrefix(string(name), "requests."))]; ok {
			avail.Sub(a)
		}
		n := int64(0)
		if avail.Sign() > 0 {
			n = avail.MilliValue() / req.MilliValue()
		}
		fit = min(fit, n)
	}
	return fit
}

// quotaApplies reports whether quota q's scopes select a pod of spec, as
// the quota system would: NotTerminating and NotBestEffort match (a
// buffer's pod has requests and runs as long as the buffer), Terminating,
// BestEffort and CrossNamespacePodAffinity do not, PriorityClass compares
// the pod's priorityClassName.
func quotaApplies(q *corev1.ResourceQuota, spec *corev1.PodSpec) bool {
	for _, s := range q.Spec.Scopes {
		if !scopeMatches(corev1.ScopedResourceSelectorRequirement{ScopeName: s, Operator: corev1.ScopeSelectorOpExists}, spec) {
			return false
		}
	}
	if q.Spec.ScopeSelector != nil {
		for _, r := range q.Spec.ScopeSelector.MatchExpressions {
			if !scopeMatches(r, spec) {
				return false
			}
		}
	}
	return true
}

func scopeMatches(r corev1.ScopedResourceSelectorRequirement, spec *corev1.PodSpec) bool {
	switch r.ScopeName {
	case corev1.ResourceQuotaScopeNotTerminating, corev1.ResourceQuotaScopeNotBestEffort:
		return true
	case corev1.ResourceQuotaScopePriorityClass:
		pc := ""
		if spec != nil {
			pc = spec.PriorityClassName
		}
		switch r.Operator {
		case corev1.ScopeSelectorOpIn:
			return slices.Contains(r.Values, pc)
		case corev1.ScopeSelectorOpNotIn:
			return !slices.Contains(r.Values, pc)
		case corev1.ScopeSelectorOpExists:
			return pc != ""
		case corev1.ScopeSelectorOpDoesNotExist:
			return pc == ""
		}
	}
	return false
}
