package lease

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/kinesis-esm/esm/internal/ddbcall"
)

// Every DynamoDB call of a Dynamo goes through timedAPI, which gives it a deadline of its own
// (DESIGN.md, "Every call has a deadline"): no call the SDK leaves unanswered (a connection a
// middlebox black-holes) holds the heartbeat's turn, a lease's lock or a claim cycle for longer.
// Reads that ran out of their time are tried again at once; writes are left to the protocol:
// a heartbeat is retried 250 ms later with a new value, a conditional take, hand-over or
// release after a read at the next cycle, a checkpoint (conditional on the counter, so a retry
// after a lost answer passes again) by the poller's retry while the lease is held.

// callPolicy is how long each kind of call may take.
type callPolicy struct {
	item       time.Duration // the heartbeat, joins, roster reads, takes, creates, hand-overs, releases, bounds, deletions
	checkpoint time.Duration // a checkpoint (Save)
	page       time.Duration // one page of a Scan
}

// minItemCall keeps short leases (tests, simulations) from cutting off ordinary calls.
const minItemCall = 300 * time.Millisecond

// checkpointCall bounds a checkpoint: a few seconds, whatever the lease.
const checkpointCall = 3 * time.Second

// policyFor is the deadlines of a worker whose lease duration is l: about l/10 for the calls the
// heartbeat and the claim cycle wait on (a heartbeat slower than that does not count as healthy
// either, and a read slower than that counts from its return), a few seconds for a checkpoint,
// ddbcall.Page for each page of a scan.
func policyFor(l time.Duration) callPolicy {
	return callPolicy{item: max(l/10, minItemCall), checkpoint: max(checkpointCall, l/10), page: ddbcall.Page}
}

type callKindKey struct{}

// asCheckpoint marks ctx's calls as a checkpoint's.
func asCheckpoint(ctx context.Context) context.Context {
	return context.WithValue(ctx, callKindKey{}, true)
}

// timedAPI is a DynamoAPI whose every call has its deadline from the policy.
type timedAPI struct {
	api DynamoAPI
	p   callPolicy
	// writes is how many times a write that ran out of its time is tried in all: 1 (the
	// protocol's writes, left to the protocol), or startupAttempts for a start-up call's
	// idempotent write (startup).
	writes int
}

// startupAttempts is how many times a start-up call (ClaimTable, MappingUUID) that ran out of
// its time is tried: each of those writes is idempotent (SET if_not_exists), and a worker whose
// start-up call got no answer once exited with status 1 (make chaos: a dropped answer at start).
const startupAttempts = 5

// startup wraps the client of a start-up call: ddbcall.Item for each attempt (whatever the
// lease duration: nothing waits on it but the start), and a write that ran out of its time
// tried again, up to startupAttempts in all.
func startup(api DynamoAPI) DynamoAPI {
	if t, ok := api.(timedAPI); ok {
		api = t.api
	}
	return timedAPI{api: api, p: callPolicy{item: ddbcall.Item, checkpoint: ddbcall.Item, page: ddbcall.Page}, writes: startupAttempts}
}

// writeAttempts is how many times t tries a write that ran out of its time.
func (t timedAPI) writeAttempts() int { return max(1, t.writes) }

func (t timedAPI) write(ctx context.Context) time.Duration {
	if cp, _ := ctx.Value(callKindKey{}).(bool); cp {
		return t.p.checkpoint
	}
	return t.p.item
}

func (t timedAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return ddbcall.Call(ctx, t.p.item, ddbcall.ReadAttempts, func(ctx context.Context) (*dynamodb.GetItemOutput, error) {
		return t.api.GetItem(ctx, in, o...)
	})
}

func (t timedAPI) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return ddbcall.Call(ctx, t.p.item, ddbcall.ReadAttempts, func(ctx context.Context) (*dynamodb.BatchGetItemOutput, error) {
		return t.api.BatchGetItem(ctx, in, o...)
	})
}

func (t timedAPI) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return ddbcall.Call(ctx, t.p.page, ddbcall.ReadAttempts, func(ctx context.Context) (*dynamodb.ScanOutput, error) {
		return t.api.Scan(ctx, in, o...)
	})
}

func (t timedAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return ddbcall.Call(ctx, t.write(ctx), t.writeAttempts(), func(ctx context.Context) (*dynamodb.PutItemOutput, error) {
		return t.api.PutItem(ctx, in, o...)
	})
}

func (t timedAPI) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return ddbcall.Call(ctx, t.write(ctx), t.writeAttempts(), func(ctx context.Context) (*dynamodb.UpdateItemOutput, error) {
		return t.api.UpdateItem(ctx, in, o...)
	})
}

func (t timedAPI) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return ddbcall.Call(ctx, t.write(ctx), t.writeAttempts(), func(ctx context.Context) (*dynamodb.DeleteItemOutput, error) {
		return t.api.DeleteItem(ctx, in, o...)
	})
}

// timed wraps a client given to one of the package's functions (ListLeases, MappingUUID) in
// the default lease duration's policy; a timedAPI already is.
func timed(api DynamoAPI) DynamoAPI {
	if t, ok := api.(timedAPI); ok {
		return t
	}
	return timedAPI{api: api, p: policyFor(DefaultLeaseDuration)}
}
