package commands

import (
	"strings"
	"testing"
)

// TestStopAndActivateRefuseBadArguments: what is wrong with the command
// line is said before the cluster is asked anything.
func TestStopAndActivateRefuseBadArguments(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"stop a kind that is no queue", []string{"stop", "workload", "w"}, `"workload" is not a queue kind: use clusterqueue or localqueue`},
		{"resume a kind that is no queue", []string{"resume", "job", "j"}, `"job" is not a queue kind`},
		{"stop without a name", []string{"stop", "clusterqueue"}, "accepts 2 arg(s), received 1"},
		{"deactivate a queue", []string{"deactivate", "localqueue", "q"}, `"localqueue": only a workload can be activated or deactivated`},
		{"activate without a name", []string{"activate", "workload"}, "accepts 2 arg(s), received 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
