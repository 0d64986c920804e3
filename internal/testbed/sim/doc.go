// Package sim is a deterministic simulation of esm. It runs the real poller (failure rules,
// bisection, partial batch responses, ParallelizationFactor slots, filters, tumbling windows)
// in-process under testing/synctest virtual time, against the in-memory Kinesis fake, a store
// that can fail (or the real bbolt file store), an on-failure destination that can fail and an
// invoker that records every invocation with its start and end times.
//
// A seed decides everything a run does (Generate): the mapping's configuration, producers over
// many keys, reshards, trims, iterator expiry, faults on every dependency, worker crashes (memory
// lost, store kept), restarts, freezes and graceful stops, an operator's rewind replaying a
// window of every shard mid-run (rewind.go; on a store, or on a lease table with the fleet stopped for it); with several workers, faults that hit
// one worker while the others see everything (partitions from DynamoDB, Kinesis, both or the
// function, lease-table writes that land late), pauses mid-invocation and across reshards, and
// functions as slow as the lease, and an operator who skips blocked batches (skip.go). Run plays the schedule and then checks every invariant of the
// architecture (check); every invocation is judged by its start and end at the function, with no
// exemption for a paused or killed worker's. Result counts what a run injected and how many
// cases each invariant judged, so that no check passes on schedules that never did the thing it
// guards. RunCatalog plays a seed's catalog schedule: esm serve managers sharing one catalog.
//
// Virtual time is exact, and every random choice, the poller's retry jitter included, is drawn
// from the seed; the order of goroutines that run at the same virtual instant is the Go
// scheduler's. A seed therefore replays the same schedule exactly, and almost always the same
// interleaving.
package sim
