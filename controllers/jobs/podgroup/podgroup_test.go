package podgroup

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

func pod(name, group, count string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{berthv1.QueueNameLabel: "q"}}}
	if group != "" {
		p.Labels[berthv1.PodGroupLabel] = group
		p.Annotations = map[string]string{berthv1.PodGroupTotalCountAnnotation: count}
	}
	return p
}

func TestGroupPodSets(t *testing.T) {
	tests := []struct {
		name    string
		pods    []corev1.Pod
		want    int32
		wantErr string
	}{
		{name: "a lone pod is a group of one", pods: []corev1.Pod{pod("a", "", "")}, want: 1},
		{name: "complete group", pods: []corev1.Pod{pod("a", "g", "2"), pod("b", "g", "2")}, want: 2},
		{name: "incomplete group", pods: []corev1.Pod{pod("a", "g", "3")}, wantErr: "has 1 of its 3 pods"},
		{name: "members disagree", pods: []corev1.Pod{pod("a", "g", "2"), pod("b", "g", "3")}, wantErr: "disagree"},
		{name: "count missing", pods: []corev1.Pod{pod("a", "g", "")}, wantErr: "at least 1"},
		{name: "count zero", pods: []corev1.Pod{pod("a", "g", "0")}, wantErr: "at least 1"},
		{name: "more pods than the count: the count are members", pods: []corev1.Pod{pod("a", "g", "1"), pod("b", "g", "1")}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := newGroup(tt.pods).PodSets()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].Count != tt.want {
				t.Fatalf("got %+v, want one pod set of %d", got, tt.want)
			}
		})
	}
}

// TestMembers checks which pods of a group with more pods than its count
// are its members: released pods that did not fail keep their place, then
// gated pods oldest first; the rest are excluded (and never released),
// except failed members, which are simply replaced.
func TestMembers(t *testing.T) {
	at := func(name string, sec int64, released bool, phase corev1.PodPhase) corev1.Pod {
		p := pod(name, "g", "2")
		p.CreationTimestamp = metav1.Unix(sec, 0)
		if !released {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: berthv1.AdmissionGate}}
		}
		p.Status.Phase = phase
		return p
	}
	tests := []struct {
		name         string
		pods         []corev1.Pod
		wantMembers  []string
		wantExcluded []string
	}{
		{name: "extras added to a running group stay out",
			pods:        []corev1.Pod{at("a", 1, true, corev1.PodRunning), at("b", 2, true, corev1.PodRunning), at("x", 3, false, ""), at("y", 0, false, "")},
			wantMembers: []string{"a", "b"}, wantExcluded: []string{"y", "x"}},
		{name: "the replacement of a failed member joins before a later extra",
			pods:        []corev1.Pod{at("a", 1, true, corev1.PodRunning), at("b", 2, true, corev1.PodFailed), at("r", 3, false, ""), at("x", 4, false, "")},
			wantMembers: []string{"a", "r"}, wantExcluded: []string{"x"}},
		{name: "a succeeded member keeps its place",
			pods:        []corev1.Pod{at("z", 1, true, corev1.PodSucceeded), at("a", 2, false, ""), at("b", 3, false, "")},
			wantMembers: []string{"a", "z"}, wantExcluded: []string{"b"}},
		{name: "before admission the oldest pods are members",
			pods:        []corev1.Pod{at("c", 3, false, ""), at("a", 1, false, ""), at("b", 2, false, "")},
			wantMembers: []string{"a", "b"}, wantExcluded: []string{"c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGroup(tt.pods)
			var members, excluded []string
			for _, p := range g.Pods {
				members = append(members, p.Name)
			}
			for _, e := range g.Excluded {
				excluded = append(excluded, e.Name)
				if !strings.Contains(e.Why, "delete the extra pods") {
					t.Errorf("reason for %s does not say what to do: %q", e.Name, e.Why)
				}
			}
			if !slices.Equal(members, tt.wantMembers) || !slices.Equal(excluded, tt.wantExcluded) {
				t.Errorf("members %v, excluded %v; want %v, %v", members, excluded, tt.wantMembers, tt.wantExcluded)
			}
			if _, err := g.PodSets(); err != nil {
				t.Errorf("a group with extras is still a group of its count: %v", err)
			}
		})
	}
}

