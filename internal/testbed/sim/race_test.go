//go:build race

package sim

// raceEnabled: the race detector slows a run about fourfold; CI runs fewer seeds under it.
const raceEnabled = true
