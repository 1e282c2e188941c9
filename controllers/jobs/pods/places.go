package pods

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// releaseTTL is how long a pod released into a gang's place counts while
// berth's cache still shows it gated: longer than the cache takes to show
// a release. createTTL is how long a pod let in at its creation counts
// while the API server does not list it: the create is stored right after
// admission, so a pod still missing after that was refused by a later
// step (another admission plugin, a conflict) or deleted already, and must
// not hold its place.
const (
	releaseTTL = 30 * time.Second
	createTTL  = 2 * time.Second
)

// Places serialises the count of a gang's pod set across the requests the
// pod webhook answers at once. The count reads the pods the API server
// (or berth's cache) holds; a pod the webhook has just let in is not among
// them until its create or update is stored. Counted alone, each of many
// concurrent creates (or gate removals) into one free place would see the
// place free, and all would run. So each pod set's requests are answered
// one at a time, and the pods let in count as running, by UID, until the
// pods read show them (stored, for a create; released, for a release) or
// gone, or createTTL or releaseTTL has passed. The UID is known: validating
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
	let   map[types.UID]letIn
}

// letIn is a pod let into a place: when, and whether by a release (an
// update of a pod that exists) rather than a create.
type letIn struct {
	at      time.Time
	release bool
}

// hold locks k's pod set for one count and returns it; release unlocks it.
func (p *Places) hold(k placeKey) *placeSet {
	p.mu.Lock()
	if p.sets == nil {
		p.sets = map[placeKey]*placeSet{}
	}
	s := p.sets[k]
	if s == nil {
		s = &placeSet{let: map[types.UID]letIn{}}
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

// pending counts the pods let in that the count did not count, other than
// self, and forgets those it no longer needs: counted among the running
// pods; a create the pods read list (stored: counted if it runs); a release
// of a pod they no longer list (gone); and any older than its TTL. listed
// are all the pods read, counted those counted as running. The caller
// holds s.
func (p *Places) pending(s *placeSet, counted, listed map[types.UID]bool, self types.UID) int32 {
	now := p.clock()
	var n int32
	for uid, l := range s.let {
		ttl := createTTL
		if l.release {
			ttl = releaseTTL
		}
		switch {
		case counted[uid] || now.Sub(l.at) > ttl, !l.release && listed[uid], l.release && !listed[uid]:
			delete(s.let, uid)
		case uid != self:
			n++
		}
	}
	return n
}

// let records that pod uid was let into s's pod set, by a release or a
// create. The caller holds s.
func (p *Places) let(s *placeSet, uid types.UID, release bool) {
	s.let[uid] = letIn{at: p.clock(), release: release}
}

func (p *Places) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}
