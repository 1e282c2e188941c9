package runner_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// TestRunner runs the smoke scenario against a real apiserver and etcd
// (make test-integration); the package's plain tests need no plane.
func TestRunner(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "perf runner")
}
