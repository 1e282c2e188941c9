//go:build tools

// Package tools pins the Kubernetes control-plane components that the test
// harness builds: kube-apiserver, kube-controller-manager and kube-scheduler.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
