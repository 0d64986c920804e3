package lease

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/poller"
)

// Attribute names of a lease item. The first group are KCL's, with KCL's meaning, so that
// operators and tools recognise the table; the second group are esm's own.
const (
	attrKey           = "leaseKey"                     // S, hash key: the shard id
	attrOwner         = "leaseOwner"                   // S: worker id; absent = unowned
	attrCounter       = "leaseCounter"                 // N: +1 on every renewal, take, hand-over, release and checkpoint
	attrCheckpoint    = "checkpoint"                   // S: sequence number or a sentinel (see below)
	attrSubSequence   = "checkpointSubSequenceNumber"  // N: always 0 (esm does not de-aggregate KPL records yet)
	attrOwnerSwitches = "ownerSwitchesSinceCheckpoint" // N: +1 per ownership change, 0 after a checkpoint
	attrParents       = "parentShardId"                // SS: the shard's parents; absent when it has none
	attrChildren      = "childShardIds"                // SS: the shard's children, once known
	attrStartHash     = "startingHashKey"              // S
	attrEndHash       = "endingHashKey"                // S

	// attrOwnerEpoch is the epoch of the owner's roster entry when it took the lease: the
	// lease is valid while that entry, with that epoch, is in the roster and its heartbeat
	// moves. Absent on leases written by the previous protocol (and by KCL).
	attrOwnerEpoch = "leaseOwnerEpoch" // N
	// attrHandedOver marks a lease handed to leaseOwner that it has not taken up yet (taking
	// it up removes the mark with a write): nobody reads it yet, so whoever the placement
	// now gives it to may take it.
	attrHandedOver = "handedOver" // BOOL

	// attrPendingOwner names the worker that asked for the lease in a cooperative hand-over. The
	// owner stops reading, checkpoints and releases the lease, which stays reserved for that
	// worker (unowned, with pendingOwner) until it takes it or a lease duration passes.
	attrPendingOwner = "pendingOwner" // S
	// attrStart is ShardProgress.Start, kept even after the shard has a checkpoint.
	attrStart = "startingPosition" // S
	// attrStartTimestamp is ShardProgress.StartTimestamp (when a LATEST start was decided),
	// RFC 3339 with nanoseconds, UTC: a restart before the first checkpoint resumes there.
	attrStartTimestamp = "startingTimestamp" // S
	// attrLastCheckpoint is the last checkpointed sequence number of a finished shard, whose
	// checkpoint attribute reads SHARD_END.
	attrLastCheckpoint = "lastCheckpoint" // S
	// attrUpdatedAt is ShardProgress.UpdatedAt, RFC 3339 with nanoseconds, UTC. Informational:
	// lease expiry never reads it.
	attrUpdatedAt = "updatedAt" // S
	// attrWindow is ShardProgress.Window, the open tumbling window and its state, as JSON. A
	// DynamoDB item holds at most 400 KB, less than the 1 MB of state Lambda allows a window.
	attrWindow = "windowState" // S
	// attrRewind is ShardProgress.Rewind, an operator's rewind of the shard (rewind.go), as JSON.
	attrRewind = "esmRewind" // S
	// attrDiscarded is ShardProgress.Discarded, the discarded slot batches the checkpoint has
	// not passed yet (poller's discarded.go), as JSON.
	attrDiscarded = "esmDiscarded" // S
)

// Checkpoint sentinels, as KCL writes them.
const (
	sentinelShardEnd = "SHARD_END"
)

// Lease is one item of a lease table: one shard of the mapping.
type Lease struct {
	ShardID string
	// Owner is the worker holding the lease; "" when nobody does.
	Owner string
	// Counter is the lease's fencing token and heartbeat: every write raises it by one.
	Counter int64
	// PendingOwner is the worker a cooperative hand-over was requested for ("" when none); on an
	// unowned lease, the worker it is reserved for.
	PendingOwner string
	// OwnerEpoch is the epoch of the owner's roster entry the lease is valid under; 0 on a
	// lease of the previous protocol.
	OwnerEpoch int64
	// HandedOver: handed to Owner, not taken up yet.
	HandedOver bool
	// OwnerSwitchesSinceCheckpoint counts ownership changes since the last checkpoint.
	OwnerSwitchesSinceCheckpoint int64
	Parents, Children            []string
	StartingHashKey              string
	EndingHashKey                string
	// Progress is the shard's progress as poller.Store reports it.
	Progress poller.ShardProgress
	// Checkpoint is the raw checkpoint attribute: a sequence number, TRIM_HORIZON, LATEST,
	// AT_TIMESTAMP or SHARD_END.
	Checkpoint string
}

// Finished reports whether the shard was read to its end (checkpoint SHARD_END).
func (l Lease) Finished() bool { return l.Checkpoint == sentinelShardEnd }

