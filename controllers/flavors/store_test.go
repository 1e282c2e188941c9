package flavors

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

func store(t *testing.T, gets *int, names ...string) Store {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := berthv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			*gets++
			if key.Name == "broken" {
				return errors.New("boom")
			}
			return c.Get(ctx, key, obj, opts...)
		}})
	for _, n := range names {
		b = b.WithObjects(&berthv1.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: n},
			Spec: berthv1.ResourceFlavorSpec{NodeLabels: map[string]string{"product": n}}})
	}
	return New(b.Build())
}

func TestStore(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name        string
		ask         []string
		wantMissing []string
		wantLabels  map[string]map[string]string
		wantErr     bool
	}{
		{"all exist", []string{"h200", "a100"}, nil, map[string]map[string]string{"h200": {"product": "h200"}, "a100": {"product": "a100"}}, false},
		{"missing, sorted, once", []string{"x", "h200", "b", "x", "h200"}, []string{"b", "x"}, map[string]map[string]string{"h200": {"product": "h200"}}, false},
		{"a failed read is an error", []string{"broken"}, nil, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var gets int
			got, labels, err := store(t, &gets, "h200", "a100").Lookup(ctx, tc.ask)
			if (err != nil) != tc.wantErr || !slices.Equal(got, tc.wantMissing) || !reflect.DeepEqual(labels, tc.wantLabels) {
				t.Errorf("Lookup(%v) = %v, %v, %v; want %v, %v (error %v)", tc.ask, got, labels, err, tc.wantMissing, tc.wantLabels, tc.wantErr)
			}
		})
	}
}

func TestMemoReadsEachFlavorOnce(t *testing.T) {
	ctx := context.Background()
	var gets int
	m := store(t, &gets, "h200").Memo()
	for _, name := range []string{"h200", "h200", "gone", "gone"} {
		rf, ok, err := m.Get(ctx, name)
		if err != nil || ok != (name == "h200") || (ok && rf.Name != name) {
			t.Errorf("Get(%s) = %v, %v, %v", name, rf, ok, err)
		}
	}
	if gets != 2 {
		t.Errorf("%d reads, want 2", gets)
	}
	all, err := store(t, &gets, "b", "a").List(ctx)
	if err != nil || len(all) != 2 {
		t.Errorf("List = %v, %v", all, err)
	}
}
