package lease

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A worker's invocation bound (WithFunctionTimeout) lives in an item of its own per epoch, leaseKey
// boundPrefix + worker id + ":" + epoch, {e: epoch, t: milliseconds}: written when the worker
// joins, read only when it is declared dead or replaced by a new incarnation, and deleted when
// it leaves or once its tombstone is removed. One item per worker id would not do: a worker
// restarted under the same id overwrites it while another worker may still have to read the
// previous incarnation's, which then counted as the longest, 900 s. The
// roster item, which every heartbeat rewrites, stays as small as it was (at 100 workers just
// under 3 KB: 3 write units a heartbeat; 4 bytes more per entry made it 4).
const (
	boundPrefix     = "!esm-bound:" // not a shard id, as rosterKey
	attrBoundEpoch  = "e"
	attrBoundMillis = "t"
	// attrBoundLease is the worker's lease duration (ms): the others judge its death by the
	// longer of theirs and its own (DESIGN.md, "The lease duration is published").
	attrBoundLease = "l"
	// attrBoundHorizons marks a worker that publishes its invocation horizon with every heartbeat
	// (horizon.go): its dead epochs are waited for until their last horizon, not for their bound.
	attrBoundHorizons = "r"
)

func boundKey(id string, epoch int64) string {
	return boundPrefix + id + ":" + strconv.FormatInt(epoch, 10)
}

// isBoundItem reports whether a lease table item is a worker's bound, not a lease.
func isBoundItem(it map[string]types.AttributeValue) bool {
	v, ok := it[attrKey].(*types.AttributeValueMemberS)
	return ok && strings.HasPrefix(v.Value, boundPrefix)
}

// writeBound records this worker's bound under the epoch it is about to join with.
func (d *Dynamo) writeBound(ctx context.Context, epoch int64) error {
	item := map[string]types.AttributeValue{
		attrKey: str(boundKey(d.id, epoch)), attrBoundEpoch: num(epoch), attrBoundMillis: num(d.cfg.functionTimeout.Milliseconds()),
		attrBoundLease:    num(d.cfg.leaseDuration.Milliseconds()),
		attrBoundHorizons: &types.AttributeValueMemberBOOL{Value: true},
	}
	if d.cfg.statusAddr != "" {
		item[attrBoundAddr] = str(d.cfg.statusAddr) // see fleet.go
	}
	_, err := d.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: &d.table, Item: item})
	if err != nil {
		return fmt.Errorf("write invocation bound: %w", err)
	}
	return nil
}

// readBound is the bound worker id published for epoch: MaxFunctionTimeout when it published
// none for that epoch (an earlier version, or a worker that died between the two writes of its
// join).
func (d *Dynamo) readBound(ctx context.Context, id string, epoch int64) (time.Duration, error) {
	p, err := d.readPublished(ctx, id, epoch)
	return p.bound, err
}

// published is what a worker's bound item says of one of its epochs.
type published struct {
	bound time.Duration // its invocation bound (MaxFunctionTimeout when not published)
	lease time.Duration // its lease duration (0 when not published: an earlier version)
	// horizons: it publishes its invocation horizon with every heartbeat (false: an earlier
	// version, waited for its bound).
	horizons bool
}

// readPublished reads worker id's bound item of epoch (consistently).
func (d *Dynamo) readPublished(ctx context.Context, id string, epoch int64) (published, error) {
	out, err := d.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: &d.table, Key: key(boundKey(id, epoch)), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return published{}, fmt.Errorf("read invocation bound of %s: %w", id, err)
	}
	p := published{bound: MaxFunctionTimeout}
	if e, ok := out.Item[attrBoundEpoch].(*types.AttributeValueMemberN); !ok || e.Value != strconv.FormatInt(epoch, 10) {
		return p, nil
	}
	if ms, ok := millis(out.Item[attrBoundMillis]); ok {
		p.bound = ms
	}
	if ms, ok := millis(out.Item[attrBoundLease]); ok && ms > 0 {
		p.lease = ms
	}
	h, _ := out.Item[attrBoundHorizons].(*types.AttributeValueMemberBOOL)
	p.horizons = h != nil && h.Value
	return p, nil
}

// millis reads a non-negative number of milliseconds.
func millis(v types.AttributeValue) (time.Duration, bool) {
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	ms, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil || ms < 0 {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// dropBound deletes worker id's bound if it is still that of epoch (a new incarnation's stays).
func (d *Dynamo) dropBound(ctx context.Context, id string, epoch int64) {
	_, err := d.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: &d.table, Key: key(boundKey(id, epoch)),
		ConditionExpression:       aws.String("#e = :e"),
		ExpressionAttributeNames:  map[string]string{"#e": attrBoundEpoch},
		ExpressionAttributeValues: map[string]types.AttributeValue{":e": num(epoch)},
	})
	if err != nil && !isConditionFailed(err) && ctx.Err() == nil {
		d.log.Debug("delete invocation bound failed; it stays until the worker joins again", "worker", id, "err", err)
	}
}

// goneWorker is the worker id and epoch a tombstone key names.
func goneWorker(k string) (id string, epoch int64, ok bool) {
	e, id, ok := strings.Cut(k, ":")
	if !ok {
		return "", 0, false
	}
	epoch, err := strconv.ParseInt(e, 10, 64)
	return id, epoch, err == nil
}
