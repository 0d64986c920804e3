package lease

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// What the table tells of the fleet, for the live page and esm status (see DESIGN.md, "The
// fleet's view"): each worker's status address, in the bound item it writes at each join
// (nothing more to write), and a blocked shard's mark on its lease item, written only when the
// shard becomes blocked or stops being blocked.
const (
	// attrBoundAddr is the worker's status address (HOST:PORT of its /live), in its bound item.
	attrBoundAddr = "a"
	// attrBlocked is a blocked shard's mark: {o: owner, e: owner's epoch, s: blocked since, c:
	// the cause, t: the cause's time, n: attempts}. It counts only while the item names that
	// owner under that epoch (a taker inherits no stale mark).
	attrBlocked = "esmBlocked"
)

// WithStatusAddr publishes where this worker serves its status (HOST:PORT of /live and
// /live/state.json) in the bound item it writes at each join: the live pages of the other
// workers and esm status find it there. Default: none published.
func WithStatusAddr(addr string) Option {
	return func(c *dynamoConfig) { c.statusAddr = addr }
}

// Worker is a member of a lease table's roster.
type Worker struct {
	ID      string `json:"id"`
	Epoch   int64  `json:"epoch"`
	Addr    string `json:"addr,omitempty"` // its status address, when it publishes one
	Leaving bool   `json:"leaving,omitempty"`
}

// Blocked is a blocked shard's mark in the lease table.
type Blocked struct {
	Owner    string
	Since    time.Time // the failing batch's first failure
	Cause    string
	CauseAt  time.Time
	Attempts int
}

// Fleet is what a lease table says of the workers sharing a mapping and of its shards.
type Fleet struct {
	Workers []Worker
	Leases  []Lease
	// Blocked are the shards whose owner marked them blocked, by shard id.
	Blocked map[string]Blocked
}

// ReadFleet reads the whole table once (an eventually consistent scan: about 0.5 read unit per
// 4 KB, 1,000 shards ≈ 40 units): the roster, each worker's status address, the leases and the
// blocked marks that still count.
func ReadFleet(ctx context.Context, api DynamoAPI, table string) (Fleet, error) {
	f := Fleet{Blocked: map[string]Blocked{}}
	api = timed(api) // every call with its deadline (calls.go)
	addrs := map[string]string{}
	var roster map[string]member
	in := &dynamodb.ScanInput{TableName: &table}
	for {
		res, err := api.Scan(ctx, in)
		if err != nil {
			return f, fmt.Errorf("scan lease table %s: %w", table, err)
		}
		for _, it := range res.Items {
			switch {
			case isRoster(it):
				if roster, _, err = decodeRoster(it); err != nil {
					return f, fmt.Errorf("lease table %s: %w", table, err)
				}
			case isBoundItem(it):
				k, addr := boundAddr(it)
				addrs[k] = addr
			case isMappingItem(it):
			default:
				l, err := decodeLease(it)
				if err != nil {
					return f, fmt.Errorf("lease table %s: %w", table, err)
				}
				f.Leases = append(f.Leases, l)
				if b, ok := blockedMark(it, l); ok {
					f.Blocked[l.ShardID] = b
				}
			}
		}
		if len(res.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
	slices.SortFunc(f.Leases, func(a, b Lease) int { return strings.Compare(a.ShardID, b.ShardID) })
	f.Workers = workersOf(roster, addrs)
	return f, nil
}

// WorkerReader reads a lease table's workers and their status addresses: the roster (one
// eventually consistent read of a few KB) and the bound items of epochs it has not seen yet (an
// epoch's item never changes). Not safe for concurrent use.
type WorkerReader struct {
	api   DynamoAPI
	table string
	addrs map[string]string // by boundKey
}

// NewWorkerReader returns a WorkerReader of table.
func NewWorkerReader(api DynamoAPI, table string) *WorkerReader {
	return &WorkerReader{api: timed(api), table: table, addrs: map[string]string{}}
}

// Workers reads the roster's members with their status addresses.
func (r *WorkerReader) Workers(ctx context.Context) ([]Worker, error) {
	out, err := r.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: &r.table, Key: key(rosterKey)})
	if err != nil {
		return nil, fmt.Errorf("read roster of %s: %w", r.table, err)
	}
	roster, _, err := decodeRoster(out.Item)
	if err != nil {
		return nil, fmt.Errorf("lease table %s: %w", r.table, err)
	}
	var missing []map[string]types.AttributeValue
	live := map[string]bool{}
	for id, m := range roster {
		k := boundKey(id, m.epoch)
		live[k] = true
		if _, ok := r.addrs[k]; !ok && len(missing) < 100 { // BatchGetItem's limit; the rest next time
			missing = append(missing, key(k))
		}
	}
	for k := range r.addrs { // forget departed epochs
		if !live[k] {
			delete(r.addrs, k)
		}
	}
	if len(missing) > 0 {
		res, err := r.api.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
			r.table: {Keys: missing}}})
		if err != nil {
			return nil, fmt.Errorf("read status addresses in %s: %w", r.table, err)
		}
		for _, it := range res.Responses[r.table] {
			k, addr := boundAddr(it)
			r.addrs[k] = addr
		}
	}
	return workersOf(roster, r.addrs), nil
}

