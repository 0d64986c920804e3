package lease

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke/inprocess"
)

// TestProcessTakeoverAfterSigkill measures the takeover of a killed worker on the built binary:
// three "esm run" processes on six shards of kinesis-local and dynalite, lease 10 s,
// `Timeout: 60` (ESM_TIMEOUT), the in-process example function taking 5 s an invocation. It
// asserts issue 38's promises, which lease.TakeoverBound guarantees (lease/DESIGN.md, "The
// takeover bound"):
//
//  1. A worker with nothing in flight (the roster shows it publishes no horizon) is killed with
//     SIGKILL; a record is then put to each of its shards, and each is invoked again by another
//     worker within the lease plus 2 s of the kill. The kill comes just after a heartbeat of
//     its (the worst case from the kill). The case: 89.6 s before the horizon; up to
//     L + 4c = 14 s with the previous count of the lease.
//  2. A worker is killed 2.5 s into a 5 s invocation; its shards are invoked again by another
//     worker no sooner than that invocation's deadline (its start plus B, the timeout and the
//     2 s in-process overrun wait: the invocation's own end bound), and within that deadline
//     plus 2 s.
//
// Both measurements are printed (go test -count=1 -run TestProcessTakeoverAfterSigkill -v
// ./lease/, with the emulators running; lease/DESIGN.md records them).
func TestProcessTakeoverAfterSigkill(t *testing.T) {
	const leaseDuration, timeout, delay = 10 * time.Second, 60 * time.Second, 5 * time.Second
	const slack = 2 * time.Second                   // the issue's: lease + 2 s, deadline + 2 s
	bound := timeout + inprocess.DefaultOverrunWait // B in-process
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	stream, _ := newStream(t, "takeover", 6)
	table := uniqueName("takeover")
	dropTableAtEnd(t, table)
	dir := t.TempDir()
	start := func(id string) *esmProc {
		return startESM(t, dir, id, stream, table, leaseDuration, "EXAMPLE_DELAY="+delay.String(), "ESM_TIMEOUT="+timeout.String(),
			"EXAMPLE_EVENT_DUMP="+filepath.Join(dir, id+"-events.jsonl"))
	}
	procs := map[string]*esmProc{"w1": start("w1"), "w2": start("w2"), "w3": start("w3")}
	balanced := func(ids ...string) func() bool {
		return func() bool {
			o, n := ownersIfTable(t, table)
			for _, id := range ids {
				if o[id] != 2 {
					return false
				}
			}
			return n == 6
		}
	}
	testkit.WaitFor(t, "two shards each", 2*time.Minute, balanced("w1", "w2", "w3"))

	// 1. Killed idle.
	testkit.WaitFor(t, "w1 to publish no horizon", time.Minute, func() bool { return horizonOf(t, table, "w1") == 0 })
	theirs := leasesOwnedBy(t, table, "w1")
	justAfterHeartbeat(t, table, "w1") // the worst case for a takeover counted from the kill
	procs["w1"].kill(t)
	killed := time.Now()
	putToShards(ctx, t, table, stream, theirs)
	idle := reinvokedAfter(t, procs, "w1", theirs, killed)
	t.Logf("SIGKILL of a worker with nothing in flight: its shards %v invoked again %s after the kill (lease + 2 s = %s; lease.TakeoverBound(L, 0) = %s from its last heartbeat)",
		theirs, idle.Round(time.Millisecond), leaseDuration+slack, TakeoverBound(leaseDuration, 0))
	if idle > leaseDuration+slack {
		t.Errorf("a dead idle worker's shards invoked again %s after the kill, want at most the lease plus 2 s, %s", idle, leaseDuration+slack)
	}

	// 2. Killed in the middle of a 5 s invocation.
	procs["w4"] = start("w4")
	testkit.WaitFor(t, "two shards each again", 2*time.Minute, balanced("w2", "w3", "w4"))
	theirs = leasesOwnedBy(t, table, "w2")
	dump := filepath.Join(dir, "w2-events.jsonl")
	// A record of its own, so that the invocation waited for is this one and no earlier one
	// (a record of the first kill's may still be invoked here after a hand-over).
	marker := fmt.Sprintf("in flight at the kill %d", time.Now().UnixNano())
	put := time.Now() // the invocation starts after this
	_, err := kin.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(stream), PartitionKey: aws.String("k"),
		ExplicitHashKey: aws.String(leasesOf(t, table)[theirs[0]].StartingHashKey), Data: []byte(marker)})
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.StdEncoding.EncodeToString([]byte(marker))
	testkit.WaitFor(t, "w2 to start invoking the record", time.Minute, func() bool {
		b, err := os.ReadFile(dump)
		return err == nil && strings.Contains(string(b), enc)
	})
	invoked := time.Now() // ... and before this: the function appends its event to the dump as it starts
	time.Sleep(delay / 2)
	procs["w2"].kill(t)
	killed = time.Now()
	horizon := horizonOf(t, table, "w2") // its last heartbeat's: it is dead
	putToShards(ctx, t, table, stream, theirs)
	busy := reinvokedAfter(t, procs, "w2", theirs, killed)
	// That invocation's own end bound, from the kill: its start + B, the start known to within
	// the put and its sight in the dump (the earliest for the check of no overlap, the latest for
	// the promise).
	earliest, deadline := put.Add(bound).Sub(killed), invoked.Add(bound).Sub(killed)
	t.Logf("SIGKILL 2.5 s into a 5 s invocation (its deadline, its start + B, %s after the kill; horizon published %s): its shards %v invoked again %s after the kill, "+
		"%s after the deadline (want at most 2 s; lease.TakeoverBound(L, %s) = %s from its last heartbeat)",
		deadline.Round(time.Millisecond), horizon, theirs, busy.Round(time.Millisecond), (busy - deadline).Round(time.Millisecond), horizon, TakeoverBound(leaseDuration, horizon))
	if busy < earliest {
		t.Errorf("the dead worker's shards invoked again %s after the kill, before its invocation's deadline (%s at the earliest)", busy, earliest)
	}
	if busy > deadline+slack {
		t.Errorf("the dead worker's shards invoked again %s after its invocation's deadline, want at most 2 s", busy-deadline)
	}
	for _, id := range []string{"w3", "w4"} {
		procs[id].stop(t)
	}
}

