package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/verify"
)

// ddbFeed is a DynamoDB table's stream (NEW_AND_OLD_IMAGES) on ddb-local, whose shards rotate
// every cfg.Rotate: each open shard closes and a child opens with it as its parent, which is how
// a DynamoDB stream's lineage grows (it has no splits or merges of its own).
type ddbFeed struct {
	ddb    *dynamodb.Client
	st     *dynamodbstreams.Client
	table  string
	arn    string
	rotate time.Duration
	// opened is when the table's stream opened its first shards (taken just before
	// CreateTable was sent): ddb-local rotates them at opened plus whole periods.
	opened time.Time
	// p writes the changes; only produce uses it until the load ended.
	p *verify.DDBProducer
	// putAt is when each change ("key:n") was written, under the runner's mu: a shard's first
	// put is known only once its records' shards are (settle).
	putAt map[string]time.Time
	// shards are the stream's shards as settle listed them, and shardOf the shard of each of
	// its records by SequenceNumber.
	shards  []verify.DDBShard
	shardOf map[string]string
}

func newDDBFeed(ctx context.Context, cfg Config, name string, seed uint64) (*ddbFeed, error) {
	awsCfg, err := local.AWSConfig(ctx, "")
	if err != nil {
		return nil, err
	}
	f := &ddbFeed{table: name, rotate: cfg.Rotate, p: verify.NewDDBProducer(name, cfg.Keys, seed), putAt: map[string]time.Time{}}
	f.ddb, f.st = local.DDBClients(awsCfg, cfg.DDBStreamsEndpoint)
	f.opened = time.Now()
	if f.arn, err = local.CreateStreamTable(ctx, f.ddb, name, types.StreamViewTypeNewAndOldImages); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *ddbFeed) stream() string   { return f.arn }
func (f *ddbFeed) service() Service { return DynamoDBStreams }

func (f *ddbFeed) remove(ctx context.Context) {
	_, _ = f.ddb.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(f.table)})
}

// produce makes cfg.Keys changes every 250 ms over cfg.Keys keys (puts, updates, deletes, and
// now and then a BatchWriteItem or TransactWriteItems of two: verify.DDBProducer), each write
// once the previous one was accepted, so that each key's changes are in the stream in order.
// Every item carries its key's change counter ("v": "key:n"). A write that fails ends the run:
// whether it took effect is unknown, and the changes the judge expects would be too.
func (f *ddbFeed) produce(ctx context.Context, r *runner) error {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		// The writes of a tick are not cut off by the end of the load.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err := f.p.Write(wctx, f.ddb, r.cfg.Keys)
		cancel()
		now := time.Now()
		r.mu.Lock()
		for k, cs := range f.p.Want {
			for n := r.produced.Written[k]; n < len(cs); n++ {
				f.putAt[k+":"+strconv.Itoa(n)] = now
			}
			r.produced.Written[k] = len(cs)
		}
		r.mu.Unlock()
		if err != nil {
			return fmt.Errorf("write to table %s: %w", f.table, err)
		}
	}
}

// changes are the rotations next after 15%, 35%, 55% and 75% of the load, each with a worker
// killed (the first and third) or paused past its lease (the others) mid-invocation just before
// it: the others finish the parents while it is gone.
func (f *ddbFeed) changes(start time.Time, d time.Duration, _ *rand.Rand) []change {
	var out []change
	for i, share := range []float64{0.15, 0.35, 0.55, 0.75} {
		t := start.Add(time.Duration(share * float64(d)))
		periods := (t.Sub(f.opened) + f.rotate - 1) / f.rotate
		fault := "sigkill across a rotation"
		if i%2 == 1 {
			fault = "sigstop across a rotation"
		}
		out = append(out, change{at: f.opened.Add(periods * f.rotate), name: "rotation", fault: func(*rand.Rand) string { return fault }})
	}
	return out
}

