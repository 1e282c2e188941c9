//go:build unix && !linux

package controlplane

// guardEnvtest does nothing where the kernel cannot signal a child when its
// parent dies: there, envtest's processes outlive a crashed test binary.
func (p *Plane) guardEnvtest() error { return nil }
