package jobs

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DeviceQuota says what one device of a DeviceClass costs in quota: the
// quota resource it is counted as, and how much of it per device.
type DeviceQuota struct {
	// Resource is the quota resource name, e.g. nvidia.com/gpu.
	Resource corev1.ResourceName
	// PerDevice is the amount of Resource one device counts as.
	PerDevice resource.Quantity
}

// DeviceClassMapping maps DeviceClass names to their quota. Devices of a
// class that is not in the mapping are not counted.
type DeviceClassMapping map[string]DeviceQuota

// ParseDeviceClassMapping parses the --dra-device-class flag's value: a
// comma-separated list of class=resource[:amount], amount 1 when omitted,
// e.g. "gpu.nvidia.com=nvidia.com/gpu,mig-3g.nvidia.com=nvidia.com/gpu:0.5".
func ParseDeviceClassMapping(s string) (DeviceClassMapping, error) {
	out := DeviceClassMapping{}
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		class, target, ok := strings.Cut(entry, "=")
		if !ok || class == "" || target == "" {
			return nil, fmt.Errorf("device class mapping %q: want class=resource[:amount]", entry)
		}
		name, amount, hasAmount := strings.Cut(target, ":")
		q := resource.MustParse("1")
		if hasAmount {
			var err error
			if q, err = resource.ParseQuantity(amount); err != nil {
				return nil, fmt.Errorf("device class mapping %q: amount: %w", entry, err)
			}
		}
		if q.Sign() <= 0 {
			return nil, fmt.Errorf("device class mapping %q: amount must be positive", entry)
		}
		out[class] = DeviceQuota{Resource: corev1.ResourceName(name), PerDevice: q}
	}
	return out, nil
}

