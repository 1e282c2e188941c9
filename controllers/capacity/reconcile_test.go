package capacity

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
)

// sink records what the reconcilers gave the engine; err fails upserts.
type sink struct {
	err     error
	flavors []admission.Flavor
	nodes   []admission.Node
	pools   []admission.Pool
	deleted []string
}

func (s *sink) UpsertFlavor(f admission.Flavor) error { s.flavors = append(s.flavors, f); return s.err }
func (s *sink) DeleteFlavor(name string)              { s.deleted = append(s.deleted, "flavor/"+name) }
func (s *sink) UpsertNode(n admission.Node) error     { s.nodes = append(s.nodes, n); return s.err }
func (s *sink) DeleteNode(name string)                { s.deleted = append(s.deleted, "node/"+name) }
func (s *sink) UpsertPool(p admission.Pool) error     { s.pools = append(s.pools, p); return s.err }
func (s *sink) DeletePool(name string)                { s.deleted = append(s.deleted, "pool/"+name) }

// newTestReconciler builds the reconciler over a fake API whose pods are
// indexed by node, as the bound-pod cache is.
func newTestReconciler(t *testing.T, s *sink, fail []fakeapi.Failure, objs ...client.Object) (*Reconciler, client.Client) {
	t.Helper()
	b, err := fakeapi.Builder(objs...)
	if err != nil {
		t.Fatal(err)
	}
	base := b.WithIndex(&corev1.Pod{}, nodeNameIndex, func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	}).Build()
	c := fakeapi.Failing(base, fail...)
	return &Reconciler{client: c, pods: c, sink: s, placeholders: "berth-system"}, base
}

func gpuFlavor() *berthv1.ResourceFlavor {
	return &berthv1.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "h200"},
		Spec: berthv1.ResourceFlavorSpec{NodeLabels: map[string]string{"gpu": "h200"}, TopologyLevels: []string{"rack"}}}
}

// gpuNode is a Ready node of flavor h200 with 8 GPUs and 64 CPUs; opts
// change it.
func gpuNode(opts ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"gpu": "h200", "rack": "r1"}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("64")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

// boundPod is a pod on n1 asking for gpus GPUs.
func boundPod(name string, gpus string, phase corev1.PodPhase, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(gpus)}}}}},
		Status: corev1.PodStatus{Phase: phase},
	}
}

func pool(nodes int32) *berthv1.CapacityPool {
	return &berthv1.CapacityPool{ObjectMeta: metav1.ObjectMeta{Name: "pool-a"},
		Spec: berthv1.CapacityPoolSpec{Flavor: "h200", MaxNodes: 10, NodeTemplate: berthv1.NodeTemplate{
			Labels: map[string]string{"rack": "r1"}, Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}},
		Status: berthv1.CapacityPoolStatus{Nodes: nodes}}
}

func poolNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{berthv1.CapacityPoolLabel: "pool-a"}}}
}

func wantErr(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
		t.Fatalf("error = %v, want %q", err, want)
	}
}

func TestReconcileFlavor(t *testing.T) {
	sinkErr := errors.New("engine refused")
	cases := []struct {
		name        string
		objs        []client.Object
		sinkErr     error
		fail        []fakeapi.Failure
		wantErr     string
		wantDeleted []string
		wantLevels  []string
	}{
		{name: "a flavor that is gone leaves the engine", wantDeleted: []string{"flavor/h200"}},
		{name: "a read that fails names the flavor", objs: []client.Object{gpuFlavor()},
			fail: []fakeapi.Failure{{Verb: fakeapi.Get}}, wantErr: "reading ResourceFlavor h200"},
		{name: "a flavor's levels reach the engine", objs: []client.Object{gpuFlavor()}, wantLevels: []string{"rack"}},
		{name: "the engine's refusal is returned", objs: []client.Object{gpuFlavor()}, sinkErr: sinkErr,
			wantErr: "engine refused", wantLevels: []string{"rack"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &sink{err: tc.sinkErr}
			r, _ := newTestReconciler(t, s, tc.fail, tc.objs...)
			res, err := r.reconcileFlavor(t.Context(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "h200"}})
			wantErr(t, err, tc.wantErr)
			if res != (reconcile.Result{}) {
				t.Errorf("result = %+v", res)
			}
			if !slices.Equal(s.deleted, tc.wantDeleted) {
				t.Errorf("deleted %v, want %v", s.deleted, tc.wantDeleted)
			}
			if tc.wantLevels != nil && (len(s.flavors) != 1 || !slices.Equal(s.flavors[0].Levels, tc.wantLevels) ||
				s.flavors[0].Provisioning.Mode != admission.ProvisionNever) {
				t.Errorf("flavors upserted %+v, want h200 with levels %v and no provisioning", s.flavors, tc.wantLevels)
			}
		})
	}
}

