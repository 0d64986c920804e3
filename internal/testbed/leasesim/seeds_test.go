package leasesim

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"testing/synctest"
)

var seeds = flag.Int("seeds", 20, "how many seeds TestFaultSeeds runs (make sim-scale runs 300)")

// TestFaultSeeds runs the protocol under faults, seed after seed, and checks the invariants:
// never two readers of a shard, no checkpoint by a non-holder, nothing lost, every child read
// within one claim cycle of its parents finishing.
func TestFaultSeeds(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	failed, slow := 0, 0
	injected := map[string]int{}
	for seed := range uint64(*seeds) {
		t.Run(fmt.Sprint(seed+1), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				v, late, summary, inj := FaultRun(seed + 1)
				for k, n := range inj {
					injected[k] += n
				}
				if len(late) > 0 {
					slow++
				}
				if len(v) > 0 {
					failed++
					t.Errorf("seed %d: %d violations, first: %s (%s)", seed+1, len(v), v[0], summary)
					return
				}
				if seed < 3 || testing.Verbose() {
					t.Logf("seed %d: ok: %s", seed+1, summary)
				}
			})
		})
	}
	t.Logf("%d seeds, %d with violations, %d with a child read later than one claim cycle; faults of one worker: %v", *seeds, failed, slow, injected)
	for _, k := range []string{faultCutDynamo, faultCutKinesis, faultCutBoth, faultCutFunc, faultPause, faultPauseSplit} {
		if *seeds >= 20 && injected[k] == 0 {
			t.Errorf("no seed injected %s", k)
		}
	}
}

func TestOneSeed(t *testing.T) {
	if *one == 0 {
		t.Skip("-one SEED")
	}
	debugLog = slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelDebug})
	defer func() { debugLog = nil }()
	synctest.Test(t, func(t *testing.T) {
		v, _, summary, _ := FaultRun(uint64(*one))
		for _, x := range v {
			t.Log(x)
		}
		t.Log(summary)
	})
}

var one = flag.Int("one", 0, "run this seed only (TestOneSeed)")
