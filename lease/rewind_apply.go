package lease

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/internal/ctxwait"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/source"
)

// The operator's side of a rewind (esm rewind, the API's rewind route): ask, wait for the
// fleet to stop, write the lease items, say it is done (DESIGN.md, "Rewinds").

// ErrRewindRefused is wrapped by Rewind's error when the rewind changed nothing: another is in
// progress, or the fleet did not stop in time.
var ErrRewindRefused = errors.New("rewind refused")

// RewindOptions tune Rewind.
type RewindOptions struct {
	// By names the asker in the request (user@host).
	By string
	// Wait bounds the wait for the fleet to stop; default 2 minutes.
	Wait time.Duration
	// LeaseDuration: a worker whose heartbeat stood still this long (or its own published
	// lease duration, if longer) counts as stopped. Default DefaultLeaseDuration.
	LeaseDuration time.Duration
	Log           *slog.Logger
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
}

// RewindResult is what a rewind did.
type RewindResult struct {
	Revision int64
	// Rewound and Reset: the shards moved, and their descendants made to wait for them again.
	Rewound, Reset []string
	// Completed: an interrupted rewind (found being applied) was completed instead.
	Completed bool
	// Stopped is how long the fleet took to stop.
	Stopped time.Duration
}

// Rewind applies q (validated against shards, the stream's listing) to the mapping of table:
// it asks the workers to stop (the request on the mapping item, its revision on the roster),
// waits until none runs (every roster entry gone, or its heartbeat still for a lease
// duration), then writes every lease item the rewind changes, each conditional on the counter
// it read, and marks the request applied; the workers then start again from the items. It
// refuses (ErrRewindRefused, nothing changed) when another rewind is in progress or the fleet
// did not stop within o.Wait; a rewind found half applied (its asker died) is completed.
func Rewind(ctx context.Context, api DynamoAPI, table string, shards []source.Shard, q poller.RewindRequest, o RewindOptions) (RewindResult, error) {
	o.Wait = cmp.Or(o.Wait, 2*time.Minute)
	o.LeaseDuration = cmp.Or(o.LeaseDuration, DefaultLeaseDuration)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	api = timed(api)
	cur, err := ReadRewind(ctx, api, table)
	if err != nil {
		return RewindResult{}, err
	}
	if cur.State == RewindApplying { // its asker died while writing: finish it, as it was asked
		o.Log.Warn("completing an interrupted rewind", "revision", cur.Revision, "by", cur.By, "requested_at", cur.RequestedAt)
		res, err := applyRewind(ctx, api, table, shards, cur.Request, cur.Revision, o)
		res.Completed = true
		if err == nil {
			err = fmt.Errorf("%w: rewind %d (by %s at %s) was being applied and has been completed; run this one again", ErrRewindRefused, cur.Revision, cur.By, cur.RequestedAt.Format(time.RFC3339))
		}
		return res, err
	}
	if cur.State == RewindRequested && o.Now().Before(cur.Deadline.Add(rewindExpiry)) {
		return RewindResult{}, fmt.Errorf("%w: %w: rewind %d asked by %s at %s waits for the workers until %s", ErrRewindRefused, errRewindBusy,
			cur.Revision, cur.By, cur.RequestedAt.Format(time.RFC3339), cur.Deadline.Format(time.RFC3339))
	}
	rev := cur.Revision + 1
	if err := requestRewind(ctx, api, table, cur, rev, q, o); err != nil {
		return RewindResult{}, err
	}
	o.Log.Info("rewind requested; waiting for the workers to stop", "revision", rev, "wait", o.Wait)
	start := o.Now()
	if err := awaitStopped(ctx, api, table, start.Add(o.Wait), o); err != nil {
		report := "refused: " + err.Error() + "; nothing was changed"
		if _, serr := setRewindState(context.WithoutCancel(ctx), api, table, rev, RewindRequested, RewindRefused, report); serr != nil {
			return RewindResult{Revision: rev}, serr
		}
		return RewindResult{Revision: rev}, fmt.Errorf("%w: %w; nothing was changed and the workers go on from where they were", ErrRewindRefused, err)
	}
	stopped := o.Now().Sub(start)
	ok, err := setRewindState(ctx, api, table, rev, RewindRequested, RewindApplying, "")
	if err != nil {
		return RewindResult{Revision: rev}, err
	}
	if !ok {
		return RewindResult{Revision: rev}, fmt.Errorf("%w: the request expired before the workers stopped (a worker refused it); nothing was changed", ErrRewindRefused)
	}
	res, err := applyRewind(ctx, api, table, shards, q, rev, o)
	res.Stopped = stopped
	return res, err
}