// checkpointAttr is the checkpoint attribute for a progress: SHARD_END for a finished shard, else
// the checkpoint, else the starting position as its sentinel (TRIM_HORIZON when none).
func checkpointAttr(pr poller.ShardProgress) string {
	switch {
	case pr.Finished:
		return sentinelShardEnd
	case pr.Checkpoint != "":
		return pr.Checkpoint
	case pr.Start != "":
		return pr.Start
	}
	return poller.TrimHorizon
}

func isPositionSentinel(s string) bool {
	return s == poller.TrimHorizon || s == poller.Latest || s == poller.AtTimestamp
}

// progressOf maps a lease item's attributes back to the ShardProgress that wrote them. Items
// written by KCL (no startingPosition) read their start from the checkpoint sentinel.
func progressOf(checkpoint, last, start string, updated time.Time) poller.ShardProgress {
	pr := poller.ShardProgress{Start: start, UpdatedAt: updated}
	switch {
	case checkpoint == sentinelShardEnd:
		pr.Finished, pr.Checkpoint = true, last
	case isPositionSentinel(checkpoint):
		if start == "" && checkpoint != poller.TrimHorizon {
			pr.Start = checkpoint
		}
	default:
		pr.Checkpoint = checkpoint
	}
	return pr
}

// updateExpression is an update expression of SET clauses set and REMOVE paths remove, either
// of which may be empty (not both): DynamoDB refuses a clause keyword with nothing after it.
func updateExpression(set, remove []string) string {
	var parts []string
	if len(set) > 0 {
		parts = append(parts, "SET "+strings.Join(set, ", "))
	}
	if len(remove) > 0 {
		parts = append(parts, "REMOVE "+strings.Join(remove, ", "))
	}
	return strings.Join(parts, " ")
}

// progressUpdate is the SET and REMOVE clauses (with their values) that record pr.
type progressUpdate struct {
	set    []string
	remove []string
	values map[string]types.AttributeValue
}

// newProgressUpdate writes pr, resetting the sub-sequence number and the owner switches (a
// checkpoint was written).
func newProgressUpdate(pr poller.ShardProgress) (progressUpdate, error) {
	u := progressUpdate{values: map[string]types.AttributeValue{}}
	u.setS("#cp", ":cp", checkpointAttr(pr))
	u.set = append(u.set, "#sub = :zero", "#sw = :zero")
	u.values[":zero"] = num(0)
	if pr.Finished && pr.Checkpoint != "" {
		u.setS("#last", ":last", pr.Checkpoint)
	} else {
		u.remove = append(u.remove, "#last")
	}
	if pr.Start != "" {
		u.setS("#start", ":start", pr.Start)
	} else {
		u.remove = append(u.remove, "#start")
	}
	if !pr.StartTimestamp.IsZero() {
		u.setS("#startts", ":startts", pr.StartTimestamp.UTC().Format(time.RFC3339Nano))
	} else {
		u.remove = append(u.remove, "#startts")
	}
	if !pr.UpdatedAt.IsZero() {
		u.setS("#upd", ":upd", pr.UpdatedAt.UTC().Format(time.RFC3339Nano))
	} else {
		u.remove = append(u.remove, "#upd")
	}
	for _, j := range []struct {
		name, what string
		set        bool
		v          any
	}{
		{"#win", "window state", pr.Window != nil, pr.Window},
		{"#rw", "rewind", pr.Rewind != nil, pr.Rewind},
		{"#disc", "discarded runs", len(pr.Discarded) > 0, pr.Discarded},
	} {
		if !j.set {
			u.remove = append(u.remove, j.name)
			continue
		}
		b, err := json.Marshal(j.v)
		if err != nil {
			return u, fmt.Errorf("encode %s: %w", j.what, err)
		}
		u.setS(j.name, ":"+j.name[1:], string(b))
	}
	return u, nil
}

func (u *progressUpdate) setS(name, value, s string) {
	u.set = append(u.set, name+" = "+value)
	u.values[value] = str(s)
}

// progressNames are the expression attribute names progressUpdate uses.
var progressNames = map[string]string{
	"#cp": attrCheckpoint, "#sub": attrSubSequence, "#sw": attrOwnerSwitches,
	"#last": attrLastCheckpoint, "#start": attrStart, "#upd": attrUpdatedAt, "#win": attrWindow,
	"#startts": attrStartTimestamp, "#rw": attrRewind, "#disc": attrDiscarded,
}

