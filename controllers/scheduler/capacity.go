package scheduler

import (
	"fmt"

	"github.com/berth-dev/berth/admission"
)

// UpsertFlavor gives the engine a ResourceFlavor's topology levels.
func (s *Scheduler) UpsertFlavor(name string, levels []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.engine.UpsertFlavor(admission.Flavor{Name: name, Levels: levels}); err != nil {
		return fmt.Errorf("ResourceFlavor %s: %w", name, err)
	}
	s.poke()
	return nil
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
