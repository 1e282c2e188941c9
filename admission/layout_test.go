//go:build amd64 || arm64

package admission

import (
	"testing"
	"unsafe"
)

// TestOrderFieldsShareALine holds wl's layout to what its comment promises:
// the fields the queue and victim orders compare sit in one 64-byte line of
// the workload's allocation, and the struct stays in the 576-byte size class.
// A field added or moved before them would otherwise silently put a second
// cache miss into every comparison of every index search. The offsets are a
// 64-bit platform's (8-byte pointers, and the malloc header they imply), the
// only platforms berth is built for.
func TestOrderFieldsShareALine(t *testing.T) {
	const (
		header = 8   // malloc header of a pointerful object over 512 bytes
		line   = 64  // cache line
		class  = 576 // the size class the struct and its header fit (9 lines)
	)
	var w wl
	if size := unsafe.Sizeof(w) + header; size > class {
		t.Errorf("wl and its malloc header are %d bytes, over the %d-byte size class", size, class)
	}
	fields := []struct {
		name       string
		off, width uintptr
	}{
		{"prio", unsafe.Offsetof(w.prio), unsafe.Sizeof(w.prio)},
		{"created", unsafe.Offsetof(w.created), unsafe.Sizeof(w.created)},
		{"vstart", unsafe.Offsetof(w.vstart), unsafe.Sizeof(w.vstart)},
		{"admitTime", unsafe.Offsetof(w.admitTime), unsafe.Sizeof(w.admitTime)},
	}
	first := (fields[0].off + header) / line
	for _, f := range fields {
		start, end := (f.off+header)/line, (f.off+f.width-1+header)/line
		if start != first || end != first {
			t.Errorf("wl.%s at bytes %d-%d of the allocation: lines %d-%d, want line %d with prio",
				f.name, f.off+header, f.off+f.width-1+header, start, end, first)
		}
	}
}
