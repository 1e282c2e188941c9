package jobs

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// assumedWrites keeps, per gang (its Workload's key), what an Assumer's
// writes returned until the cache shows them (see Assumer).
type assumedWrites struct {
	mu sync.Mutex
	m  map[types.NamespacedName]map[types.UID]string
}

// give hands job the writes kept for its gang.
func (a *assumedWrites) give(key types.NamespacedName, job GenericJob) {
	as, ok := job.(Assumer)
	if !ok {
		return
	}
	a.mu.Lock()
	written := a.m[key]
	a.mu.Unlock()
	as.Assume(written)
}

// keep records what job's writes returned, and forgets the gang once the
// cache shows all of them.
func (a *assumedWrites) keep(key types.NamespacedName, job GenericJob) {
	as, ok := job.(Assumer)
	if !ok {
		return
	}
	written := as.Written()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(written) == 0 {
		delete(a.m, key)
		return
	}
	if a.m == nil {
		a.m = map[types.NamespacedName]map[types.UID]string{}
	}
	a.m[key] = written
}

// forget drops what is kept for a gang that is gone.
func (a *assumedWrites) forget(key types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.m, key)
}