// settle reads the stream's shards and records, names the shard of each invocation by its
// first record's (a DynamoDB Streams event does not name it), and notes each shard's first put:
// the earliest write of a change delivered from it. An invocation whose first record is in no
// shard is left with none ("": verdicts says so).
func (f *ddbFeed) settle(ctx context.Context, invs []Invocation, p *Produced) (map[string][]string, error) {
	shards, of, err := verify.ReadDDBShards(ctx, f.st, f.arn)
	if err != nil {
		return nil, fmt.Errorf("read the stream %s: %w", f.arn, err)
	}
	f.shards, f.shardOf = shards, of
	lineage := make(map[string][]string, len(shards))
	for _, s := range shards {
		lineage[s.ID] = nil
		if s.Parent != "" {
			lineage[s.ID] = []string{s.Parent}
		}
	}
	for i := range invs {
		for j, rec := range invs[i].Records {
			shard := of[rec.Sequence]
			if j == 0 {
				invs[i].Shard = shard
			}
			if t, ok := f.putAt[rec.Data]; ok && shard != "" && (p.FirstPut[shard].IsZero() || t.Before(p.FirstPut[shard])) {
				p.FirstPut[shard] = t
			}
		}
	}
	return lineage, nil
}

// verdicts: each invocation's records come from one shard, each change is delivered as AWS
// sends it (eventName, keys, old and new images of the write: verify.DDBRecords), judged on first
// deliveries in the order of the invocations' starts, and the stream holds as many records as
// changes were written.
func (f *ddbFeed) verdicts(invs []Invocation) []Verdict {
	mixed := []string{}
	var got []events.DynamoDBEventRecord
	sorted := slices.Clone(invs)
	slices.SortStableFunc(sorted, func(a, b Invocation) int { return a.Start.Compare(b.Start) })
	for _, inv := range sorted {
		for _, rec := range inv.Records {
			if rec.Change != nil {
				got = append(got, *rec.Change)
			}
			if s := f.shardOf[rec.Sequence]; s == "" || s != inv.Shard {
				mixed = append(mixed, fmt.Sprintf("%s (in %q) in an invocation of %q on %s at %s", rec.Sequence, s, inv.Shard, inv.Worker, inv.Start.Format(timeFmt)))
				break
			}
		}
	}
	one := Verdict{Name: "each invocation holds one shard's records", OK: len(mixed) == 0 && len(invs) > 0,
		Detail: fmt.Sprintf("%d invocations over %d shards", len(invs), len(f.shards))}
	if len(mixed) > 0 {
		one.Detail += fmt.Sprintf("; %d invocations with a record of another shard or of none, e.g. %s", len(mixed), strings.Join(mixed[:min(maxShown, len(mixed))], "; "))
	}
	shape := verify.DDBRecords(got, f.p.Want)[2]
	// The stream itself holds each change once: the producer's writes are what the judge
	// expects (a write applied twice or lost would fail the verdicts above without esm's fault).
	once := Verdict{Name: "the stream holds each change written once", OK: len(f.shardOf) == f.p.Total() && len(f.shardOf) > 0,
		Detail: fmt.Sprintf("%d records in the stream, %d changes written", len(f.shardOf), f.p.Total())}
	return []Verdict{one, {Name: "changes as AWS sends them", OK: shape.OK && len(got) > 0, Detail: shape.Detail}, once}
}

// ddbRecord is the chaos record of one DynamoDB Streams record: its key (the item's "k"), and its
// data "key:n", n the key's change counter: the new image's "v" for an INSERT or MODIFY, one more
// than the old image's for a REMOVE (the producer's items carry "v": "key:n", n the change that
// wrote them). A record that is not the producer's has no data.
func ddbRecord(rec events.DynamoDBEventRecord) Record {
	c := rec.Change
	out := Record{Sequence: c.SequenceNumber, Change: &rec}
	if k, ok := c.Keys["k"]; ok && k.DataType() == events.DataTypeString {
		out.Key = k.String()
	}
	img, next := c.NewImage, 0
	if rec.EventName == "REMOVE" {
		img, next = c.OldImage, 1
	}
	v, ok := img["v"]
	if !ok || v.DataType() != events.DataTypeString {
		return out
	}
	key, n, ok := parseData(v.String())
	if !ok || key != out.Key {
		return out
	}
	out.Data = key + ":" + strconv.Itoa(n+next)
	return out
}
