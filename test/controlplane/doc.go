// Package controlplane starts a real Kubernetes control plane for berth's
// integration and end-to-end suites and for the local demo.
//
// Nothing is mocked at the API boundary. Every plane runs a real etcd and a
// real kube-apiserver through controller-runtime's envtest, which also
// installs CRDs and webhook configurations (with self-signed serving certs)
// so that suites exercise the same validation, defaulting and admission as a
// cluster would.
//
// A Full plane adds the components a job needs to actually run:
// kube-controller-manager (node lifecycle, Job, garbage collection, ...),
// kube-scheduler and kwok, which plays the kubelet for fake nodes. With it a
// batch/v1 Job that requests nvidia.com/gpu is bound by the real scheduler to a
// fake GPU node (see GPUNode), runs for as long as its pods ask for (see
// RunFor) and completes through the real Job controller.
//
// Binaries are built from pinned Go modules by test/tools/build.sh and cached
// outside the checkout; see Options.BinDir. Each component logs to a file in
// the plane's directory, and start-up failures report the tail of that log.
//
// The package keeps no global state: any number of planes may run side by
// side, each with its own ports and directory, although on a small machine
// one plane per test binary is the sensible budget.
package controlplane
