package admission

// topology is the engine's capacity model and placement in it: each flavor's
// levels, nodes and pools, every node's free and reserved capacity, and the
// workloads waiting for capacity in a domain. It decides where a gang fits
// (placement.go) and keeps what admissions reserved (topology.go); queueing
// work that capacity changes cause (waking waiting workloads) stays with the
// Engine, which sequences it.
type topology struct {
	names *names

	flavorTopo  map[string]*topoFlavor
	nodes       map[string]*topoNode
	pools       map[string]*topoPool
	topoWaiting []*wl
	// freed says a reservation was returned outside capacityChanged.
	freed bool
}

func newTopology(nm *names) *topology {
	return &topology{names: nm, flavorTopo: map[string]*topoFlavor{}, nodes: map[string]*topoNode{}, pools: map[string]*topoPool{}}
}
