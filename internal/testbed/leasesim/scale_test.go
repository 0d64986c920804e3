package leasesim

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"testing/synctest"
)

// -scale full runs the size (10,000 shards, 100 workers; make sim-scale). The default
// is the CI size, 1,000 shards over 10 workers, with the targets scaled where they are rates.
var scale = flag.String("scale", "ci", "ci (1,000 shards / 10 workers), full (10,000 / 100), or SHARDSxWORKERS")

func size() Config {
	switch *scale {
	case "full":
		return Config{Shards: 10000, Workers: 100, Seed: 1}
	case "ci":
		return Config{Shards: 1000, Workers: 10, Seed: 1}
	}
	var s, w int
	if _, err := fmt.Sscanf(*scale, "%dx%d", &s, &w); err != nil || s <= 0 || w <= 0 {
		panic("-scale: want ci, full or SHARDSxWORKERS, got " + *scale)
	}
	return Config{Shards: s, Workers: w, Seed: 1}
}

func report(t *testing.T, lines []Line) {
	t.Helper()
	t.Log("\n" + Format(lines))
	for _, l := range lines {
		if !l.OK() {
			t.Errorf("%s", l)
		}
	}
}

func TestScaleSteady(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	synctest.Test(t, func(t *testing.T) { report(t, Steady(size())) })
}

// TestScaleCapped compares a cold start on a capped table, with throttle bursts, with one on
// an uncapped table.
func TestScaleCapped(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	var cold float64
	synctest.Test(t, func(t *testing.T) { cold = ColdStart(size()) })
	synctest.Test(t, func(t *testing.T) { report(t, Capped(size(), cold)) })
}

func TestScaleStaggered(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	synctest.Test(t, func(t *testing.T) {
		report(t, Staggered(size()))
	})
}

// TestScaleFleetView: what the fleet's view adds to the lease traffic (FleetView).
func TestScaleFleetView(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	synctest.Test(t, func(t *testing.T) { report(t, FleetView(size())) })
}

func TestScaleRolling(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	synctest.Test(t, func(t *testing.T) { report(t, Rolling(size())) })
}

func TestDebugRolling(t *testing.T) {
	if *one == 0 {
		t.Skip()
	}
	debugLog = slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelInfo})
	defer func() { debugLog = nil }()
	synctest.Test(t, func(t *testing.T) { t.Log(Format(Rolling(Config{Shards: 100, Workers: 4, Seed: 1}))) })
}
