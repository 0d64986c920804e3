package leasesim

import (
	"fmt"
	"testing"
	"testing/synctest"
)

// TestTakeoverWithinTheBound: a worker killed idle, and one killed in the middle of its
// invocations, have their shards run again within lease.TakeoverBound of the kill for the
// horizon each last published (L + 2c idle, not L + 4c + 9/8·B), and within the promise
// (the lease + 2 s idle, the last invocation's deadline + 2 s busy), with no overlap, over a few
// seeds.
func TestTakeoverWithinTheBound(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed+1), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lines, v := TakeoverRun(seed + 1)
				t.Log("\n" + Format(lines))
				for _, x := range v {
					t.Error(x)
				}
			})
		})
	}
}
