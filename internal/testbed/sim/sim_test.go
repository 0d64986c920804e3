package sim

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// Seeds: ESM_SIM_SEED replays one seed; ESM_SIM_SEEDS runs that many from ESM_SIM_FROM (make
// sim). Without either the test runs a fixed budget of seeds for CI; -short runs a few.
// ESM_SIM_TRACE sets how many trace lines a failing seed prints.
func seedsToRun(t *testing.T) []int64 {
	if s := os.Getenv("ESM_SIM_SEED"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("ESM_SIM_SEED=%q: %v", s, err)
		}
		return []int64{n}
	}
	// The CI budget: about 60–90 s on 2 cores (make test runs with -race).
	count, from := 75, int64(1)
	if raceEnabled {
		count = 35
	}
	if testing.Short() {
		count = 4
	}
	if s := os.Getenv("ESM_SIM_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("ESM_SIM_SEEDS=%q: %v", s, err)
		}
		count = n
	}
	if s := os.Getenv("ESM_SIM_FROM"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("ESM_SIM_FROM=%q: %v", s, err)
		}
		from = n
	}
	out := make([]int64, count)
	for i := range out {
		out[i] = from + int64(i)
	}
	return out
}

// leaseBudgetSeeds are run with lease schedules (several workers on lease.Dynamo) in the CI
// budget, besides the plain seeds: the seeds that found the lease bugs (4, 33, 36) and two more
// multi-worker ones. -race runs the first two.
var leaseBudgetSeeds = []int64{4, 33, 36, 9, 13}

// catalogBudget are the seeds whose catalog schedule the CI budget runs.
var catalogBudget = map[int64]bool{-4: true, -33: true}

func abs(n int64) int64 { return max(n, -n) }

func TestSimulation(t *testing.T) {
	seeds := seedsToRun(t)
	var withLeases map[int64]bool
	if os.Getenv("ESM_SIM_SEED") == "" && os.Getenv("ESM_SIM_SEEDS") == "" && !leaseSchedules && !testing.Short() {
		extra := leaseBudgetSeeds
		if raceEnabled {
			extra = extra[:2]
		}
		seeds = seeds[:len(seeds)-len(extra)] // keep the budget's size
		withLeases = map[int64]bool{}
		for _, s := range extra {
			seeds = append(seeds, -s) // negative: the seed with leases
			withLeases[-s] = true
		}
	}
	if s := os.Getenv("ESM_SIM_TRACE"); s != "" {
		traceTail, _ = strconv.Atoi(s)
	}
	injected, checked := map[string]int{}, map[string]int{}
	count := func(r Result) {
		for k, v := range r.Injected {
			injected[k] += v
		}
		for k, v := range r.Checked {
			checked[k] += v
		}
	}
	failed := 0
	began := time.Now()
	for _, seed := range seeds {
		var res Result
		dir := t.TempDir()
		synctest.Test(t, func(t *testing.T) {
			if withLeases[seed] {
				res = RunSchedule(GenerateWithLeases(-seed), dir)
			} else {
				res = Run(seed, dir)
			}
		})
		if withLeases[seed] && res.Schedule.Workers < 2 {
			t.Errorf("lease budget seed %d has %d worker: pick one with several", -seed, res.Schedule.Workers)
		}
		count(res)
		if res.Failed() {
			failed++
			// The first three failures in full; then one line each, and the run goes on, so
			// that make sim lists every failing seed.
			if failed <= 3 {
				t.Errorf("seed %d broke an invariant:\n%s", seed, res.Report())
			} else {
				t.Errorf("seed %d broke an invariant: %s (%d violations)", seed, res.Violations[0], len(res.Violations))
			}
		}
		if os.Getenv("ESM_SIM_SEED") != "" {
			t.Logf("%s", res.Schedule)
		}
		if leaseSchedules || catalogBudget[seed] {
			// The seed's catalog schedule: managers sharing one catalog.
			var cres Result
			synctest.Test(t, func(t *testing.T) { cres = RunCatalog(abs(seed)) })
			count(cres)
			if cres.Failed() {
				failed++
				t.Errorf("seed %d's catalog schedule broke an invariant: %s (%d violations)", abs(seed), strings.Join(cres.Violations[:min(3, len(cres.Violations))], "; "), len(cres.Violations))
			}
		}
	}
	took := time.Since(began)
	var b strings.Builder
	fmt.Fprintf(&b, "%d seeds in %s: %.1f seeds/s, %d failed\n", len(seeds), took.Round(time.Millisecond), float64(len(seeds))/took.Seconds(), failed)
	b.WriteString("invariants (cases judged):\n")
	for _, inv := range Invariants {
		fmt.Fprintf(&b, "  %-75s %d\n", inv, checked[inv])
	}
	if checked[InvCatalogConverge] > 0 {
		for _, inv := range CatalogInvariants {
			fmt.Fprintf(&b, "  %-75s %d\n", inv, checked[inv])
		}
	}
	b.WriteString("injected (times each took effect):\n")
	for _, k := range slices.Sorted(maps.Keys(injected)) {
		fmt.Fprintf(&b, "  %-40s %d\n", k, injected[k])
	}
	t.Log("\n" + b.String())
	if len(seeds) >= 20 { // fewer seeds need not cover every kind
		// Every kind of fault and event must have happened across the runs.
		// (A partial-response fault window often meets no failing batch: the responses count.)
		kinds := slices.DeleteFunc(slices.Clone(faultKinds), func(k string) bool { return k == FInvPartial })
		kinds = append(kinds, workerFaultKinds...)
		if leaseSchedules {
			kinds = append(append(kinds, FLateWrite), CatalogKinds...)
		}
		for _, k := range append(append(kinds, subscriptionFaults...), string(EvCrash), string(EvFreeze), string(EvStop),
			string(EvSplit), string(EvMerge), string(EvTrim), "poison-record", PartialResponses, SkipDone) {
			if injected[k] == 0 {
				t.Errorf("no run injected %s", k)
			}
		}
		invs := slices.DeleteFunc(slices.Clone(Invariants), func(inv string) bool { return inv == InvExpiry && !leaseSchedules })
		if leaseSchedules {
			invs = append(invs, CatalogInvariants...)
		}
		for _, inv := range invs {
			if checked[inv] == 0 {
				t.Errorf("no run judged %q", inv)
			}
		}
	}
}
