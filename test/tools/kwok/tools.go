//go:build tools

// Package tools pins kwok, which provides fake nodes and kubelets for the
// end-to-end control plane of the berth test harness.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
