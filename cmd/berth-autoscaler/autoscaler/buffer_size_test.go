package autoscaler

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	cbv1beta1 "github.com/berth-dev/berth/apis/capacitybuffer/v1beta1"
)

func i32(n int32) *int32 { return &n }

// TestBufferReplicas: cluster-autoscaler's newest sizing,
// min(max(replicas, ceil(percentage × scalable / 100)), limitsFit), with
// the cases of its replicas_test.go and the errors.
func TestBufferReplicas(t *testing.T) {
	oneCPU := rl("cpu", "1", "memory", "1Gi")
	for _, tc := range []struct {
		name       string
		spec       cbv1beta1.CapacityBufferSpec
		requests   corev1.ResourceList
		scalable   *int32
		want       int32
		wantErr    error
		wantAnyErr bool
	}{
		{name: "replicas only", spec: cbv1beta1.CapacityBufferSpec{Replicas: i32(3)}, requests: oneCPU, want: 3},
		{name: "zero replicas", spec: cbv1beta1.CapacityBufferSpec{Replicas: i32(0)}, requests: oneCPU, want: 0},
		{name: "percentage rounds up: 33% of 10 is 4", spec: cbv1beta1.CapacityBufferSpec{Percentage: i32(33)}, requests: oneCPU, scalable: i32(10), want: 4},
		{name: "50% of 3 is 2", spec: cbv1beta1.CapacityBufferSpec{Percentage: i32(50)}, requests: oneCPU, scalable: i32(3), want: 2},
		{name: "50% of 0 is 0, not raised to 1", spec: cbv1beta1.CapacityBufferSpec{Percentage: i32(50)}, requests: oneCPU, scalable: i32(0), want: 0},
		{name: "0% of 10 is 0", spec: cbv1beta1.CapacityBufferSpec{Percentage: i32(0)}, requests: oneCPU, scalable: i32(10), want: 0},
		{name: "the larger of replicas and percentage: replicas", spec: cbv1beta1.CapacityBufferSpec{Replicas: i32(25), Percentage: i32(200)}, requests: oneCPU, scalable: i32(10), want: 25},
		{name: "the larger of replicas and percentage: percentage", spec: cbv1beta1.CapacityBufferSpec{Replicas: i32(15), Percentage: i32(200)}, requests: oneCPU, scalable: i32(10), want: 20},
		{name: "limits cap replicas", spec: cbv1beta1.CapacityBufferSpec{Replicas: i32(25), Limits: rl("cpu", "20")}, requests: oneCPU, want: 20},
		{name: "limits below replicas leave replicas", spec: cbv1beta1.CapacityBufferSpec{Replicas: i32(5), Limits: rl("cpu", "20")}, requests: oneCPU, want: 5},
		{name: "limits only", spec: cbv1beta1.CapacityBufferSpec{Limits: rl("cpu", "20")}, requests: oneCPU, want: 20},
		{name: "limits floor and take the tightest resource", spec: cbv1beta1.CapacityBufferSpec{Limits: rl("cpu", "2", "memory", "2000Mi")}, requests: rl("cpu", "100m", "memory", "200Mi"), want: 10},
		{name: "limits cap percentage", spec: cbv1beta1.CapacityBufferSpec{Percentage: i32(100), Limits: rl("cpu", "3500m")}, requests: oneCPU, scalable: i32(10), want: 3},
		{name: "percentage without a scalable object does not count", spec: cbv1beta1.CapacityBufferSpec{Replicas: i32(2), Percentage: i32(500)}, requests: oneCPU, want: 2},
		{name: "percentage alone without a scalable object is an error", spec: cbv1beta1.CapacityBufferSpec{Percentage: i32(50)}, requests: oneCPU, wantErr: ErrNoSize},
		{name: "nothing set is an error", spec: cbv1beta1.CapacityBufferSpec{}, requests: oneCPU, scalable: i32(10), wantErr: ErrNoSize},
		{name: "limits on a resource the pod does not request is an error", spec: cbv1beta1.CapacityBufferSpec{Replicas: i32(3), Limits: rl("nvidia.com/gpu", "8")}, requests: oneCPU, wantErr: ErrLimitsNotRequested},
		{name: "a zero request does not count for limits", spec: cbv1beta1.CapacityBufferSpec{Limits: rl("cpu", "4")}, requests: rl("cpu", "0", "memory", "1Gi"), wantErr: ErrLimitsNotRequested},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := BufferReplicas(&tc.spec, tc.requests, tc.scalable)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got != tc.want {
				t.Errorf("replicas = %d, want %d", got, tc.want)
			}
		})
	}
}

func quota(name string, hard, used corev1.ResourceList, scopes ...corev1.ResourceQuotaScope) corev1.ResourceQuota {
	q := corev1.ResourceQuota{}
	q.Name = name
	q.Spec.Hard, q.Spec.Scopes = hard, scopes
	q.Status.Hard, q.Status.Used = hard, used
	return q
}

