package jobs

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestParseDeviceClassMapping(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{in: "", want: ""},
		{in: "gpu.nvidia.com=nvidia.com/gpu", want: "gpu.nvidia.com=nvidia.com/gpu:1"},
		{in: "gpu.nvidia.com=nvidia.com/gpu, mig.nvidia.com=nvidia.com/gpu:500m", want: "gpu.nvidia.com=nvidia.com/gpu:1,mig.nvidia.com=nvidia.com/gpu:500m"},
		{in: "gpu.nvidia.com", wantErr: true},
		{in: "=nvidia.com/gpu", wantErr: true},
		{in: "gpu.nvidia.com=nvidia.com/gpu:abc", wantErr: true},
		{in: "gpu.nvidia.com=nvidia.com/gpu:0", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			m, err := ParseDeviceClassMapping(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, want error %v", err, tt.wantErr)
			}
			if err == nil && m.String() != tt.want {
				t.Errorf("got %q, want %q", m.String(), tt.want)
			}
		})
	}
}

func TestClaimRequests(t *testing.T) {
	exact := func(class string, mode resourcev1.DeviceAllocationMode, n int64) resourcev1.DeviceRequest {
		return resourcev1.DeviceRequest{Name: "r", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: mode, Count: n}}
	}
	tmpl := func(name string, reqs ...resourcev1.DeviceRequest) *resourcev1.ResourceClaimTemplate {
		return &resourcev1.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec:       resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: reqs}}},
		}
	}
	firstAvailable := func(subs ...resourcev1.DeviceSubRequest) resourcev1.DeviceRequest {
		return resourcev1.DeviceRequest{Name: "r", FirstAvailable: subs}
	}
	sub := func(name, class string, n int64) resourcev1.DeviceSubRequest {
		return resourcev1.DeviceSubRequest{Name: name, DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: n}
	}
	scheme := runtime.NewScheme()
	if err := resourcev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		tmpl("four", exact("gpu.nvidia.com", resourcev1.DeviceAllocationModeExactCount, 4)),
		tmpl("all", exact("gpu.nvidia.com", resourcev1.DeviceAllocationModeAll, 0)),
		tmpl("other", exact("nic.example.com", resourcev1.DeviceAllocationModeExactCount, 2)),
		tmpl("halves", exact("mig.nvidia.com", resourcev1.DeviceAllocationModeExactCount, 3)),
		tmpl("unmapped-first", firstAvailable(sub("nic", "nic.example.com", 1), sub("gpus", "gpu.nvidia.com", 8))),
		tmpl("cheaper-later", firstAvailable(sub("full", "gpu.nvidia.com", 2), sub("mig", "mig.nvidia.com", 2))),
	).Build()
	m := DeviceClassMapping{
		"gpu.nvidia.com": {Resource: "nvidia.com/gpu", PerDevice: resource.MustParse("1")},
		"mig.nvidia.com": {Resource: "nvidia.com/gpu", PerDevice: resource.MustParse("500m")},
	}
	tests := []struct {
		name      string
		templates []string
		want      string // nvidia.com/gpu per pod
		invalid   bool
	}{
		{name: "exact count", templates: []string{"four"}, want: "4"},
		{name: "unmapped class is not counted", templates: []string{"other"}, want: "0"},
		{name: "fractional amount per device", templates: []string{"halves"}, want: "1500m"},
		{name: "two claims add up", templates: []string{"four", "halves"}, want: "5500m"},
		{name: "an unmapped first alternative does not hide a GPU one", templates: []string{"unmapped-first"}, want: "8"},
		{name: "alternatives cost the most of them", templates: []string{"cheaper-later"}, want: "2"},
		{name: "all devices cannot be counted", templates: []string{"all"}, invalid: true},
		{name: "missing template", templates: []string{"nope"}, invalid: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &corev1.PodSpec{}
			for i, name := range tt.templates {
				spec.ResourceClaims = append(spec.ResourceClaims, corev1.PodResourceClaim{Name: string(rune('a' + i)), ResourceClaimTemplateName: ptr.To(name)})
			}
			got, err := m.ClaimRequests(context.Background(), c, "ns", spec, nil)
			if tt.invalid {
				if !isInvalid(err) {
					t.Fatalf("want an invalid-job error, got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			q := got["nvidia.com/gpu"]
			if q.Cmp(resource.MustParse(tt.want)) != 0 {
				t.Errorf("nvidia.com/gpu = %s, want %s", q.String(), tt.want)
			}
		})
	}
}

// TestLargestRequests: a pod set whose pods differ is charged per pod for
// its largest pod, each pod's claims added to its own containers'
// requests, never less than what its containers alone were charged.
func TestLargestRequests(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := resourcev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	tmpl := func(name string, n int64) *resourcev1.ResourceClaimTemplate {
		return &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
				Name: "r", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: n}}}}}}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tmpl("four", 4), tmpl("eight", 8)).Build()
	m := DeviceClassMapping{"gpu.nvidia.com": {Resource: "nvidia.com/gpu", PerDevice: resource.MustParse("1")}}
	// pod requests gpus GPUs of its containers and claims the templates.
	pod := func(gpus string, templates ...string) *corev1.PodSpec {
		s := &corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(gpus)}}}}}
		for _, name := range templates {
			s.ResourceClaims = append(s.ResourceClaims, corev1.PodResourceClaim{Name: name, ResourceClaimTemplateName: ptr.To(name)})
		}
		return s
	}
	tests := []struct {
		name    string
		mapping DeviceClassMapping
		specs   []*corev1.PodSpec
		floor   string // the largest container request, as the adapter charged it
		want    string
		invalid bool
	}{
		{name: "the second pod claims", mapping: m, specs: []*corev1.PodSpec{pod("0"), pod("0", "eight")}, floor: "0", want: "8"},
		{name: "claims add to their own pod's containers", mapping: m, specs: []*corev1.PodSpec{pod("3"), pod("1", "four")}, floor: "3", want: "5"},
		{name: "containers alone are the most", mapping: m, specs: []*corev1.PodSpec{pod("6"), pod("1", "four")}, floor: "6", want: "6"},
		{name: "pods that name the same claims", mapping: m, specs: []*corev1.PodSpec{pod("1", "four", "eight"), pod("2", "four", "eight")}, floor: "2", want: "14"},
		{name: "no mapping", specs: []*corev1.PodSpec{pod("1", "eight")}, floor: "1", want: "1"},
		{name: "a missing template", mapping: m, specs: []*corev1.PodSpec{pod("1"), pod("1", "nope")}, floor: "1", invalid: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.mapping.largestRequests(context.Background(), c, "ns", tt.specs, corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(tt.floor)})
			if tt.invalid {
				if !isInvalid(err) {
					t.Fatalf("want an invalid-job error, got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if q := got["nvidia.com/gpu"]; q.Cmp(resource.MustParse(tt.want)) != 0 {
				t.Errorf("nvidia.com/gpu = %s, want %s", q.String(), tt.want)
			}
		})
	}
}
