// Package flavors reads ResourceFlavors for every controller that needs
// them: the capacity controller (a flavor's levels and which nodes are of
// it), the queue controller (whether the flavors a ClusterQueue names
// exist), the job adapters (the labels and tolerations an admitted job's
// pods get) and the provisioning controller (a booking's policy). One
// reader keeps one answer to "which flavors exist": a flavor missing is a
// result (ok false, a list of names), never an error, in every caller.
package flavors

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// Store reads ResourceFlavors through a reader, normally the manager's
// cache, so every controller reads the same informer. It holds no state of
// its own and is safe for concurrent use; each call returns objects the
// caller may change.
type Store struct {
	reader client.Reader
}

// New is a Store reading through r.
func New(r client.Reader) Store { return Store{reader: r} }

// Get returns the flavor named name; ok is false when it does not exist.
func (s Store) Get(ctx context.Context, name string) (*berthv1.ResourceFlavor, bool, error) {
	rf := &berthv1.ResourceFlavor{}
	if err := s.reader.Get(ctx, client.ObjectKey{Name: name}, rf); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("reading ResourceFlavor %s: %w", name, err)
	}
	return rf, true, nil
}

// List returns every flavor.
func (s Store) List(ctx context.Context) ([]berthv1.ResourceFlavor, error) {
	list := &berthv1.ResourceFlavorList{}
	if err := s.reader.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing ResourceFlavors: %w", err)
	}
	return list.Items, nil
}

// Lookup reads the flavors names name: it returns, sorted and once each,
// the names that name no flavor, and the node labels of those that exist
// (only those that have labels).
func (s Store) Lookup(ctx context.Context, names []string) (missing []string, nodeLabels map[string]map[string]string, err error) {
	for _, name := range names {
		if slices.Contains(missing, name) || nodeLabels[name] != nil {
			continue
		}
		rf, ok, err := s.Get(ctx, name)
		switch {
		case err != nil:
			return nil, nil, err
		case !ok:
			missing = append(missing, name)
		case len(rf.Spec.NodeLabels) > 0:
			if nodeLabels == nil {
				nodeLabels = map[string]map[string]string{}
			}
			nodeLabels[name] = rf.Spec.NodeLabels
		}
	}
	slices.Sort(missing)
	return missing, nodeLabels, nil
}

// Memo remembers the flavors one computation read, so that a job whose pod
// sets share a flavor reads it once. Make one per computation: it never
// sees later changes.
type Memo struct {
	store Store
	seen  map[string]*berthv1.ResourceFlavor
}

// Memo is a Memo reading through s.
func (s Store) Memo() *Memo { return &Memo{store: s, seen: map[string]*berthv1.ResourceFlavor{}} }

// Get is Store.Get, read once per name.
func (m *Memo) Get(ctx context.Context, name string) (*berthv1.ResourceFlavor, bool, error) {
	if rf, ok := m.seen[name]; ok {
		return rf, rf != nil, nil
	}
	rf, ok, err := m.store.Get(ctx, name)
	if err != nil {
		return nil, false, err
	}
	m.seen[name] = rf
	return rf, ok, nil
}
