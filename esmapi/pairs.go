package esmapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A DynamoCatalog keeps Lambda's rule that an event source has at most one mapping to a function
// with single-item conditional writes (no transaction: emulators such as dynalite have none). Each
// (EventSourceArn, FunctionArn) pair that a mapping has is claimed by a guard item, written before
// the record that takes the pair and removed after the record that leaves it:
//
//	key "pair|<EventSourceArn>|<FunctionArn>", "owner": the mapping's UUID, "since": the revision
//	of the owner's record from which on it has the pair
//
// A guard is held while its owner's record exists and has the pair; a write that takes a held
// pair is refused with a *PairTakenError. Any other guard is left over by a worker that stopped
// between its two writes (a crash, a write refused meanwhile), and is taken over once its owner's
// write, if one may still land, is fenced off: the owner's record is missing and was never
// written (since 0), so a tombstone item is put under its UUID, which its create's
// attribute_not_exists condition then fails on; or the record is older than since, so it is
// written again one revision on, which the pending write's revision condition then fails on. A
// worker waits claimWaits first, as the owner's second write normally follows its first within
// milliseconds.

// PairTakenError is what a Catalog's Put returns when the record would give the mapping the
// event source and function of another mapping, UUID: Lambda answers that with 409
// ResourceConflictException.
type PairTakenError struct {
	UUID, EventSourceArn, FunctionArn string
}

func (e *PairTakenError) Error() string {
	return fmt.Sprintf("mapping %s already maps %s to %s", e.UUID, e.EventSourceArn, e.FunctionArn)
}

// pair is a mapping's event source and function: no two records of a catalog have the same.
type pair struct{ source, function string }

func pairOf(r *Record) pair { return pair{r.Mapping.EventSourceArn, r.Mapping.FunctionArn} }

func (p pair) taken(by string) error {
	return &PairTakenError{UUID: by, EventSourceArn: p.source, FunctionArn: p.function}
}

const (
	guardPrefix = "pair|"
	guardOwner  = "owner"
	guardSince  = "since"
	tombstone   = "aborted" // an item under a mapping's UUID that says its create never completes
)

func (p pair) key() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{catalogKey: &types.AttributeValueMemberS{Value: guardPrefix + p.source + "|" + p.function}}
}

// claimWaits are the pauses a claim allows a guard's owner to complete its own writes before
// fencing them off.
var claimWaits = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}

// claimRounds bounds the reads and writes of one claim.
const claimRounds = 20

// guard is a guard item's content.
type guard struct {
	owner string
	since int64
}

// claim makes id, whose record is about to be written at revision rev, the holder of p, unless
// another mapping holds it (*PairTakenError).
func (c DynamoCatalog) claim(ctx context.Context, p pair, id string, rev int64) error {
	waits := claimWaits
	for range claimRounds {
		err := c.putGuard(ctx, p, guard{id, rev}, nil)
		if !isConditionFailed(err) {
			return err
		}
		g, err := c.readGuard(ctx, p)
		switch {
		case err != nil:
			return err
		case g == nil: // removed meanwhile
			continue
		case g.owner == id: // this mapping's own, from an earlier write
			if g.since >= rev {
				return nil
			}
			if err := c.putGuard(ctx, p, guard{id, rev}, g); !isConditionFailed(err) {
				return err
			}
			continue
		}
		rec, held, pending, err := c.judge(ctx, p, *g)
		switch {
		case err != nil:
			return err
		case held:
			return p.taken(g.owner)
		case pending && len(waits) > 0:
			if err := sleep(ctx, waits[0]); err != nil {
				return err
			}
			waits = waits[1:]
			continue
		case pending:
			if err := c.fence(ctx, g.owner, rec); err != nil && !isConditionFailed(err) {
				return err
			}
			continue // judged again: the owner's record may have landed first
		}
		if err := c.putGuard(ctx, p, guard{id, rev}, g); !isConditionFailed(err) {
			return err
		}
	}
	return fmt.Errorf("claim %s → %s in %s: the pair changed owner %d times", p.source, p.function, c.Table, claimRounds)
}

// judge reads the record of g's owner: held when it has p; else pending when a write of the
// owner's that takes p may still land (rec is then the record it would replace, nil for none).
func (c DynamoCatalog) judge(ctx context.Context, p pair, g guard) (rec *Record, held, pending bool, err error) {
	rec, aborted, err := c.readRecord(ctx, g.owner)
	switch {
	case err != nil:
		return nil, false, false, err
	case rec != nil && pairOf(rec) == p:
		return rec, true, false, nil
	case rec != nil:
		return rec, false, rec.Revision < g.since, nil
	}
	return nil, false, !aborted && g.since == 0, nil
}

// fence makes sure that no write of owner made from rec (nil: its create) lands: a tombstone
// under its UUID, or its record written again one revision on.
func (c DynamoCatalog) fence(ctx context.Context, owner string, rec *Record) error {
	if rec == nil {
		_, err := c.api().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(c.Table),
			Item: map[string]types.AttributeValue{
				catalogKey: &types.AttributeValueMemberS{Value: owner},
				tombstone:  &types.AttributeValueMemberBOOL{Value: true},
			},
			ConditionExpression:      aws.String("attribute_not_exists(#k)"),
			ExpressionAttributeNames: map[string]string{"#k": catalogKey},
		})
		return err
	}
	next := *rec
	next.Revision++
	return c.putRecord(ctx, next)
}

