package burst_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// TestBurst runs a small burst on the full plane (make test-e2e); the
// package's plain tests need no plane.
func TestBurst(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "burst scenario")
}
