// Package scenarios holds the performance scenarios berth ships, as YAML
// files (see test/perf/scenario for their schema):
//
//   - smoke: a tiny run that `make test` executes;
//   - baseline: Kueue's scheduler-perf baseline shape, 15,000 workloads;
//   - large: the baseline classes over 1,000 ClusterQueues, 50,000 workloads;
//   - gpu-gangs: GPU gangs of 8-128 pods over a 640-node, 10-rack layout.
package scenarios

import (
	"embed"
	"io/fs"
)

// files is read-only data compiled into the binary.
//
//go:embed *.yaml
var files embed.FS

// FS returns the shipped scenario files, named <scenario>.yaml.
func FS() fs.FS { return files }