// String formats the mapping as ParseDeviceClassMapping reads it, sorted by
// class.
func (m DeviceClassMapping) String() string {
	classes := make([]string, 0, len(m))
	for c := range m {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	parts := make([]string, 0, len(classes))
	for _, c := range classes {
		q := m[c].PerDevice
		parts = append(parts, c+"="+string(m[c].Resource)+":"+q.String())
	}
	return strings.Join(parts, ",")
}

// ClaimRequests adds to reqs what the pod's ResourceClaims and
// ResourceClaimTemplates cost in quota, per pod. A claim shared by name is
// counted for every pod that references it, because berth cannot know
// whether the pods share a node. It returns an *InvalidError a user can act
// on when a claim or template does not exist or cannot be counted.
func (m DeviceClassMapping) ClaimRequests(ctx context.Context, c client.Reader, namespace string, spec *corev1.PodSpec, reqs corev1.ResourceList) (corev1.ResourceList, error) {
	if len(m) == 0 || len(spec.ResourceClaims) == 0 {
		return reqs, nil
	}
	for _, pc := range spec.ResourceClaims {
		devices, err := claimDevices(ctx, c, namespace, pc)
		if err != nil {
			return nil, err
		}
		for _, r := range devices {
			if err := m.add(r, pc.Name, &reqs); err != nil {
				return nil, err
			}
		}
	}
	return reqs, nil
}

// largestRequests is the largest per-pod request of each resource over
// specs, each pod's claims added to its own containers' requests (beyond
// what the API server adds at creation, MemberRequests), and never less
// than floor, which holds the pod set's requests without claims. A pod that
// claims GPUs is so charged for them whichever pod the job's template is.
// Pods that name the same claims cost the same for them, so each list of
// claims is read once.
func (m DeviceClassMapping) largestRequests(ctx context.Context, c client.Reader, namespace string, specs []*corev1.PodSpec, floor corev1.ResourceList) (corev1.ResourceList, error) {
	if len(m) == 0 {
		return floor, nil
	}
	out := floor.DeepCopy()
	costs := map[string]corev1.ResourceList{}
	for _, spec := range specs {
		if len(spec.ResourceClaims) == 0 {
			continue
		}
		key := claimsKey(spec.ResourceClaims)
		cost, ok := costs[key]
		if !ok {
			var err error
			if cost, err = m.ClaimRequests(ctx, c, namespace, spec, nil); err != nil {
				return nil, err
			}
			costs[key] = cost
		}
		for name, q := range AddRequests(MemberRequests(spec), cost) {
			if cur, ok := out[name]; !ok || q.Cmp(cur) > 0 {
				if out == nil {
					out = corev1.ResourceList{}
				}
				out[name] = q
			}
		}
	}
	return out, nil
}

// claimsKey identifies what a pod's claims cost: the templates and claims
// they name, in order.
func claimsKey(claims []corev1.PodResourceClaim) string {
	var b strings.Builder
	for _, pc := range claims {
		switch {
		case pc.ResourceClaimTemplateName != nil:
			b.WriteString("t/" + *pc.ResourceClaimTemplateName)
		case pc.ResourceClaimName != nil:
			b.WriteString("c/" + *pc.ResourceClaimName)
		}
		b.WriteByte(0)
	}
	return b.String()
}

// add counts one device request: an exact request, or, for a request with
// alternatives, the most any of them costs per resource. The scheduler
// takes the first alternative it can allocate, so a first alternative that
// costs nothing (a class berth does not count) must not hide a later one
// that allocates GPUs.
func (m DeviceClassMapping) add(r resourcev1.DeviceRequest, claim string, reqs *corev1.ResourceList) error {
	if r.Exactly != nil {
		return m.addOne(r.Name, claim, r.Exactly.DeviceClassName, r.Exactly.AllocationMode, r.Exactly.Count, reqs)
	}
	most := corev1.ResourceList{}
	for _, s := range r.FirstAvailable {
		one := corev1.ResourceList{}
		if err := m.addOne(r.Name+"/"+s.Name, claim, s.DeviceClassName, s.AllocationMode, s.Count, &one); err != nil {
			return err
		}
		for name, q := range one {
			if cur, ok := most[name]; !ok || q.Cmp(cur) > 0 {
				most[name] = q
			}
		}
	}
	for name, q := range most {
		if *reqs == nil {
			*reqs = corev1.ResourceList{}
		}
		sum := (*reqs)[name]
		sum.Add(q)
		(*reqs)[name] = sum
	}
	return nil
}

// addOne counts count devices of class.
func (m DeviceClassMapping) addOne(request, claim, class string, mode resourcev1.DeviceAllocationMode, count int64, reqs *corev1.ResourceList) error {
	dq, ok := m[class]
	if !ok {
		return nil
	}
	if mode == resourcev1.DeviceAllocationModeAll {
		return Invalid("claim %q request %q asks for all devices of class %s, which berth cannot count: ask for an exact count", claim, request, class)
	}
	if count < 1 {
		count = 1
	}
	if *reqs == nil {
		*reqs = corev1.ResourceList{}
	}
	q := (*reqs)[dq.Resource]
	add := dq.PerDevice.DeepCopy()
	add.Mul(count)
	q.Add(add)
	(*reqs)[dq.Resource] = q
	return nil
}

// claimDevices reads the device requests of one pod claim.
func claimDevices(ctx context.Context, c client.Reader, namespace string, pc corev1.PodResourceClaim) ([]resourcev1.DeviceRequest, error) {
	switch {
	case pc.ResourceClaimTemplateName != nil:
		t := &resourcev1.ResourceClaimTemplate{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: *pc.ResourceClaimTemplateName}, t); err != nil {
			return nil, claimError(err, "ResourceClaimTemplate", *pc.ResourceClaimTemplateName)
		}
		return t.Spec.Spec.Devices.Requests, nil
	case pc.ResourceClaimName != nil:
		rc := &resourcev1.ResourceClaim{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: *pc.ResourceClaimName}, rc); err != nil {
			return nil, claimError(err, "ResourceClaim", *pc.ResourceClaimName)
		}
		return rc.Spec.Devices.Requests, nil
	}
	return nil, nil
}

func claimError(err error, kind, name string) error {
	if apierrors.IsNotFound(err) {
		return Invalid("%s %q does not exist: create it so berth can count its devices", kind, name)
	}
	return fmt.Errorf("reading %s %s: %w", kind, name, err)
}
