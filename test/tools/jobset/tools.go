//go:build tools

// Package tools pins the JobSet controller, which the e2e suite runs beside
// berth so that JobSets' child Jobs are created by the real operator.
package tools

import _ "sigs.k8s.io/jobset"
