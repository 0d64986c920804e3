package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/internal/testbed/local"
)

// Source is the kind of stream a run reads.
type Source string

// The sources a run can read.
const (
	// SourceKinesis is a Kinesis stream on kinesis-local, split, merged and rescaled under load.
	SourceKinesis Source = "kinesis"
	// SourceDynamoDB is a DynamoDB table's stream on ddb-local, its shards rotating every few
	// seconds (DynamoDB Streams has no resharding of its own).
	SourceDynamoDB Source = "dynamodb"
)

// ParseSource reads a source's name ("" is Kinesis).
func ParseSource(s string) (Source, error) {
	switch Source(s) {
	case "", SourceKinesis:
		return SourceKinesis, nil
	case SourceDynamoDB:
		return SourceDynamoDB, nil
	}
	return "", fmt.Errorf("source %q: want %s or %s", s, SourceKinesis, SourceDynamoDB)
}

// feed is the stream a run reads: what the workers are pointed at, how records are written to
// it, how its shards change under load, and what the judge learns from it afterwards.
type feed interface {
	// stream is what "esm run --stream" names.
	stream() string
	// service is the stream's service behind each worker's proxy.
	service() Service
	// produce writes records until ctx ends, noting them in r.produced (under r.mu).
	produce(ctx context.Context, r *runner) error
	// changes are the moments the stream's shards change during a load of d from start, in
	// order, with how each happens.
	changes(start time.Time, d time.Duration, rng *rand.Rand) []change
	// settle learns the stream's shards once the workers stopped: the lineage (every shard
	// with its parents) and anything the invocations do not say themselves (a DynamoDB
	// Streams event does not name its shard: invs are filled in place).
	settle(ctx context.Context, invs []Invocation, p *Produced) (map[string][]string, error)
	// verdicts are the feed's own checks, once settled.
	verdicts(invs []Invocation) []Verdict
	// remove deletes the stream.
	remove(ctx context.Context)
}

// change is one moment the stream's shards change: at at, by do (nil: the stream changes by
// itself, as a DynamoDB stream's shards rotate), which says what it did. fault draws, as the run
// reaches the change, the process fault dealt to a worker just before it, mid-invocation (""
// none).
type change struct {
	at    time.Time
	name  string
	do    func(context.Context) (string, error)
	fault func(*rand.Rand) string
}

// kinesisFeed is a Kinesis stream of two shards on kinesis-local.
type kinesisFeed struct {
	kc   *kinesis.Client
	name string
}

func newKinesisFeed(ctx context.Context, cfg Config, name string) (*kinesisFeed, error) {
	awsCfg, err := local.AWSConfig(ctx, "")
	if err != nil {
		return nil, err
	}
	f := &kinesisFeed{kc: local.NewKinesisClient(awsCfg, cfg.KinesisEndpoint), name: name}
	if _, err := local.CreateStream(ctx, f.kc, name, 2); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *kinesisFeed) stream() string   { return f.name }
func (f *kinesisFeed) service() Service { return Kinesis }

func (f *kinesisFeed) remove(ctx context.Context) {
	_, _ = f.kc.DeleteStream(ctx, &kinesis.DeleteStreamInput{StreamName: aws.String(f.name), EnforceConsumerDeletion: aws.Bool(true)})
}

// produce puts one record of each key every 250 ms, the next of a key only once the previous one
// was accepted, so that each key's records are in the stream in order.
func (f *kinesisFeed) produce(ctx context.Context, r *runner) error {
	keys := make([]string, r.cfg.Keys)
	for i := range keys {
		keys[i] = fmt.Sprintf("key%02d", i)
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		r.mu.Lock()
		in := &kinesis.PutRecordsInput{StreamName: aws.String(f.name)}
		for _, k := range keys {
			in.Records = append(in.Records, types.PutRecordsRequestEntry{PartitionKey: aws.String(k),
				Data: []byte(k + ":" + strconv.Itoa(r.produced.Written[k]))})
		}
		r.mu.Unlock()
		out, err := f.kc.PutRecords(ctx, in)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			r.cfg.Logf("put records: %v (retrying)", err)
			continue
		}
		now := time.Now()
		r.mu.Lock()
		for i, e := range out.Records {
			if e.ErrorCode != nil {
				continue
			}
			r.produced.Written[keys[i]]++
			if s := aws.ToString(e.ShardId); r.produced.FirstPut[s].IsZero() {
				r.produced.FirstPut[s] = now
			}
		}
		r.mu.Unlock()
	}
}

// changes split, merge and rescale the stream under load: a split at 15% of the duration, a
// merge at 35%, UpdateShardCount to 4 at 55% and to 2 at 75%. Half the time a worker is paused
// past its lease (mid-invocation) just before the change, so that the others finish (and clean
// up) the parents while it sleeps.
func (f *kinesisFeed) changes(start time.Time, d time.Duration, rng *rand.Rand) []change {
	at := func(share float64) time.Time { return start.Add(time.Duration(share * float64(d))) }
	steps := []change{
		{at: at(0.15), name: "split", do: func(ctx context.Context) (string, error) {
			open, err := local.OpenShards(ctx, f.kc, f.name)
			if err != nil || len(open) == 0 {
				return "", cmp.Or(err, errors.New("no open shard"))
			}
			id := aws.ToString(open[rng.IntN(len(open))].ShardId)
			return "split " + id, local.SplitInHalf(ctx, f.kc, f.name, id)
		}},
		{at: at(0.35), name: "merge", do: func(ctx context.Context) (string, error) {
			a, b, err := local.MergeFirstAdjacent(ctx, f.kc, f.name)
			return "merge " + a + " " + b, err
		}},
		{at: at(0.55), name: "update", do: func(ctx context.Context) (string, error) {
			return "UpdateShardCount 4", local.Resize(ctx, f.kc, f.name, 4)
		}},
		{at: at(0.75), name: "update", do: func(ctx context.Context) (string, error) {
			return "UpdateShardCount 2", local.Resize(ctx, f.kc, f.name, 2)
		}},
	}
	for i := range steps {
		steps[i].do = f.counted(steps[i].do)
		steps[i].fault = func(rng *rand.Rand) string {
			if rng.IntN(2) == 0 {
				return "sigstop across a reshard"
			}
			return ""
		}
	}
	return steps
}

// counted adds to what do says the open shards before and after it.
func (f *kinesisFeed) counted(do func(context.Context) (string, error)) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		before, _ := local.OpenShards(ctx, f.kc, f.name)
		what, err := do(ctx)
		if err != nil {
			return what, err
		}
		after, _ := local.OpenShards(ctx, f.kc, f.name)
		return fmt.Sprintf("%s: %d → %d open shards", what, len(before), len(after)), nil
	}
}

func (f *kinesisFeed) settle(ctx context.Context, _ []Invocation, _ *Produced) (map[string][]string, error) {
	return local.Lineage(ctx, f.kc, f.name)
}

func (f *kinesisFeed) verdicts([]Invocation) []Verdict { return nil }