// newItem is a new, unowned lease for a shard.
func newItem(si poller.ShardInfo) (map[string]types.AttributeValue, error) {
	pr := si.Initial
	it := map[string]types.AttributeValue{
		attrKey:           str(si.ShardID),
		attrCounter:       num(0),
		attrCheckpoint:    str(checkpointAttr(pr)),
		attrSubSequence:   num(0),
		attrOwnerSwitches: num(0),
	}
	if ps := nonEmpty(si.Parents); len(ps) > 0 {
		it[attrParents] = &types.AttributeValueMemberSS{Value: ps}
	}
	if si.StartingHashKey != "" {
		it[attrStartHash] = str(si.StartingHashKey)
	}
	if si.EndingHashKey != "" {
		it[attrEndHash] = str(si.EndingHashKey)
	}
	if pr.Finished && pr.Checkpoint != "" {
		it[attrLastCheckpoint] = str(pr.Checkpoint)
	}
	if pr.Start != "" {
		it[attrStart] = str(pr.Start)
	}
	if !pr.StartTimestamp.IsZero() {
		it[attrStartTimestamp] = str(pr.StartTimestamp.UTC().Format(time.RFC3339Nano))
	}
	if !pr.UpdatedAt.IsZero() {
		it[attrUpdatedAt] = str(pr.UpdatedAt.UTC().Format(time.RFC3339Nano))
	}
	if pr.Window != nil {
		w, err := json.Marshal(pr.Window)
		if err != nil {
			return nil, fmt.Errorf("encode window state of %s: %w", si.ShardID, err)
		}
		it[attrWindow] = str(string(w))
	}
	if pr.Rewind != nil {
		b, err := json.Marshal(pr.Rewind)
		if err != nil {
			return nil, fmt.Errorf("encode rewind of %s: %w", si.ShardID, err)
		}
		it[attrRewind] = str(string(b))
	}
	return it, nil
}

// decodeLease reads a lease item.
func decodeLease(it map[string]types.AttributeValue) (Lease, error) {
	var l Lease
	var err error
	getS := func(name string) string {
		if v, ok := it[name].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	getN := func(name string) int64 {
		v, ok := it[name].(*types.AttributeValueMemberN)
		if !ok {
			return 0
		}
		n, perr := strconv.ParseInt(v.Value, 10, 64)
		if perr != nil && err == nil {
			err = fmt.Errorf("attribute %s: %w", name, perr)
		}
		return n
	}
	getSS := func(name string) []string {
		if v, ok := it[name].(*types.AttributeValueMemberSS); ok {
			out := slices.Clone(v.Value)
			slices.Sort(out)
			return out
		}
		return nil
	}
	l.ShardID = getS(attrKey)
	if l.ShardID == "" {
		return l, fmt.Errorf("lease item without a string %s", attrKey)
	}
	l.Owner = getS(attrOwner)
	l.Counter = getN(attrCounter)
	l.OwnerEpoch = getN(attrOwnerEpoch)
	if b, ok := it[attrHandedOver].(*types.AttributeValueMemberBOOL); ok {
		l.HandedOver = b.Value
	}
	l.PendingOwner = getS(attrPendingOwner)
	l.OwnerSwitchesSinceCheckpoint = getN(attrOwnerSwitches)
	l.Parents = getSS(attrParents)
	l.Children = getSS(attrChildren)
	l.StartingHashKey = getS(attrStartHash)
	l.EndingHashKey = getS(attrEndHash)
	l.Checkpoint = getS(attrCheckpoint)
	var updated time.Time
	if s := getS(attrUpdatedAt); s != "" {
		if updated, err = time.Parse(time.RFC3339Nano, s); err != nil {
			err = fmt.Errorf("attribute %s: %w", attrUpdatedAt, err)
		}
	}
	l.Progress = progressOf(l.Checkpoint, getS(attrLastCheckpoint), getS(attrStart), updated)
	if s := getS(attrStartTimestamp); s != "" && err == nil {
		if l.Progress.StartTimestamp, err = time.Parse(time.RFC3339Nano, s); err != nil {
			err = fmt.Errorf("attribute %s: %w", attrStartTimestamp, err)
		}
	}
	if w := getS(attrWindow); w != "" && err == nil {
		l.Progress.Window = &poller.WindowState{}
		if err = json.Unmarshal([]byte(w), l.Progress.Window); err != nil {
			err = fmt.Errorf("attribute %s: %w", attrWindow, err)
		}
	}
	if rw := getS(attrRewind); rw != "" && err == nil {
		l.Progress.Rewind = &poller.Rewind{}
		if err = json.Unmarshal([]byte(rw), l.Progress.Rewind); err != nil {
			err = fmt.Errorf("attribute %s: %w", attrRewind, err)
		}
	}
	if d := getS(attrDiscarded); d != "" && err == nil {
		if err = json.Unmarshal([]byte(d), &l.Progress.Discarded); err != nil {
			err = fmt.Errorf("attribute %s: %w", attrDiscarded, err)
		}
	}
	if err != nil {
		return l, fmt.Errorf("lease %s: %w", l.ShardID, err)
	}
	return l, nil
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func key(shardID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrKey: str(shardID)}
}

func nonEmpty(ss []string) []string {
	var out []string
	for _, s := range ss {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
