package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/internal/ctxwait"
	"github.com/kinesis-esm/esm/poller"
)

// Rewinds of a mapping on a lease table (DESIGN.md, "Rewinds"). The request lives on the
// mapping's item (esm:mapping), the roster carries its revision (attribute rewind) so that
// every worker sees it at its next heartbeat or roster read at no cost, and each worker,
// seeing a revision newer than the one it started under, invokes nothing more, stops its
// poller (its leases released, its roster entry left) and waits until the rewind is applied
// or refused before it joins again. The operator's side is rewind_apply.go.

// Attributes of the rewind request on the mapping item, and of the roster.
const (
	attrRewindRev      = "rewindRev"      // N: the latest request's revision (1, 2, ...)
	attrRewindState    = "rewindState"    // S: RewindRequested, RewindApplying, RewindApplied, RewindRefused
	attrRewindRequest  = "rewindRequest"  // S: the poller.RewindRequest, JSON
	attrRewindBy       = "rewindBy"       // S: who asked (user@host)
	attrRewindAt       = "rewindAt"       // S: when it was asked, RFC 3339
	attrRewindDeadline = "rewindDeadline" // S: until when the asker waits for the fleet to stop
	attrRewindReport   = "rewindReport"   // S: what was done, or why it was refused
	attrRewindDoneAt   = "rewindDoneAt"   // S: when its state last changed, RFC 3339
	attrRosterRewind   = "rewind"         // N, on the roster: the latest request's revision
)

// The states of a rewind request.
const (
	// RewindRequested: the workers stop and wait; the asker waits for them to have stopped.
	RewindRequested = "requested"
	// RewindApplying: the lease items are being written; the request can only complete.
	RewindApplying = "applying"
	// RewindApplied and RewindRefused end a request; the workers start again.
	RewindApplied = "applied"
	RewindRefused = "refused"
)

// rewindExpiry is how long after its deadline a request still "requested" (its asker gone)
// is refused by a waiting worker, so that the fleet goes on.
const rewindExpiry = 30 * time.Second

// RewindState is a mapping's latest rewind request.
type RewindState struct {
	Revision    int64                `json:"revision"`
	State       string               `json:"state,omitempty"`
	Request     poller.RewindRequest `json:"request"`
	By          string               `json:"by,omitempty"`
	RequestedAt time.Time            `json:"requestedAt,omitzero"`
	Deadline    time.Time            `json:"deadline,omitzero"`
	Report      string               `json:"report,omitempty"`
	// DoneAt is when the state last changed (applying, applied, refused).
	DoneAt time.Time `json:"doneAt,omitzero"`
}

// InProgress reports whether the request still holds the workers.
func (s RewindState) InProgress() bool {
	return s.State == RewindRequested || s.State == RewindApplying
}

// Notice is the rewind as a worker tells its observers (poller.RewindObserver).
func (s RewindState) Notice() poller.RewindNotice {
	return poller.RewindNotice{Revision: s.Revision, State: s.State, InProgress: s.InProgress(), Request: s.Request, By: s.By,
		RequestedAt: s.RequestedAt, DoneAt: s.DoneAt, Report: s.Report}
}

// ReadRewind reads the table's latest rewind request (a consistent read of the mapping item);
// Revision 0 when there never was one.
func ReadRewind(ctx context.Context, api DynamoAPI, table string) (RewindState, error) {
	out, err := timed(api).GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key(mappingItemKey), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return RewindState{}, fmt.Errorf("read the rewind of lease table %s: %w", table, err)
	}
	return decodeRewind(out.Item)
}

func decodeRewind(it map[string]types.AttributeValue) (RewindState, error) {
	s := func(n string) string {
		if v, ok := it[n].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	var st RewindState
	if v, ok := it[attrRewindRev].(*types.AttributeValueMemberN); ok {
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			return st, fmt.Errorf("attribute %s: %w", attrRewindRev, err)
		}
		st.Revision = n
	}
	st.State, st.By, st.Report = s(attrRewindState), s(attrRewindBy), s(attrRewindReport)
	if q := s(attrRewindRequest); q != "" {
		if err := json.Unmarshal([]byte(q), &st.Request); err != nil {
			return st, fmt.Errorf("attribute %s: %w", attrRewindRequest, err)
		}
	}
	st.RequestedAt, _ = time.Parse(time.RFC3339Nano, s(attrRewindAt))
	st.Deadline, _ = time.Parse(time.RFC3339Nano, s(attrRewindDeadline))
	st.DoneAt, _ = time.Parse(time.RFC3339Nano, s(attrRewindDoneAt))
	return st, nil
}

