package sim

import (
	"maps"
	"time"

	"github.com/berth-dev/berth/admission"
	"github.com/berth-dev/berth/controllers/capacity"
)

// The capacity feed: what berth's capacity controller tells the engine
// about nodes and pools. The engine is told every Ready node of a flavor,
// its free capacity not counting the pods of gangs it placed itself (it
// reserves theirs), and every pool's room. Quota-only queues know no
// nodes.

// nodeChanged implements clusterListener.
func (s *engineShell) nodeChanged(n *node, _ time.Duration) {
	if s.quotaOnly || !n.ready {
		return
	}
	if _, known := s.engineNodes[n]; !known {
		s.engineNodes[n] = maps.Clone(n.alloc)
		if err := s.updatePool(n.group.pool.Name); err != nil && s.err == nil {
			s.err = err
		}
	}
	s.tellNode(n)
}

// nodeRemoved implements clusterListener.
func (s *engineShell) nodeRemoved(n *node, _ time.Duration) {
	if s.quotaOnly {
		return
	}
	if _, known := s.engineNodes[n]; known {
		delete(s.engineNodes, n)
		s.eng.DeleteNode(n.name)
	}
	if err := s.updatePool(n.group.pool.Name); err != nil && s.err == nil {
		s.err = err
	}
}

// podBound implements clusterListener.
func (s *engineShell) podBound(p *pod, _ time.Duration) { s.podMoved(p, -1) }

// podRemoved implements clusterListener.
func (s *engineShell) podRemoved(p *pod, _ time.Duration) { s.podMoved(p, 1) }

func (s *engineShell) podMoved(p *pod, sign int64) {
	if s.quotaOnly || p.placed {
		return
	}
	free, known := s.engineNodes[p.node]
	if !known {
		return
	}
	free.add(p.requests, sign)
	s.tellNode(p.node)
}

// tellNode upserts n into the engine with its flavors and free capacity.
func (s *engineShell) tellNode(n *node) {
	obj := n.nodeObject()
	en := admission.Node{Name: n.name, Labels: n.labels, Free: admission.Resources{}, Allocatable: admission.Resources{}}
	for _, name := range sortedKeys(s.flavors) {
		if capacity.Matches(s.flavors[name], obj) {
			en.Flavors = append(en.Flavors, name)
		}
	}
	if len(en.Flavors) == 0 {
		return
	}
	for r, v := range s.engineNodes[n] {
		en.Free[admission.ResourceName(r)] = max(0, v)
	}
	for r, v := range n.alloc {
		en.Allocatable[admission.ResourceName(r)] = v
	}
	if err := s.eng.UpsertNode(en); err != nil && s.err == nil {
		s.err = err
	}
}