// release removes p's guard if id has held it since before revision before: the record of id
// left p at that revision (math.MaxInt64: the record is gone).
func (c DynamoCatalog) release(ctx context.Context, p pair, id string, before int64) error {
	_, err := c.api().DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(c.Table), Key: p.key(),
		ConditionExpression:      aws.String("#o = :o AND #s < :s"),
		ExpressionAttributeNames: map[string]string{"#o": guardOwner, "#s": guardSince},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":o": &types.AttributeValueMemberS{Value: id}, ":s": &types.AttributeValueMemberN{Value: strconv.FormatInt(before, 10)},
		},
	})
	if isConditionFailed(err) {
		return nil // taken over, or claimed again since
	}
	return err
}

// putGuard writes p's guard g, if the guard is old (nil: if there is none).
func (c DynamoCatalog) putGuard(ctx context.Context, p pair, g guard, old *guard) error {
	item := p.key()
	item[guardOwner] = &types.AttributeValueMemberS{Value: g.owner}
	item[guardSince] = &types.AttributeValueMemberN{Value: strconv.FormatInt(g.since, 10)}
	in := &dynamodb.PutItemInput{TableName: aws.String(c.Table), Item: item}
	if old == nil {
		in.ConditionExpression = aws.String("attribute_not_exists(#k)")
		in.ExpressionAttributeNames = map[string]string{"#k": catalogKey}
	} else {
		in.ConditionExpression = aws.String("#o = :o AND #s = :s")
		in.ExpressionAttributeNames = map[string]string{"#o": guardOwner, "#s": guardSince}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{
			":o": &types.AttributeValueMemberS{Value: old.owner}, ":s": &types.AttributeValueMemberN{Value: strconv.FormatInt(old.since, 10)},
		}
	}
	_, err := c.api().PutItem(ctx, in)
	return err
}

// readGuard reads p's guard, nil when there is none.
func (c DynamoCatalog) readGuard(ctx context.Context, p pair) (*guard, error) {
	out, err := c.api().GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(c.Table), Key: p.key(), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("read the guard of %s → %s from %s: %w", p.source, p.function, c.Table, err)
	}
	if out.Item == nil {
		return nil, nil
	}
	return guardOf(out.Item)
}

func guardOf(item map[string]types.AttributeValue) (*guard, error) {
	o, ok1 := item[guardOwner].(*types.AttributeValueMemberS)
	s, ok2 := item[guardSince].(*types.AttributeValueMemberN)
	if !ok1 || !ok2 {
		return nil, errors.New("a pair's guard without owner or since")
	}
	since, err := strconv.ParseInt(s.Value, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("a pair's guard: since %q: %w", s.Value, err)
	}
	return &guard{owner: o.Value, since: since}, nil
}

// readRecord reads the mapping's record: nil when there is none, and then aborted when a
// tombstone stands for it.
func (c DynamoCatalog) readRecord(ctx context.Context, id string) (rec *Record, aborted bool, err error) {
	out, err := c.api().GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(c.Table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{catalogKey: &types.AttributeValueMemberS{Value: id}}})
	if err != nil {
		return nil, false, fmt.Errorf("read mapping %s from %s: %w", id, c.Table, err)
	}
	if out.Item == nil {
		return nil, false, nil
	}
	v, ok := out.Item[catalogRecord].(*types.AttributeValueMemberS)
	if !ok {
		return nil, true, nil
	}
	var r Record
	if err := json.Unmarshal([]byte(v.Value), &r); err != nil {
		return nil, false, fmt.Errorf("mapping %s in %s: %w", id, c.Table, err)
	}
	return &r, false, nil
}

// backfill writes the guard of each record that has none (records written before guards
// existed); a guard written meanwhile is left alone.
func (c DynamoCatalog) backfill(ctx context.Context, recs []Record, guarded map[pair]bool) error {
	for i := range recs {
		p := pairOf(&recs[i])
		if guarded[p] {
			continue
		}
		if err := c.putGuard(ctx, p, guard{recs[i].Mapping.UUID, recs[i].Revision}, nil); err != nil && !isConditionFailed(err) {
			return fmt.Errorf("guard mapping %s in %s: %w", recs[i].Mapping.UUID, c.Table, err)
		}
		guarded[p] = true
	}
	return nil
}

// pairOfGuard is the pair a guard's key names (an ARN has no '|').
func pairOfGuard(key string) (pair, bool) {
	rest, ok := strings.CutPrefix(key, guardPrefix)
	i := strings.LastIndexByte(rest, '|')
	if !ok || i < 0 {
		return pair{}, false
	}
	return pair{rest[:i], rest[i+1:]}, true
}

func isConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// gone is release's before for a record that was removed.
const gone = math.MaxInt64