// boundAddr is a bound item's key and the status address it publishes ("" when none).
func boundAddr(it map[string]types.AttributeValue) (k, addr string) {
	if v, ok := it[attrKey].(*types.AttributeValueMemberS); ok {
		k = v.Value
	}
	if v, ok := it[attrBoundAddr].(*types.AttributeValueMemberS); ok {
		addr = v.Value
	}
	return k, addr
}

// workersOf lists the roster's members, by id, with their epochs' status addresses.
func workersOf(roster map[string]member, addrs map[string]string) []Worker {
	out := make([]Worker, 0, len(roster))
	for id, m := range roster {
		out = append(out, Worker{ID: id, Epoch: m.epoch, Addr: addrs[boundKey(id, m.epoch)], Leaving: m.leaving})
	}
	slices.SortFunc(out, func(a, b Worker) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// blockedMark is the item's blocked mark, when there is one and it is its owner's under its
// current epoch.
func blockedMark(it map[string]types.AttributeValue, l Lease) (Blocked, bool) {
	m, ok := it[attrBlocked].(*types.AttributeValueMemberM)
	if !ok || l.Owner == "" {
		return Blocked{}, false
	}
	s := func(k string) string {
		if v, ok := m.Value[k].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	n := func(k string) int64 {
		if v, ok := m.Value[k].(*types.AttributeValueMemberN); ok {
			x, _ := strconv.ParseInt(v.Value, 10, 64)
			return x
		}
		return 0
	}
	if s("o") != l.Owner || n("e") != l.OwnerEpoch {
		return Blocked{}, false
	}
	b := Blocked{Owner: l.Owner, Cause: s("c"), Attempts: int(n("n"))}
	b.Since = time.UnixMilli(n("s")).UTC()
	if t := n("t"); t > 0 {
		b.CauseAt = time.UnixMilli(t).UTC()
	}
	return b, true
}

// markBlocked writes (b != nil) or removes (b == nil) the shard's blocked mark, on the
// condition that this worker owns the lease under its current epoch; a lease it no longer holds
// is left alone.
func (d *Dynamo) markBlocked(ctx context.Context, shardID string, b *Blocked) error {
	d.mu.Lock()
	epoch, joined := d.me.epoch, d.me.joined
	d.mu.Unlock()
	if !joined {
		return nil
	}
	in := &dynamodb.UpdateItemInput{
		TableName: &d.table, Key: key(shardID),
		ConditionExpression:       aws.String("#o = :me AND #oe = :e"),
		ExpressionAttributeNames:  map[string]string{"#o": attrOwner, "#oe": attrOwnerEpoch, "#b": attrBlocked},
		ExpressionAttributeValues: map[string]types.AttributeValue{":me": str(d.id), ":e": num(epoch)},
		UpdateExpression:          aws.String("REMOVE #b"),
	}
	if b != nil {
		mark := map[string]types.AttributeValue{"o": str(d.id), "e": num(epoch), "s": num(b.Since.UnixMilli()),
			"c": str(b.Cause), "n": num(int64(b.Attempts))}
		if !b.CauseAt.IsZero() {
			mark["t"] = num(b.CauseAt.UnixMilli())
		}
		in.UpdateExpression = aws.String("SET #b = :b")
		in.ExpressionAttributeValues[":b"] = &types.AttributeValueMemberM{Value: mark}
	}
	_, err := d.api.UpdateItem(ctx, in)
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("mark shard %s blocked: %w", shardID, err)
	}
	return nil
}
