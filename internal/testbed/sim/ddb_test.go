package sim

import (
	"maps"
	"slices"
	"testing"
	"testing/synctest"
)

// TestDynamoDBSimulation runs the DynamoDB Streams schedules of the seeds TestSimulation runs
// (ESM_SIM_SEED, ESM_SIM_SEEDS and ESM_SIM_FROM, as make sim sets them), judged by their
// invariants; across 20 seeds or more, every kind of event must have happened and every invariant
// been judged.
func TestDynamoDBSimulation(t *testing.T) {
	seeds := seedsToRun(t)
	injected, checked := map[string]int{}, map[string]int{}
	failed := 0
	for _, seed := range seeds {
		var res Result
		synctest.Test(t, func(t *testing.T) { res = RunDynamoDB(seed) })
		for k, v := range res.Injected {
			injected[k] += v
		}
		for k, v := range res.Checked {
			checked[k] += v
		}
		if res.Failed() {
			failed++
			t.Errorf("DynamoDB seed %d broke an invariant: %s%v", seed, generateDDB(seed), res.Violations[:min(5, len(res.Violations))])
		}
	}
	t.Logf("%d DynamoDB seeds, %d failed; judged %v; injected %v", len(seeds), failed, checked, injected)
	if len(seeds) < 20 {
		return
	}
	for _, k := range []string{"ddb-rotate", "ddb-stop", "ddb-trim", "ddb-iterator-expired", "poison-record", "ddb-discarded-batch"} {
		if injected[k] == 0 {
			t.Errorf("no DynamoDB run injected %s (injected: %v)", k, slices.Sorted(maps.Keys(injected)))
		}
	}
	for _, inv := range []string{InvLost, InvOrder, InvLineage, InvDDBShape} {
		if checked[inv] == 0 {
			t.Errorf("no DynamoDB run judged %q", inv)
		}
	}
}
