package sim

import (
	"container/heap"
	"time"
)

// event is something that happens at a point of simulated time.
type event struct {
	at  time.Duration
	seq uint64
	do  func(now time.Duration)
}

// eventQueue orders events by time, then by the order they were scheduled
// in, so that a run is deterministic.
type eventQueue struct {
	items []event
	seq   uint64
}

func (q *eventQueue) Len() int { return len(q.items) }
func (q *eventQueue) Less(i, j int) bool {
	a, b := q.items[i], q.items[j]
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}
func (q *eventQueue) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *eventQueue) Push(x any)    { q.items = append(q.items, x.(event)) }
func (q *eventQueue) Pop() any {
	last := q.items[len(q.items)-1]
	q.items[len(q.items)-1] = event{}
	q.items = q.items[:len(q.items)-1]
	return last
}

// at schedules do at t.
func (q *eventQueue) at(t time.Duration, do func(now time.Duration)) {
	q.seq++
	heap.Push(q, event{at: t, seq: q.seq, do: do})
}

// next is the time of the earliest event; ok is false when there is none.
func (q *eventQueue) next() (time.Duration, bool) {
	if len(q.items) == 0 {
		return 0, false
	}
	return q.items[0].at, true
}

// pop removes and returns the earliest event.
func (q *eventQueue) pop() event { return heap.Pop(q).(event) }
