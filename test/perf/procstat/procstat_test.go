package procstat

import (
	"os"
	"testing"
)

func TestProcStat(t *testing.T) {
	// Field 2 may hold spaces and parentheses.
	stat := []byte("4242 (kube (api) server) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 100 0 0\n")
	fields, err := statFields(stat)
	if err != nil {
		t.Fatal(err)
	}
	if fields[0] != "S" || fields[11] != "250" || fields[12] != "50" {
		t.Errorf("state, utime, stime = %s %s %s, want S 250 50", fields[0], fields[11], fields[12])
	}
	if _, err := statFields([]byte("4242 kube")); err == nil {
		t.Error("a stat without a command parsed")
	}
	status := []byte("Name:\tberth\nVmPeak:\t  900 kB\nVmHWM:\t   51200 kB\nVmRSS:\t   40000 kB\n")
	if got := statusKB(status, "VmHWM"); got != 51200 {
		t.Errorf("VmHWM = %d kB, want 51200", got)
	}
	if got := statusKB(status, "VmSwap"); got != 0 {
		t.Errorf("missing VmSwap = %d, want 0", got)
	}
	self, err := Read(os.Getpid())
	if err != nil || self.PeakRSSBytes <= 0 {
		t.Errorf("Read(self) = %+v, %v; want a positive peak RSS", self, err)
	}
}