// justAfterHeartbeat returns once worker id's heartbeat counter moved in the roster (a
// consistent read every 10 ms or so): a kill then comes a few milliseconds after its last
// heartbeat.
func justAfterHeartbeat(t *testing.T, table, id string) {
	t.Helper()
	beat := func() int64 {
		out, err := ddb.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &table, Key: key(rosterKey), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		ms, _, err := decodeRoster(out.Item)
		if err != nil {
			t.Fatal(err)
		}
		return ms[id].beat
	}
	b0 := beat()
	testkit.WaitFor(t, id+"'s next heartbeat", time.Minute, func() bool { return beat() != b0 })
}

// horizonOf is the horizon worker id publishes now.
func horizonOf(t *testing.T, table, id string) time.Duration {
	t.Helper()
	r, _, err := PublishedHorizon(context.Background(), ddb, table, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// putToShards puts one record to each shard, by its hash key.
func putToShards(ctx context.Context, t *testing.T, table, stream string, shards []string) {
	t.Helper()
	ls := leasesOf(t, table)
	for _, s := range shards {
		_, err := kin.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(stream), PartitionKey: aws.String("k"),
			ExplicitHashKey: aws.String(ls[s].StartingHashKey), Data: []byte(fmt.Sprintf("after the kill of %s", s))})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// reinvokedAfter waits until each shard was invoked by a worker other than dead after the kill,
// and says how long after the kill the last of them was.
func reinvokedAfter(t *testing.T, procs map[string]*esmProc, dead string, shards []string, killed time.Time) time.Duration {
	t.Helper()
	first := map[string]int64{}
	testkit.WaitFor(t, "the dead worker's shards invoked again", 5*time.Minute, func() bool {
		for id, p := range procs {
			if id == dead || p.exited.Load() {
				continue
			}
			for _, s := range spans(t, []*esmProc{p}) {
				if s.start > killed.UnixNano() && (first[s.shard] == 0 || s.start < first[s.shard]) {
					first[s.shard] = s.start
				}
			}
		}
		for _, s := range shards {
			if first[s] == 0 {
				return false
			}
		}
		return true
	})
	var last int64
	for _, s := range shards {
		last = max(last, first[s])
	}
	return time.Duration(last - killed.UnixNano())
}