// setRewindState moves the request rev from state from to state to (with a report),
// conditional on both: false when it was not in state from.
func setRewindState(ctx context.Context, api DynamoAPI, table string, rev int64, from, to, report string) (bool, error) {
	_, err := timed(api).UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &table, Key: key(mappingItemKey),
		UpdateExpression:         aws.String("SET #s = :to, #rep = :rep, #done = :done"),
		ConditionExpression:      aws.String("#s = :from AND #rev = :rev"),
		ExpressionAttributeNames: map[string]string{"#s": attrRewindState, "#rep": attrRewindReport, "#rev": attrRewindRev, "#done": attrRewindDoneAt},
		ExpressionAttributeValues: map[string]types.AttributeValue{":to": str(to), ":from": str(from), ":rev": num(rev), ":rep": str(report),
			":done": str(time.Now().UTC().Format(time.RFC3339Nano))},
	})
	if isConditionFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("rewind %d of lease table %s: set %s: %w", rev, table, to, err)
	}
	return true, nil
}

// AwaitRewinds is what a worker does before it joins: it waits while a rewind is in progress
// (logging every 10 s), and returns the latest rewind, ended (or Revision 0: none), whose
// revision it starts under (WithRewindRevision). A request whose asker is gone (still "requested" rewindExpiry after its deadline) is refused,
// so that the fleet goes on from where it was; one being applied is only ever completed (by
// esm rewind run again).
func AwaitRewinds(ctx context.Context, api DynamoAPI, table string, log *slog.Logger) (RewindState, error) {
	var told time.Time
	for {
		st, err := ReadRewind(ctx, api, table)
		if err != nil {
			return RewindState{}, err
		}
		if !st.InProgress() {
			return st, nil
		}
		now := time.Now()
		if st.State == RewindRequested && !st.Deadline.IsZero() && now.After(st.Deadline.Add(rewindExpiry)) {
			if _, err := setRewindState(ctx, api, table, st.Revision, RewindRequested, RewindRefused,
				"refused: the esm rewind that asked for it did not apply it by its deadline; nothing was changed"); err != nil {
				return RewindState{}, err
			}
			log.Warn("rewind refused: its asker did not apply it by its deadline; going on from where the mapping was", "revision", st.Revision)
			continue
		}
		if now.Sub(told) >= 10*time.Second {
			told = now
			msg := "waiting for a rewind to be applied"
			if st.State == RewindApplying {
				msg += " (interrupted rewinds complete when esm rewind runs again on the table)"
			}
			log.Info(msg, "revision", st.Revision, "state", st.State, "by", st.By, "requested_at", st.RequestedAt)
		}
		if !ctxwait.Sleep(ctx, 500*time.Millisecond) {
			return RewindState{}, ctx.Err()
		}
	}
}

// WithRewindRevision is the rewind revision a worker starts under (AwaitRewinds): once its
// roster reads show a newer one, it invokes nothing more (Held and the invocation gate say no)
// and RewindRequested is closed; its runner then stops the poller and starts it again once
// the rewind is done. A Dynamo made without it ignores rewinds: it goes on heartbeating, and
// a rewind asked of its table is refused once the asker's wait is over (nothing changed).
func WithRewindRevision(rev int64) Option {
	return func(c *dynamoConfig) { c.rewindRev, c.rewinds = rev, true }
}

// noteRewindLocked records the rewind revision a roster read shows.
func (d *Dynamo) noteRewindLocked(item map[string]types.AttributeValue) {
	v, ok := item[attrRosterRewind].(*types.AttributeValueMemberN)
	if !ok {
		return
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil || !d.cfg.rewinds || n <= d.cfg.rewindRev || d.rewindDue {
		return
	}
	d.rewindDue = true
	close(d.rewindCh)
	d.log.Info("rewind requested: invoking nothing more, stopping to let it apply", "revision", n)
}

// rewindDueLocked: a rewind newer than this worker's start was requested.
func (d *Dynamo) rewindDueLocked() bool { return d.rewindDue }

// LatestRewind reads the latest rewind of this worker's table (ReadRewind).
func (d *Dynamo) LatestRewind(ctx context.Context) (RewindState, error) {
	return ReadRewind(ctx, d.api, d.table)
}

// RewindRequested is closed once this worker has seen a rewind requested after its start.
func (d *Dynamo) RewindRequested() <-chan struct{} { return d.rewindCh }

// errRewindBusy is returned when a rewind is already in progress.
var errRewindBusy = errors.New("a rewind is in progress")
