package scheduler

import "github.com/berth-dev/berth/admission"

// localQueueKey names a LocalQueue.
type localQueueKey struct{ namespace, name string }

// workloadPlace is where a queued workload is, for counting.
type workloadPlace struct {
	queue    localQueueKey
	admitted bool
}

// queueCounts counts the pending and admitted workloads of each LocalQueue,
// updated on every change of one workload, so a LocalQueue's status costs
// O(1) however many workloads it holds. Callers hold the Scheduler's mutex.
type queueCounts struct {
	places map[admission.WorkloadKey]workloadPlace
	counts map[localQueueKey]*LocalQueueCounts
}

// LocalQueueCounts are the workloads of one LocalQueue.
type LocalQueueCounts struct {
	// Pending workloads waiting for admission.
	Pending int32
	// Admitted workloads holding quota.
	Admitted int32
}

func newQueueCounts() queueCounts {
	return queueCounts{places: map[admission.WorkloadKey]workloadPlace{}, counts: map[localQueueKey]*LocalQueueCounts{}}
}

func (q *queueCounts) set(key admission.WorkloadKey, queue string, admitted bool) {
	q.remove(key)
	p := workloadPlace{queue: localQueueKey{key.Namespace, queue}, admitted: admitted}
	q.places[key] = p
	c := q.counts[p.queue]
	if c == nil {
		c = &LocalQueueCounts{}
		q.counts[p.queue] = c
	}
	if admitted {
		c.Admitted++
	} else {
		c.Pending++
	}
}

func (q *queueCounts) admit(key admission.WorkloadKey) {
	if p, ok := q.places[key]; ok && !p.admitted {
		q.set(key, p.queue.name, true)
	}
}

func (q *queueCounts) remove(key admission.WorkloadKey) {
	p, ok := q.places[key]
	if !ok {
		return
	}
	delete(q.places, key)
	c := q.counts[p.queue]
	if p.admitted {
		c.Admitted--
	} else {
		c.Pending--
	}
	if c.Admitted == 0 && c.Pending == 0 {
		delete(q.counts, p.queue)
	}
}

// LocalQueueCounts reports the pending and admitted workloads of a
// LocalQueue as the scheduler sees them.
func (s *Scheduler) LocalQueueCounts(namespace, name string) LocalQueueCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.queues.counts[localQueueKey{namespace, name}]; c != nil {
		return *c
	}
	return LocalQueueCounts{}
}