func TestReconcilePool(t *testing.T) {
	cases := []struct {
		name          string
		objs          []client.Object
		sinkErr       error
		fail          []fakeapi.Failure
		wantErr       string
		wantDeleted   bool
		wantAvailable int32 // -1: no upsert
		wantNodes     int32
		wantWritten   bool
	}{
		{name: "a pool that is gone leaves the engine", wantDeleted: true, wantAvailable: -1},
		{name: "a read that fails names the pool", objs: []client.Object{pool(0)},
			fail: []fakeapi.Failure{{Verb: fakeapi.Get, Kind: "CapacityPool"}}, wantErr: "reading CapacityPool pool-a", wantAvailable: -1},
		{name: "nodes that joined are counted, subtracted and written", objs: []client.Object{pool(0), poolNode("a"), poolNode("b")},
			wantAvailable: 8, wantNodes: 2, wantWritten: true},
		{name: "a count that did not change is not written", objs: []client.Object{pool(2), poolNode("a"), poolNode("b")},
			wantAvailable: 8, wantNodes: 2},
		{name: "nodes of other pools are not counted",
			objs:          []client.Object{pool(1), poolNode("a"), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{berthv1.CapacityPoolLabel: "pool-b"}}}},
			wantAvailable: 9, wantNodes: 1},
		{name: "a node list that fails names the pool", objs: []client.Object{pool(0)},
			fail: []fakeapi.Failure{{Verb: fakeapi.List, Kind: "Node"}}, wantErr: "listing the nodes of CapacityPool pool-a", wantAvailable: -1},
		{name: "the engine's refusal is returned and nothing written", objs: []client.Object{pool(0), poolNode("a")},
			sinkErr: errors.New("engine refused"), wantErr: "engine refused", wantAvailable: 9},
		{name: "a status write that fails names the pool", objs: []client.Object{pool(0), poolNode("a")},
			fail:    []fakeapi.Failure{{Verb: fakeapi.SubResourcePatch}},
			wantErr: "writing the node count of CapacityPool pool-a", wantAvailable: 9},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &sink{err: tc.sinkErr}
			r, base := newTestReconciler(t, s, tc.fail, tc.objs...)
			_, err := r.reconcilePool(t.Context(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "pool-a"}})
			wantErr(t, err, tc.wantErr)
			if tc.wantDeleted != slices.Equal(s.deleted, []string{"pool/pool-a"}) {
				t.Errorf("deleted %v, want deleted=%v", s.deleted, tc.wantDeleted)
			}
			switch {
			case tc.wantAvailable < 0 && len(s.pools) > 0:
				t.Errorf("pools upserted %+v, want none", s.pools)
			case tc.wantAvailable >= 0 && (len(s.pools) != 1 || s.pools[0].Available != tc.wantAvailable):
				t.Errorf("pools upserted %+v, want one with %d available", s.pools, tc.wantAvailable)
			}
			if tc.wantErr != "" || tc.wantDeleted {
				return
			}
			p := &berthv1.CapacityPool{}
			if err := base.Get(t.Context(), client.ObjectKey{Name: "pool-a"}, p); err != nil {
				t.Fatal(err)
			}
			if p.Status.Nodes != tc.wantNodes || (p.ResourceVersion != "999") != tc.wantWritten {
				t.Errorf("status nodes %d (resourceVersion %s), want %d written=%v", p.Status.Nodes, p.ResourceVersion, tc.wantNodes, tc.wantWritten)
			}
		})
	}
}

// inNamespace moves p to namespace ns.
func inNamespace(ns string, p *corev1.Pod) *corev1.Pod {
	p.Namespace = ns
	return p
}
