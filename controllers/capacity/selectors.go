package capacity

import (
	"context"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

// selectorCacheSize bounds how many compiled CEL expressions a Selectors
// keeps: a cluster has few distinct DeviceClass and request selectors.
const selectorCacheSize = 256

// Selectors evaluates DRA device selectors (CEL expressions over a device's
// driver, attributes and capacity) with the library kube-scheduler's DRA
// plugin uses, so a device berth counts for a DeviceClass is one the
// scheduler could allocate for it. Compiled expressions are cached. A
// Selectors is safe for concurrent use.
type Selectors struct {
	cache *dracel.Cache
}

// NewSelectors returns an evaluator with an empty compile cache.
func NewSelectors() *Selectors {
	return &Selectors{cache: dracel.NewCache(selectorCacheSize, dracel.Features{EnableListTypeAttributes: true})}
}

// Match reports whether the device of driver satisfies every selector, as
// the scheduler requires. A selector that does not compile or fails to
// evaluate is an error: the scheduler cannot allocate against it either, so
// callers treat the device as not matching and say why.
func (s *Selectors) Match(ctx context.Context, selectors []resourcev1.DeviceSelector, driver string, d *resourcev1.Device) (bool, error) {
	for _, sel := range selectors {
		if sel.CEL == nil {
			continue // no other selector kind exists in resource.k8s.io/v1
		}
		expr := s.cache.GetOrCompile(sel.CEL.Expression)
		if expr.Error != nil {
			return false, fmt.Errorf("compiling device selector %q: %w", sel.CEL.Expression, expr.Error)
		}
		ok, _, err := expr.DeviceMatches(ctx, dracel.Device{
			Driver: driver, AllowMultipleAllocations: d.AllowMultipleAllocations,
			Attributes: d.Attributes, Capacity: d.Capacity,
		})
		if err != nil {
			return false, fmt.Errorf("evaluating device selector %q on device %s/%s: %w", sel.CEL.Expression, driver, d.Name, err)
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}