func TestKey(t *testing.T) {
	owned := pod("c", "g", "1")
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "s", Controller: ptr.To(true)}}
	unlabelled := pod("d", "", "")
	delete(unlabelled.Labels, berthv1.QueueNameLabel)
	tests := []struct {
		name   string
		pod    corev1.Pod
		want   string
		wantOK bool
	}{
		{name: "grouped", pod: pod("a", "g", "2"), want: "g", wantOK: true},
		{name: "lone", pod: pod("b", "", ""), want: "b", wantOK: true},
		{name: "controlled by another object", pod: owned},
		{name: "not submitted to a queue", pod: unlabelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Kind{}.Key(&tt.pod)
			if ok != tt.wantOK || got != tt.want {
				t.Errorf("Key = %q, %v; want %q, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestSchedulingGroup(t *testing.T) {
	owned := pod("c", "ranks", "2")
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "s", Controller: ptr.To(true)}}
	tests := []struct {
		name string
		pod  corev1.Pod
		want string
	}{
		{"a pod of a group of two joins the group's PodGroup", pod("a", "ranks", "2"), "podgroup-ranks"},
		{"a group of one has nothing to gang", pod("a", "ranks", "1"), ""},
		{"a group without a valid count joins none (berth refuses it)", pod("a", "ranks", "two"), ""},
		{"a lone pod joins none", pod("b", "", ""), ""},
		{"a pod of another controller is not a pod group's", owned, ""},
	}
	for _, tt := range tests {
		if got := SchedulingGroup(context.Background(), &tt.pod); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestFinished(t *testing.T) {
	phases := func(ps ...corev1.PodPhase) []corev1.Pod {
		var out []corev1.Pod
		for i, ph := range ps {
			p := pod(string(rune('a'+i)), "g", "2")
			p.Status.Phase = ph
			out = append(out, p)
		}
		return out
	}
	tests := []struct {
		name                string
		pods                []corev1.Pod
		finished, succeeded bool
	}{
		{name: "running", pods: phases(corev1.PodRunning, corev1.PodSucceeded)},
		{name: "all succeeded", pods: phases(corev1.PodSucceeded, corev1.PodSucceeded), finished: true, succeeded: true},
		{name: "one failed", pods: phases(corev1.PodFailed, corev1.PodSucceeded), finished: true},
		{name: "incomplete group never finishes", pods: phases(corev1.PodSucceeded)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, s, _ := newGroup(tt.pods).Finished()
			if f != tt.finished || s != tt.succeeded {
				t.Errorf("Finished = %v, %v; want %v, %v", f, s, tt.finished, tt.succeeded)
			}
		})
	}
}

// TestResolveFromTheKeyIndex resolves gangs through the gang-key index the
// reconciler registers: a group's pods, a lone pod by its name, nothing for
// pods berth does not manage.
func TestResolveFromTheKeyIndex(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	inNS := func(p corev1.Pod) *corev1.Pod { p.Namespace = "ns"; return &p }
	unlabelled := inNS(pod("u", "g", "2"))
	delete(unlabelled.Labels, berthv1.QueueNameLabel)
	owned := inNS(pod("j", "g", "2"))
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", Controller: ptr.To(true)}}
	other := inNS(pod("b", "g", "2"))
	other.Namespace = "elsewhere"
	indexer := &fieldIndexes{}
	if err := jobs.IndexKeys(context.Background(), indexer, Kind{}, Kind{}); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).
		WithIndex(&corev1.Pod{}, jobs.KeyIndexKey(Kind{}.GVK()), indexer.fn).
		WithObjects(inNS(pod("b", "g", "2")), inNS(pod("a", "g", "2")), inNS(pod("solo", "", "")), unlabelled, owned, other).Build()
	tests := []struct {
		key  string
		want []string
	}{
		{key: "g", want: []string{"a", "b"}},
		{key: "solo", want: []string{"solo"}},
		{key: "u", want: nil},
		{key: "j", want: nil},
		{key: "missing", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			g, err := Kind{}.Resolve(context.Background(), c, "ns", tt.key)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			if g != nil {
				for _, p := range g.(*Group).Pods {
					got = append(got, p.Name)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Resolve(%q) = %v, want %v", tt.key, got, tt.want)
			}
		})
	}
}

// fieldIndexes captures the index function IndexKeys registers.
type fieldIndexes struct{ fn client.IndexerFunc }

func (f *fieldIndexes) IndexField(_ context.Context, _ client.Object, _ string, fn client.IndexerFunc) error {
	f.fn = fn
	return nil
}