// requestRewind writes the request rev (conditional on the one read being the latest) and its
// revision on the roster.
func requestRewind(ctx context.Context, api DynamoAPI, table string, cur RewindState, rev int64, q poller.RewindRequest, o RewindOptions) error {
	body, err := json.Marshal(q)
	if err != nil {
		return fmt.Errorf("encode rewind: %w", err)
	}
	now := o.Now()
	cond := "attribute_not_exists(#rev)"
	vals := map[string]types.AttributeValue{
		":rev": num(rev), ":s": str(RewindRequested), ":q": str(string(body)), ":by": str(o.By),
		":at": str(now.UTC().Format(time.RFC3339Nano)), ":dl": str(now.Add(o.Wait).UTC().Format(time.RFC3339Nano)), ":rep": str(""),
	}
	if cur.Revision > 0 {
		cond, vals[":old"] = "#rev = :old", num(cur.Revision)
	}
	_, err = api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &table, Key: key(mappingItemKey),
		UpdateExpression:    aws.String("SET #rev = :rev, #s = :s, #q = :q, #by = :by, #at = :at, #dl = :dl, #rep = :rep"),
		ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: map[string]string{"#rev": attrRewindRev, "#s": attrRewindState, "#q": attrRewindRequest,
			"#by": attrRewindBy, "#at": attrRewindAt, "#dl": attrRewindDeadline, "#rep": attrRewindReport},
		ExpressionAttributeValues: vals,
	})
	if isConditionFailed(err) {
		return fmt.Errorf("%w: another rewind was asked for at the same time; nothing was changed", ErrRewindRefused)
	}
	if err != nil {
		return fmt.Errorf("request rewind in lease table %s: %w", table, err)
	}
	// The roster carries the revision to every worker's next heartbeat (no roster: no worker
	// ever ran, and a worker reads the request before it joins).
	_, err = api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &table, Key: key(rosterKey),
		UpdateExpression:          aws.String("SET #rw = :rev"),
		ConditionExpression:       aws.String("attribute_exists(#k)"),
		ExpressionAttributeNames:  map[string]string{"#rw": attrRosterRewind, "#k": attrKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{":rev": num(rev)},
	})
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("announce rewind in lease table %s: %w", table, err)
	}
	return nil
}

// awaitStopped waits until no worker runs: every roster entry gone, or its heartbeat still for
// its lease duration (on this clock, from the read that first showed it: a worker frozen or
// dead then holds nothing it may use: Held ended at 0.8 of it, and its next heartbeat shows
// the rewind). Tombstones stay: a lease a dead worker held still waits for its horizon.
func awaitStopped(ctx context.Context, api DynamoAPI, table string, deadline time.Time, o RewindOptions) error {
	type seen struct {
		beat, epoch int64
		since       time.Time
		lease       time.Duration
	}
	still := map[string]seen{}
	for {
		sent := o.Now()
		out, err := api.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key(rosterKey), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return fmt.Errorf("read the workers: %w", err)
		}
		ms, _, err := decodeRoster(out.Item)
		if err != nil {
			return err
		}
		var running []string
		for id, m := range ms {
			s, ok := still[id]
			if !ok || s.beat != m.beat || s.epoch != m.epoch {
				s = seen{beat: m.beat, epoch: m.epoch, since: sent, lease: o.LeaseDuration}
				if l, err := boundLease(ctx, api, table, id, m.epoch); err == nil && l > s.lease {
					s.lease = l
				}
				still[id] = s
			}
			if o.Now().Sub(s.since) < s.lease {
				running = append(running, id)
			}
		}
		if len(running) == 0 {
			return nil
		}
		if o.Now().After(deadline) {
			return fmt.Errorf("workers %s still running after %s (an esm without rewinds, or one that cannot reach the table)", strings.Join(running, ", "), o.Wait)
		}
		if !ctxwait.Sleep(ctx, 250*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// boundLease is the lease duration a worker's epoch published (0 when none).
func boundLease(ctx context.Context, api DynamoAPI, table, id string, epoch int64) (time.Duration, error) {
	out, err := api.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key(boundKey(id, epoch))})
	if err != nil {
		return 0, err
	}
	l, _ := millis(out.Item[attrBoundLease])
	return l, nil
}

