package lease

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The roster is one item of the lease table (leaseKey rosterKey) with a map attribute
// (attrMembers): worker id → {e: epoch, h: heartbeat counter, l: leaving}. Each worker writes
// its own entry (its heartbeat, every LeaseDuration/3) and reads the whole item (one
// eventually consistent read of a few KB every claim cycle, or the heartbeat's returned
// values), so every worker sees every other, holding leases or not.

const (
	rosterKey   = "!esm-workers" // not a shard id: Kinesis shard ids start with "shardId-"
	attrMembers = "workers"
	memberEpoch = "e"
	memberBeat  = "h"
	memberLeave = "l"
	memberKnown = "u" // a digest of the shards the worker knows of (Dynamo.knownLocked)
	memberWaits = "w" // leases placed on the worker that another live worker owns and does not hand over
	// memberHorizon is how long after the heartbeat's send the worker's invocations may still
	// run, in milliseconds (whole seconds); absent when none can (see horizon.go).
	memberHorizon = "r"
	// attrGone holds the tombstones of workers declared dead or replaced by a new incarnation:
	// goneKey(id, epoch) → {w: milliseconds}. Their leases stay unfree until an observer has
	// seen the tombstone for that long (see DESIGN.md, "Invocations bounded by leases").
	attrGone = "gone"
	goneWait = "w"
	// goneBeat is the heartbeat counter a declaration of death was conditional on, in the
	// tombstone of a worker that published horizons: an observer that saw that heartbeat counts
	// the wait from its own sight of it (roster.ownWaits).
	goneBeat = "h"
)

// maxWaits bounds the leases one roster entry asks about.
const maxWaits = 20

// goneKey names the tombstone of a worker's epoch.
func goneKey(id string, epoch int64) string { return strconv.FormatInt(epoch, 10) + ":" + id }

// outlast is how long an observer waits for something that lasts at most d on another clock:
// d + d/8, the clock-rate ratio Held's margin allows (a worker stops at 0.8 L on its clock; the
// others declare it dead after 0.9 L on theirs).
func outlast(d time.Duration) time.Duration { return d + d/8 }

// newEpoch is a random epoch of 8 digits that the roster (entries and tombstones) does not
// show for worker id. An epoch must differ from the earlier epochs of the same id that may still
// run or hold leases, and those are in the roster: an epoch whose tombstone is gone has nothing
// left running, and a lease still stamped with it is free for anyone, the new incarnation too.
// 19 digits took 5 bytes more per roster entry, which with the horizons of 100 busy workers took
// every heartbeat past 3 KB (4 write units); 8 digits (4 bytes, 10 took 5) pay for horizons in
// tenths of a second.
func newEpoch(rnd *rand.Rand, id string, ms map[string]member, tombs map[string]time.Duration) int64 {
	for {
		e := 1e7 + rnd.Int64N(9e7)
		if _, gone := tombs[goneKey(id, e)]; ms[id].epoch != e && !gone {
			return e
		}
	}
}

func decodeRoster(item map[string]types.AttributeValue) (map[string]member, map[string]time.Duration, error) {
	out := map[string]member{}
	tombs := map[string]time.Duration{}
	if g, ok := item[attrGone].(*types.AttributeValueMemberM); ok {
		for k, v := range g.Value {
			w := MaxFunctionTimeout + DefaultLeaseDuration // unreadable: as long as the longest
			if e, ok := v.(*types.AttributeValueMemberM); ok {
				if n, ok := e.Value[goneWait].(*types.AttributeValueMemberN); ok {
					if ms, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
						w = time.Duration(ms) * time.Millisecond
					}
				}
			}
			tombs[k] = w
		}
	}
	m, ok := item[attrMembers].(*types.AttributeValueMemberM)
	if !ok {
		return out, tombs, nil
	}
	for id, v := range m.Value {
		e, ok := v.(*types.AttributeValueMemberM)
		if !ok {
			return nil, nil, fmt.Errorf("roster entry %s is not a map", id)
		}
		var mb member
		var horizon int64
		for name, dst := range map[string]*int64{memberEpoch: &mb.epoch, memberBeat: &mb.beat, memberKnown: &mb.known, memberHorizon: &horizon} {
			if n, ok := e.Value[name].(*types.AttributeValueMemberN); ok {
				x, err := strconv.ParseInt(n.Value, 10, 64)
				if err != nil {
					return nil, nil, fmt.Errorf("roster entry %s: %w", id, err)
				}
				*dst = x
			}
		}
		mb.horizon = time.Duration(max(horizon, 0)) * time.Millisecond
		if b, ok := e.Value[memberLeave].(*types.AttributeValueMemberBOOL); ok {
			mb.leaving = b.Value
		}
		if w, ok := e.Value[memberWaits].(*types.AttributeValueMemberSS); ok {
			mb.waits = w.Value
		}
		out[id] = mb
	}
	return out, tombs, nil
}

func entryValue(m member) types.AttributeValue {
	v := map[string]types.AttributeValue{memberEpoch: num(m.epoch), memberBeat: num(m.beat), memberKnown: num(m.known)}
	if m.leaving {
		v[memberLeave] = &types.AttributeValueMemberBOOL{Value: true}
	}
	if m.horizon > 0 {
		v[memberHorizon] = num(m.horizon.Milliseconds())
	}
	return &types.AttributeValueMemberM{Value: v}
}

func tombstoneValue(wait time.Duration) types.AttributeValue {
	return &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{goneWait: num(wait.Milliseconds())}}
}

// tombstoneBeats are the heartbeat counters the roster item's tombstones name, by goneKey.
func tombstoneBeats(item map[string]types.AttributeValue) map[string]int64 {
	out := map[string]int64{}
	g, _ := item[attrGone].(*types.AttributeValueMemberM)
	if g == nil {
		return out
	}
	for k, v := range g.Value {
		if e, ok := v.(*types.AttributeValueMemberM); ok {
			if n, ok := e.Value[goneBeat].(*types.AttributeValueMemberN); ok {
				if h, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
					out[k] = h
				}
			}
		}
	}
	return out
}
