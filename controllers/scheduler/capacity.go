package scheduler

import (
	"fmt"

	"github.com/berth-dev/berth/admission"
)

// UpsertFlavor gives the engine a ResourceFlavor's topology levels and
// provisioning mode.
func (s *Scheduler) UpsertFlavor(f admission.Flavor) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.engine.UpsertFlavor(f); err != nil {
		return fmt.Errorf("ResourceFlavor %s: %w", f.Name, err)
	}
	s.poke()
	return nil
}

// UpsertPool gives the engine a CapacityPool's capacity.
func (s *Scheduler) UpsertPool(p admission.Pool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.engine.UpsertPool(p); err != nil {
		return fmt.Errorf("CapacityPool %s: %w", p.Name, err)
	}
	s.poke()
	return nil
}

// DeletePool removes a CapacityPool.
func (s *Scheduler) DeletePool(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.engine.DeletePool(name)
	s.poke()
}

// DeleteFlavor forgets a ResourceFlavor's topology levels.
func (s *Scheduler) DeleteFlavor(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.engine.DeleteFlavor(name)
	s.poke()
}

// UpsertNode gives the engine a schedulable node's free capacity.
func (s *Scheduler) UpsertNode(n admission.Node) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.engine.UpsertNode(n); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	s.poke()
	return nil
}

// DeleteNode removes a node that is gone or cannot take pods.
func (s *Scheduler) DeleteNode(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.engine.DeleteNode(name)
	s.poke()
}