// applyRewind writes every lease item the rewind changes (a shard whose item already carries
// this revision was written by an interrupted run), then marks the request applied.
func applyRewind(ctx context.Context, api DynamoAPI, table string, shards []source.Shard, q poller.RewindRequest, rev int64, o RewindOptions) (RewindResult, error) {
	items, err := scanTable(ctx, api, table)
	if err != nil {
		return RewindResult{Revision: rev}, err
	}
	stored := make(map[string]poller.ShardProgress, len(items))
	for id, l := range items {
		stored[id] = l.Progress
	}
	children := childrenOf(shards)
	for id, kids := range children {
		// A listed shard without an item whose child has one was finished, then deleted
		// (DESIGN.md, "Finished stays finished"): a replay skips all it had handled.
		if _, ok := items[id]; !ok && slices.ContainsFunc(kids, func(k string) bool { _, ok := items[k]; return ok }) {
			stored[id] = poller.ShardProgress{Finished: true}
		}
	}
	plan := poller.PlanRewind(q, shards, stored, rev)
	res := RewindResult{Revision: rev, Rewound: plan.Rewound, Reset: plan.Reset}
	byID := map[string]source.Shard{}
	for _, s := range shards {
		byID[s.ID] = s
	}
	for _, id := range sortedKeys(plan.Progress) {
		if l, ok := items[id]; ok && l.Progress.Rewind != nil && l.Progress.Rewind.Revision == rev {
			continue
		}
		progress := func(old poller.ShardProgress) poller.ShardProgress {
			stored[id] = old // a replay keeps what was handled: as the item says now
			pr := poller.PlanRewind(q, shards, stored, rev).Progress[id]
			pr.UpdatedAt = o.Now()
			return pr
		}
		if err := writeRewound(ctx, api, table, byID[id], children[id], items[id], progress); err != nil {
			return res, fmt.Errorf("rewind %d: shard %s: %w (the rewind is half applied: the workers wait; run esm rewind again to complete it)", rev, id, err)
		}
	}
	report := fmt.Sprintf("applied: %d shards rewound (%s), %d descendants wait for them again", len(plan.Rewound), strings.Join(plan.Rewound, " "), len(plan.Reset))
	if _, err := setRewindState(ctx, api, table, rev, RewindApplying, RewindApplied, report); err != nil {
		return res, err
	}
	o.Log.Info("rewind applied", "revision", rev, "rewound", plan.Rewound, "reset", plan.Reset)
	return res, nil
}

// writeRewound writes one shard's rewound progress: over its item, conditional on the counter
// read (raised by one: a checkpoint of a worker that read it before is fenced off), retried on
// a fresh read when that moved; or, for a finished shard whose item was deleted, a new item.
func writeRewound(ctx context.Context, api DynamoAPI, table string, s source.Shard, kids []string, l Lease, progress func(poller.ShardProgress) poller.ShardProgress) error {
	for attempt := 0; attempt < 5; attempt++ {
		pr := progress(l.Progress)
		if l.ShardID == "" {
			si := poller.ShardInfo{ShardID: s.ID, Parents: s.Parents, Initial: pr,
				StartingHashKey: s.StartingHashKey, EndingHashKey: s.EndingHashKey}
			it, err := newItem(si)
			if err != nil {
				return err
			}
			if len(kids) > 0 {
				it[attrChildren] = &types.AttributeValueMemberSS{Value: kids}
			}
			_, err = api.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: it,
				ConditionExpression: aws.String("attribute_not_exists(#k)"), ExpressionAttributeNames: map[string]string{"#k": attrKey}})
			if !isConditionFailed(err) {
				return err
			}
		} else {
			u, err := newProgressUpdate(pr)
			if err != nil {
				return err
			}
			names := maps.Clone(progressNames)
			names["#c"] = attrCounter
			u.values[":cur"], u.values[":one"] = num(l.Counter), num(1)
			expr := updateExpression(append(u.set, "#c = #c + :one"), u.remove)
			_, err = api.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: key(l.ShardID),
				UpdateExpression: aws.String(expr), ConditionExpression: aws.String("#c = :cur"),
				ExpressionAttributeNames: names, ExpressionAttributeValues: u.values})
			if !isConditionFailed(err) {
				return err
			}
		}
		// Written meanwhile (a stale checkpoint, a create): read it again and write over it.
		out, err := api.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key(s.ID), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return err
		}
		l = Lease{}
		if len(out.Item) > 0 {
			if l, err = decodeLease(out.Item); err != nil {
				return err
			}
		}
	}
	return errors.New("its lease item kept changing")
}

func childrenOf(shards []source.Shard) map[string][]string {
	out := map[string][]string{}
	for _, s := range shards {
		for _, p := range s.Parents {
			out[p] = append(out[p], s.ID)
		}
	}
	return out
}
