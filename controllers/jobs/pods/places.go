package pods

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// placeTTL is how long a pod let into a gang's place counts while the
// pods the count reads do not show it: longer than berth's cache takes to
// show a release, short enough that a pod the API server refused after the
// webhook let it in (another admission plugin, a conflict) does not hold
// its place for long.
const placeTTL = 30 * time.Second

// Places serialises the count of a gang's pod set across the requests the
// pod webhook answers at once. The count reads the pods the API server
// (or berth's cache) holds; a pod the webhook has just let in is not among
// them until its create or update is stored. Counted alone, each of many
// concurrent creates (or gate removals) into one free place would see the
// place free, and all would run. So each pod set's requests are answered
// one at a time, and the pods let in count as running, by UID, until the
// pods read show them or placeTTL has passed. The UID is known: validating
// admission runs after the API server named the new pod.
//
// It holds for the requests one berth process answers; with several
// replicas serving the webhook, as many pods as replicas may take one
// place in the same instant.
type Places struct {
	mu   sync.Mutex
	sets map[placeKey]*placeSet
	// now is the clock; nil is time.Now.
	now func() time.Time
}

// placeKey names a pod set of an admitted Workload.
type placeKey struct{ namespace, workload, podSet string }

// placeSet is one pod set's lock and the pods let in that the count may
// not show yet.
type placeSet struct {
	mu    sync.Mutex
	users int
	let   map[types.UID]time.Time
}

// hold locks k's pod set for one count and returns it; release unlocks it.
func (p *Places) hold(k placeKey) *placeSet {
	p.mu.Lock()
	if p.sets == nil {
		p.sets = map[placeKey]*placeSet{}
	}
	s := p.sets[k]
	if s == nil {
		s = &placeSet{let: map[types.UID]time.Time{}}
		p.sets[k] = s
	}
	s.users++
	p.mu.Unlock()
	s.mu.Lock()
	return s
}

// release unlocks s, forgetting it once nobody waits on it and it holds no
// pod let in.
func (p *Places) release(k placeKey, s *placeSet) {
	empty := len(s.let) == 0
	s.mu.Unlock()
	p.mu.Lock()
	s.users--
	if s.users == 0 && empty {
		delete(p.sets, k)
	}
	p.mu.Unlock()
}

// pending counts the pods let in that seen does not show, other than self,
// and forgets those it shows and those older than placeTTL. The caller
// holds s.
func (p *Places) pending(s *placeSet, seen map[types.UID]bool, self types.UID) int32 {
	now := p.clock()
	var n int32
	for uid, at := range s.let {
		switch {
		case seen[uid] || now.Sub(at) > placeTTL:
			delete(s.let, uid)
		case uid != self:
			n++
		}
	}
	return n
}

// let records that pod uid was let into s's pod set. The caller holds s.
func (p *Places) let(s *placeSet, uid types.UID) { s.let[uid] = p.clock() }

func (p *Places) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}
