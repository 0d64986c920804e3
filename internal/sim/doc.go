// Package sim is a deterministic simulation of esm. It runs the real poller (failure rules,
// bisection, partial batch responses, ParallelizationFactor slots, filters, tumbling windows)
// in-process under testing/synctest virtual time, against the in-memory Kinesis fake, a store
// that can fail (or the real bbolt file store), an on-failure destination that can fail and an
// invoker that records every invocation with its start and end times.
//
// A seed decides everything a run does (Generate): the mapping's configuration, producers over
// many keys, reshards, trims, iterator expiry, faults on every dependency, worker crashes (memory
// lost, store kept), restarts, freezes and graceful stops. Run plays the schedule and then checks
// every invariant of the architecture (Check); Stats counts what the runs injected and checked,
// so that no check passes on schedules that never did the thing it guards.
//
// Virtual time is exact; the order of goroutines that run at the same virtual instant is the Go
// scheduler's. A seed therefore replays the same schedule exactly, and almost always the same
// interleaving.
package sim
