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

// A worker's invocation bound (WithFunctionTimeout) lives in an item of its own, leaseKey
// boundPrefix + worker id, {e: epoch, t: milliseconds}: written when the worker joins, read only
// when it is declared dead or replaced by a new incarnation, and deleted when it leaves. The
// roster item, which every heartbeat rewrites, stays as small as it was (at 100 workers just
// under 3 KB: 3 write units a heartbeat; 4 bytes more per entry made it 4).
const (
	boundPrefix     = "!esm-bound:" // not a shard id, as rosterKey
	attrBoundEpoch  = "e"
	attrBoundMillis = "t"
)

func boundKey(id string) string { return boundPrefix + id }

// isBoundItem reports whether a lease table item is a worker's bound, not a lease.
func isBoundItem(it map[string]types.AttributeValue) bool {
	v, ok := it[attrKey].(*types.AttributeValueMemberS)
	return ok && strings.HasPrefix(v.Value, boundPrefix)
}

// writeBound records this worker's bound under the epoch it is about to join with.
func (d *Dynamo) writeBound(ctx context.Context, epoch int64) error {
	_, err := d.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: &d.table, Item: map[string]types.AttributeValue{
		attrKey: str(boundKey(d.id)), attrBoundEpoch: num(epoch), attrBoundMillis: num(d.cfg.functionTimeout.Milliseconds()),
	}})
	if err != nil {
		return fmt.Errorf("write invocation bound: %w", err)
	}
	return nil
}

// readBound is the bound worker id published for epoch: MaxFunctionTimeout when it published
// none for that epoch (an earlier version, or a worker that died between the two writes of its
// join).
func (d *Dynamo) readBound(ctx context.Context, id string, epoch int64) (time.Duration, error) {
	out, err := d.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: &d.table, Key: key(boundKey(id)), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return 0, fmt.Errorf("read invocation bound of %s: %w", id, err)
	}
	e, eok := out.Item[attrBoundEpoch].(*types.AttributeValueMemberN)
	t, tok := out.Item[attrBoundMillis].(*types.AttributeValueMemberN)
	if !eok || !tok || e.Value != strconv.FormatInt(epoch, 10) {
		return MaxFunctionTimeout, nil
	}
	ms, err := strconv.ParseInt(t.Value, 10, 64)
	if err != nil || ms < 0 {
		return MaxFunctionTimeout, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// dropBound deletes worker id's bound if it is still that of epoch (a new incarnation's stays).
func (d *Dynamo) dropBound(ctx context.Context, id string, epoch int64) {
	_, err := d.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: &d.table, Key: key(boundKey(id)),
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
