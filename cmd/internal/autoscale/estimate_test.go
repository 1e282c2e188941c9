package autoscale

import (
	"slices"
	"testing"
)

// bin is a node with room for a number of units.
type bin struct{ room int }

func take(b *bin, pod int) bool {
	if pod > b.room {
		return false
	}
	b.room -= pod
	return true
}

func bins(rooms ...int) []*bin {
	out := make([]*bin, len(rooms))
	for i, r := range rooms {
		out[i] = &bin{r}
	}
	return out
}

func TestFirstFit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pods  []int
		rooms []int
		want  []int
	}{
		{"fills the first node first", []int{2, 2, 2}, []int{4, 4}, []int{0, 0, 1}},
		{"a smaller pod goes back to an earlier node", []int{3, 3, 1}, []int{4, 4}, []int{0, 1, 0}},
		{"a pod no node takes", []int{5, 1}, []int{4}, []int{-1, 0}},
		{"no nodes", []int{1}, nil, []int{-1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FirstFit(tc.pods, bins(tc.rooms...), take); !slices.Equal(got, tc.want) {
				t.Errorf("FirstFit = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestEstimate(t *testing.T) {
	for _, tc := range []struct {
		name         string
		pods         []int
		size, room   int
		allOrNothing bool
		wantNodes    int
		wantAt       []int
		wantOK       bool
	}{
		{"packs new nodes first fit", []int{2, 2, 2}, 4, 5, true, 2, []int{0, 0, 1}, true},
		{"all or nothing fails when the group runs out of room", []int{4, 4, 4}, 4, 2, true, 0, nil, false},
		{"all or nothing fails on a pod no fresh node takes", []int{2, 5}, 4, 5, true, 0, nil, false},
		{"otherwise the pods that fit", []int{4, 5, 4, 4}, 4, 2, false, 2, []int{0, -1, 1, -1}, true},
		{"no pods", nil, 4, 1, true, 0, []int{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			open := func(i int) (*bin, bool) { return &bin{tc.size}, i < tc.room }
			nodes, at, ok := Estimate(tc.pods, open, take, tc.allOrNothing)
			if len(nodes) != tc.wantNodes || !slices.Equal(at, tc.wantAt) || ok != tc.wantOK {
				t.Errorf("Estimate = %d nodes, %v, %v; want %d, %v, %v", len(nodes), at, ok, tc.wantNodes, tc.wantAt, tc.wantOK)
			}
		})
	}
}

// counting counts the calls of take.
func counting(calls *int) func(*bin, *int) bool {
	return func(b *bin, pod *int) bool {
		*calls++
		return take(b, *pod)
	}
}

func TestEqualPodsScanOnce(t *testing.T) {
	two := 2
	gang := []*int{&two, &two, &two, &two, &two, &two}
	for _, tc := range []struct {
		name      string
		rooms     []int
		wantAt    []int
		wantCalls int
	}{
		// Nodes 0 and 1 refuse the first pod and are not asked again.
		{"after the node the previous pod took", []int{1, 1, 4, 4, 2}, []int{2, 2, 3, 3, 4, -1}, 10},
		{"a pod no node took is not tried again", []int{1}, []int{-1, -1, -1, -1, -1, -1}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			at := FirstFit(gang, bins(tc.rooms...), counting(&calls))
			if !slices.Equal(at, tc.wantAt) || calls != tc.wantCalls {
				t.Errorf("FirstFit = %v in %d calls, want %v in %d", at, calls, tc.wantAt, tc.wantCalls)
			}
		})
	}
	calls := 0
	open := func(i int) (*bin, bool) { return &bin{4}, i < 2 }
	nodes, at, ok := Estimate(gang, open, counting(&calls), false)
	if len(nodes) != 2 || !slices.Equal(at, []int{0, 0, 1, 1, -1, -1}) || !ok || calls != 6 {
		t.Errorf("Estimate = %d nodes, %v, %v in %d calls; want 2, [0 0 1 1 -1 -1], true in 6", len(nodes), at, ok, calls)
	}
}
