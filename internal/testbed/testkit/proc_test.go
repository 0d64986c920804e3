package testkit

import (
	"os"
	"testing"
	"time"
)

// TestReadProcSeesThisProcess: this process's reading has memory, a peak at least as high, and
// CPU time that grows with work done, whether asked for by pid or as pid 0.
func TestReadProcSeesThisProcess(t *testing.T) {
	before, err := ReadProc(0)
	if err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; { // work to be counted
	}
	after, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after.RSS <= 0 || after.PeakRSS < after.RSS {
		t.Fatalf("RSS %d, peak %d: want a positive RSS and a peak at least as high", after.RSS, after.PeakRSS)
	}
	if after.CPU <= before.CPU {
		t.Fatalf("CPU time %s then %s after 50 ms of work: want it to grow", before.CPU, after.CPU)
	}
}
