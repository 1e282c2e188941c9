package sim

import (
	"time"

	"github.com/berth-dev/berth/admission"
	"github.com/berth-dev/berth/controllers/capacity"
	"github.com/berth-dev/berth/controllers/lifecycle"
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
		free := n.alloc
		s.engineNodes[n] = &free
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
	delete(s.nodeFlavors, n)
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
	free.add(&p.requests, sign)
	s.tellNode(p.node)
}

// tellNode upserts n into the engine with its flavors and free capacity.
func (s *engineShell) tellNode(n *node) {
	flavors, ok := s.nodeFlavors[n]
	if !ok {
		obj := n.nodeObject()
		for _, name := range sortedKeys(s.flavors) {
			if capacity.Matches(s.flavors[name], obj) {
				flavors = append(flavors, name)
			}
		}
		s.nodeFlavors[n] = flavors
	}
	en := admission.Node{Name: n.name, Labels: n.labels, Flavors: flavors, Free: admission.Resources{}, Allocatable: admission.Resources{},
		Taints: lifecycle.TaintsToEngine(n.taints)}
	if len(en.Flavors) == 0 {
		return
	}
	free := s.engineNodes[n]
	for i, name := range s.r.c.res.names {
		if n.alloc[i] != 0 || free[i] != 0 {
			en.Free[admission.ResourceName(name)] = max(0, free[i])
			en.Allocatable[admission.ResourceName(name)] = n.alloc[i]
		}
	}
	if err := s.eng.UpsertNode(en); err != nil && s.err == nil {
		s.err = err
	}
}
