package jobs

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// createdTTL is how long a Workload this reconciler created is taken to
// exist while its cache does not show it. Past it the gang is reconciled
// as the cache says: a Workload deleted before the cache ever saw it is
// created again, and one the cache is merely that late costs one create
// answered AlreadyExists, as it did before there was this record.
const createdTTL = 30 * time.Second

// createdPrune is how many records are kept before expired ones are
// dropped: a gang whose Workload the cache never shows (deleted at once)
// leaves its record behind until then.
const createdPrune = 1024

// createdWorkloads records the Workloads this reconciler created that its
// cache has not shown yet. In a burst a gang's next event (its next pod,
// a status change) is reconciled before the Workload's own event reaches
// the cache; read there, the Workload is not found, and creating it again
// costs the API server a whole create (decoding, admission, validation of
// a large custom resource) only to answer AlreadyExists: 0.4-6 % of the
// burst's Workload creates did (docs/performance.md, "Workers against API
// latency"). The Workload's own event reconciles the gang when the cache
// has it, so nothing waits on this record.
type createdWorkloads struct {
	mu sync.Mutex
	m  map[types.NamespacedName]time.Time
}

// add records that key was created at now.
func (c *createdWorkloads) add(key types.NamespacedName, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[types.NamespacedName]time.Time{}
	}
	if len(c.m) >= createdPrune {
		for k, at := range c.m {
			if now.Sub(at) >= createdTTL {
				delete(c.m, k)
			}
		}
	}
	c.m[key] = now
}

// unseen reports whether key was created less than createdTTL before now
// and the cache has not shown it since. An expired record is dropped.
func (c *createdWorkloads) unseen(key types.NamespacedName, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.m[key]
	if !ok {
		return false
	}
	if now.Sub(at) >= createdTTL {
		delete(c.m, key)
		return false
	}
	return true
}

// seen drops the record of key: the cache shows the Workload, or its gang
// is gone.
func (c *createdWorkloads) seen(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}

// len is how many records are kept (for tests).
func (c *createdWorkloads) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
