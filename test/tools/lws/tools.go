//go:build tools

// Package tools pins the LeaderWorkerSet controller, which the e2e suite
// runs beside berth so that LeaderWorkerSets' pods are created by the real
// operator.
package tools

import _ "sigs.k8s.io/lws/cmd"
