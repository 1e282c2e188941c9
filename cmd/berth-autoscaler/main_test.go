package main

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// TestCapacityBufferFlags: both CapacityBuffer parts are off by default,
// as in cluster-autoscaler, and each flag turns on its own.
func TestCapacityBufferFlags(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		args                  []string
		controller, injection bool
	}{
		{"off by default", nil, false, false},
		{"the controller alone", []string{"--capacity-buffer-controller-enabled"}, true, false},
		{"the injection alone", []string{"--capacity-buffer-pod-injection-enabled"}, false, true},
		{"both", []string{"--capacity-buffer-controller-enabled", "--capacity-buffer-pod-injection-enabled=true"}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseFlags(tc.args, &zap.Options{})
			if err != nil {
				t.Fatalf("parseFlags: %v", err)
			}
			if c.opts.CapacityBufferController != tc.controller || c.opts.CapacityBufferPodInjection != tc.injection {
				t.Errorf("controller %v, injection %v; want %v, %v", c.opts.CapacityBufferController, c.opts.CapacityBufferPodInjection, tc.controller, tc.injection)
			}
		})
	}
}

// TestUnschedulablePodsFlags: the binary scales up for unschedulable pods
// by default, as cluster-autoscaler always does, with its expendable
// cutoff of -10; both flags change it, and a cutoff beyond int32 is
// refused.
func TestUnschedulablePodsFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		on      bool
		cutoff  int32
		wantErr bool
	}{
		{"on by default, cutoff -10", nil, true, -10, false},
		{"turned off", []string{"--scale-up-unschedulable-pods=false"}, false, -10, false},
		{"another cutoff", []string{"--expendable-pods-priority-cutoff=-100"}, true, -100, false},
		{"a cutoff beyond int32", []string{"--expendable-pods-priority-cutoff=3000000000"}, true, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseFlags(tc.args, &zap.Options{})
			if tc.wantErr {
				if err == nil {
					t.Fatal("parseFlags succeeded, want an error")
				}
				return
			}
			if err != nil {
				t.Fatalf("parseFlags: %v", err)
			}
			if c.opts.ScaleUpUnschedulablePods != tc.on {
				t.Errorf("scale up unschedulable pods = %v, want %v", c.opts.ScaleUpUnschedulablePods, tc.on)
			}
			if c.opts.ExpendablePodsPriorityCutoff == nil || *c.opts.ExpendablePodsPriorityCutoff != tc.cutoff {
				t.Errorf("cutoff = %v, want %d", c.opts.ExpendablePodsPriorityCutoff, tc.cutoff)
			}
		})
	}
}
