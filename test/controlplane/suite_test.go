package controlplane_test

import (
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// timeout bounds waits for the cluster to act (a Job to finish, a node to be
// Ready); interval paces the polls.
const (
	timeout  = 60 * time.Second
	interval = 100 * time.Millisecond
)

func TestControlPlane(t *testing.T) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		runCrashChild(dir)
	}
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(timeout)
	SetDefaultEventuallyPollingInterval(interval)
	RunSpecs(t, "Control plane harness")
}
