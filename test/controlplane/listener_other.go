//go:build !linux

package controlplane

// listensOn cannot tell who holds a port without /proc: the health probe's
// answer is taken as the component's.
func listensOn(int, int) (bool, error) { return true, nil }
