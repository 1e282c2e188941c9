package setup

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// TestCacheOptions: the cache keeps only queued pods, and no object it
// holds keeps its managedFields.
func TestCacheOptions(t *testing.T) {
	opts, err := CacheOptions()
	if err != nil {
		t.Fatal(err)
	}
	var podSelector labels.Selector
	for obj, by := range opts.ByObject {
		if _, ok := obj.(*corev1.Pod); ok {
			podSelector = by.Label
		}
	}
	if podSelector == nil {
		t.Fatal("no label selector for Pods")
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		cached bool
	}{
		{"queued pod", map[string]string{berthv1.QueueNameLabel: "team"}, true},
		{"any other pod", map[string]string{"app": "web"}, false},
		{"unlabelled pod", nil, false},
	} {
		if got := podSelector.Matches(labels.Set(tc.labels)); got != tc.cached {
			t.Errorf("%s: cached = %v, want %v", tc.name, got, tc.cached)
		}
	}

	if opts.DefaultTransform == nil {
		t.Fatal("no default transform")
	}
	managed := []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate}}
	for _, obj := range []metav1.Object{
		&berthv1.Workload{ObjectMeta: metav1.ObjectMeta{Name: "wl", ManagedFields: managed}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod", ManagedFields: managed}},
	} {
		out, err := opts.DefaultTransform(obj)
		if err != nil {
			t.Fatalf("%s: %v", obj.GetName(), err)
		}
		got, ok := out.(metav1.Object)
		if !ok {
			t.Fatalf("%s: transform returned %T", obj.GetName(), out)
		}
		if got.GetManagedFields() != nil {
			t.Errorf("%s: managedFields kept: %v", obj.GetName(), got.GetManagedFields())
		}
		if got.GetName() != obj.GetName() {
			t.Errorf("transform changed the name %q to %q", obj.GetName(), got.GetName())
		}
	}
}