// TestCapByQuotas: buffers in order each take what the earlier left of
// every matching quota, keyed "cpu" or "requests.cpu", floored, never
// below 0.
func TestCapByQuotas(t *testing.T) {
	gpu8 := rl("nvidia.com/gpu", "8", "cpu", "8")
	spec := &corev1.PodSpec{}
	for _, tc := range []struct {
		name        string
		buffers     []QuotaBuffer
		quotas      []corev1.ResourceQuota
		want        []int32
		wantLimited []bool
		wantQuotas  [][]string
	}{
		{
			name:    "no quotas: nothing limited",
			buffers: []QuotaBuffer{{Replicas: 3, Requests: gpu8, Spec: spec}},
			want:    []int32{3}, wantLimited: []bool{false}, wantQuotas: [][]string{nil},
		},
		{
			name:    "requests.* key caps by floor((hard-used)/request)",
			buffers: []QuotaBuffer{{Replicas: 3, Requests: gpu8, Spec: spec}},
			quotas:  []corev1.ResourceQuota{quota("gpus", rl("requests.nvidia.com/gpu", "20"), rl("requests.nvidia.com/gpu", "4"))},
			want:    []int32{2}, wantLimited: []bool{true}, wantQuotas: [][]string{{"gpus"}},
		},
		{
			name:    "bare key, and the tightest of two quotas",
			buffers: []QuotaBuffer{{Replicas: 5, Requests: gpu8, Spec: spec}},
			quotas: []corev1.ResourceQuota{
				quota("cpu", rl("cpu", "17"), nil),
				quota("wide", rl("requests.cpu", "1000"), nil),
			},
			want: []int32{2}, wantLimited: []bool{true}, wantQuotas: [][]string{{"cpu"}},
		},
		{
			name:    "the earlier buffer takes first; the later gets the rest",
			buffers: []QuotaBuffer{{Replicas: 2, Requests: gpu8, Spec: spec}, {Replicas: 2, Requests: gpu8, Spec: spec}},
			quotas:  []corev1.ResourceQuota{quota("gpus", rl("requests.nvidia.com/gpu", "24"), nil)},
			want:    []int32{2, 1}, wantLimited: []bool{false, true}, wantQuotas: [][]string{nil, {"gpus"}},
		},
		{
			name:    "used above hard gives 0, not less",
			buffers: []QuotaBuffer{{Replicas: 2, Requests: gpu8, Spec: spec}},
			quotas:  []corev1.ResourceQuota{quota("gpus", rl("requests.nvidia.com/gpu", "8"), rl("requests.nvidia.com/gpu", "16"))},
			want:    []int32{0}, wantLimited: []bool{true}, wantQuotas: [][]string{{"gpus"}},
		},
		{
			name:    "limits.* and resources the pod does not request do not count",
			buffers: []QuotaBuffer{{Replicas: 2, Requests: gpu8, Spec: spec}},
			quotas:  []corev1.ResourceQuota{quota("other", rl("limits.cpu", "1", "requests.memory", "1", "pods", "1"), nil)},
			want:    []int32{2}, wantLimited: []bool{false}, wantQuotas: [][]string{nil},
		},
		{
			name:    "a Terminating-scoped quota does not select a buffer's pod",
			buffers: []QuotaBuffer{{Replicas: 2, Requests: gpu8, Spec: spec}},
			quotas:  []corev1.ResourceQuota{quota("batch", rl("requests.nvidia.com/gpu", "0"), nil, corev1.ResourceQuotaScopeTerminating)},
			want:    []int32{2}, wantLimited: []bool{false}, wantQuotas: [][]string{nil},
		},
		{
			name:    "a NotTerminating-scoped quota does",
			buffers: []QuotaBuffer{{Replicas: 2, Requests: gpu8, Spec: spec}},
			quotas:  []corev1.ResourceQuota{quota("long", rl("requests.nvidia.com/gpu", "8"), nil, corev1.ResourceQuotaScopeNotTerminating)},
			want:    []int32{1}, wantLimited: []bool{true}, wantQuotas: [][]string{{"long"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CapByQuotas(tc.buffers, tc.quotas)
			for i, r := range got {
				if r.Replicas != tc.want[i] || r.Limited != tc.wantLimited[i] || !slices.Equal(r.Quotas, tc.wantQuotas[i]) {
					t.Errorf("buffer %d: %+v, want replicas %d limited %v quotas %v", i, r, tc.want[i], tc.wantLimited[i], tc.wantQuotas[i])
				}
			}
		})
	}
}

// TestQuotaMessage: cluster-autoscaler's wording, from and to, and the
// quotas.
func TestQuotaMessage(t *testing.T) {
	r := QuotaResult{Replicas: 1, Limited: true, Quotas: []string{"a", "b"}}
	if got, want := r.Message(3), "Buffer replicas limited from 3 to 1 due to quotas: a, b"; got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
	if got := (QuotaResult{Replicas: 3}).Message(3); got != "" {
		t.Errorf("unlimited message = %q, want empty", got)
	}
}

// TestPriorityClassScope: a PriorityClass scope selects by the pod's
// priorityClassName.
func TestPriorityClassScope(t *testing.T) {
	sel := func(op corev1.ScopeSelectorOperator, values ...string) corev1.ResourceQuota {
		q := quota("pc", rl("requests.cpu", "1"), nil)
		q.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{
			ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: op, Values: values,
		}}}
		return q
	}
	high := &corev1.PodSpec{PriorityClassName: "high"}
	for _, tc := range []struct {
		name string
		q    corev1.ResourceQuota
		spec *corev1.PodSpec
		want bool
	}{
		{"In matches", sel(corev1.ScopeSelectorOpIn, "high"), high, true},
		{"In misses", sel(corev1.ScopeSelectorOpIn, "low"), high, false},
		{"NotIn", sel(corev1.ScopeSelectorOpNotIn, "low"), high, true},
		{"Exists without a class", sel(corev1.ScopeSelectorOpExists), &corev1.PodSpec{}, false},
		{"DoesNotExist without a class", sel(corev1.ScopeSelectorOpDoesNotExist), &corev1.PodSpec{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := quotaApplies(&tc.q, tc.spec); got != tc.want {
				t.Errorf("applies = %v, want %v", got, tc.want)
			}
		})
	}
}
