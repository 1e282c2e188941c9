package admission

import "hash/maphash"

// names interns flavor and resource names into small integers, so that the
// engine's hot paths compare and index integers, and turns them back into
// names for admissions and messages. It compiles API values into the
// engine's interned form (clusterqueue.go, workload.go) and renders
// messages (messages.go). Every part of the engine that needs a name shares
// the Engine's one names.
type names struct {
	flavorIDs map[string]int32
	flavors   []string
	// filterSeed hashes the pods' node constraints (podSetSpec.filterHash).
	filterSeed maphash.Seed
	resIDs     map[ResourceName]int32
	resources  []ResourceName
	// msgBuf is reused to build messages.
	msgBuf []byte
}

func newNames() *names {
	return &names{flavorIDs: map[string]int32{}, resIDs: map[ResourceName]int32{}, filterSeed: maphash.MakeSeed()}
}

func (nm *names) flavorID(name string) int32 {
	if id, ok := nm.flavorIDs[name]; ok {
		return id
	}
	id := int32(len(nm.flavors))
	nm.flavorIDs[name] = id
	nm.flavors = append(nm.flavors, name)
	return id
}

func (nm *names) resID(name ResourceName) int32 {
	if id, ok := nm.resIDs[name]; ok {
		return id
	}
	id := int32(len(nm.resources))
	nm.resIDs[name] = id
	nm.resources = append(nm.resources, name)
	return id
}

// clock is the engine's sense of time, shared by its parts. The engine reads
// no clock: each Cycle sets the time it decides at.
type clock struct {
	// cycle counts cycles; now is the time of the running cycle (unix nanoseconds).
	cycle uint64
	now   int64
}
