package autoscaler

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The stand-in reads what cluster-autoscaler's DRA snapshot holds, and
// publishes the slices of the nodes it creates.
// +kubebuilder:rbac:groups=resource.k8s.io,resources=resourceclaimtemplates;resourceclaims;deviceclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=resource.k8s.io,resources=resourceslices,verbs=get;list;watch;create

// usesDevices reports whether a pod spec has ResourceClaims.
func usesDevices(specs []*corev1.PodSpec) bool {
	for _, s := range specs {
		if s != nil && len(s.ResourceClaims) > 0 {
			return true
		}
	}
	return false
}

// deviceRequests reads the device requests of each pod spec's
// ResourceClaimTemplates in namespace. With fresh, a template or class the
// cache does not hold yet is read from the API server. missing names the
// first ResourceClaimTemplate that does not exist. A claim referenced by
// name (shared by pods) is not simulated: its devices are the claim's
// owner's business, and it asks nothing of a new node here.
func (r *RequestReconciler) deviceRequests(ctx context.Context, namespace string, specs []*corev1.PodSpec, fresh bool) (out [][]DeviceRequest, missing string, err error) {
	if !usesDevices(specs) {
		return nil, "", nil
	}
	classes := map[string]*resourcev1.DeviceClass{}
	out = make([][]DeviceRequest, len(specs))
	for i, spec := range specs {
		if spec == nil {
			continue
		}
		claims := map[string]*resourcev1.ResourceClaimSpec{}
		for _, pc := range spec.ResourceClaims {
			if pc.ResourceClaimTemplateName == nil {
				continue
			}
			t := &resourcev1.ResourceClaimTemplate{}
			name := types.NamespacedName{Namespace: namespace, Name: *pc.ResourceClaimTemplateName}
			found, err := r.get(ctx, name, t, fresh)
			if err != nil {
				return nil, "", fmt.Errorf("reading ResourceClaimTemplate %s: %w", name, err)
			}
			if !found {
				if missing == "" {
					missing = name.String()
				}
				continue
			}
			claims[pc.Name] = &t.Spec.Spec
			if err := r.readClasses(ctx, &t.Spec.Spec, classes, fresh); err != nil {
				return nil, "", err
			}
		}
		out[i] = DeviceRequestsOf(claims, classes, r.selectors)
	}
	return out, missing, nil
}

// readClasses adds to classes the DeviceClasses the claim names that
// exist.
func (r *RequestReconciler) readClasses(ctx context.Context, spec *resourcev1.ResourceClaimSpec, classes map[string]*resourcev1.DeviceClass, fresh bool) error {
	var names []string
	for _, req := range spec.Devices.Requests {
		if req.Exactly != nil {
			names = append(names, req.Exactly.DeviceClassName)
		}
		for _, s := range req.FirstAvailable {
			names = append(names, s.DeviceClassName)
		}
	}
	for _, n := range names {
		if _, seen := classes[n]; seen || n == "" {
			continue
		}
		dc := &resourcev1.DeviceClass{}
		found, err := r.get(ctx, types.NamespacedName{Name: n}, dc, fresh)
		if err != nil {
			return fmt.Errorf("reading DeviceClass %s: %w", n, err)
		}
		if found {
			classes[n] = dc
		}
	}
	return nil
}

// get reads obj from the cache and, with fresh, from the API server when
// the cache does not hold it yet; found is false when it does not exist.
func (r *RequestReconciler) get(ctx context.Context, name types.NamespacedName, obj client.Object, fresh bool) (bool, error) {
	err := r.Client.Get(ctx, name, obj)
	if apierrors.IsNotFound(err) && fresh {
		err = r.Reader.Get(ctx, name, obj)
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// readDevices adds to the view what device fitting needs: every
// ResourceSlice and ResourceClaim, and the device requests of the requests
// that book capacity. It is called only for a request whose pods use
// devices, so a cluster without DRA is never asked for DRA objects.
func (r *RequestReconciler) readDevices(ctx context.Context, v *View) error {
	slices := &resourcev1.ResourceSliceList{}
	if err := r.Client.List(ctx, slices); err != nil {
		return fmt.Errorf("listing ResourceSlices: %w", err)
	}
	claims := &resourcev1.ResourceClaimList{}
	if err := r.Client.List(ctx, claims); err != nil {
		return fmt.Errorf("listing ResourceClaims: %w", err)
	}
	v.Slices, v.Claims = slices.Items, claims.Items
	v.Devices = map[string][][]DeviceRequest{}
	for i := range v.Requests {
		pr := &v.Requests[i]
		specs := v.Specs[key(pr)]
		if specs == nil {
			continue
		}
		devs, _, err := r.deviceRequests(ctx, pr.Namespace, specs, false)
		if err != nil {
			return err
		}
		v.Devices[key(pr)] = devs
	}
	return nil
}

// withDevices gives every pod the device requests of its pod set.
func withDevices(pods []Pod, devs [][]DeviceRequest) {
	for i := range pods {
		if s := pods[i].PodSet; s < len(devs) {
			pods[i].Devices = devs[s]
		}
	}
}

// createSlices publishes the ResourceSlices of a node the autoscaler
// created, once the node exists (they are owned by it).
func (r *RequestReconciler) createSlices(ctx context.Context, node *corev1.Node, owner string, slices []*resourcev1.ResourceSlice) error {
	for _, s := range slices {
		if err := r.Client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ResourceSlice %s of node %s for %s: %w", s.Name, node.Name, owner, err)
		}
	}
	return nil
}
