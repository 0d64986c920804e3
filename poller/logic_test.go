package poller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/source"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

func shard(id string, parents ...string) types.Shard {
	s := types.Shard{ShardId: aws.String(id), SequenceNumberRange: &types.SequenceNumberRange{StartingSequenceNumber: aws.String("1")}}
	if len(parents) > 0 {
		s.ParentShardId = aws.String(parents[0])
	}
	if len(parents) > 1 {
		s.AdjacentParentShardId = aws.String(parents[1])
	}
	return s
}

func closed(s types.Shard) types.Shard {
	s.SequenceNumberRange.EndingSequenceNumber = aws.String("9")
	return s
}

func TestResumePosition(t *testing.T) {
	ts := time.Unix(1700000000, 0)
	tests := []struct {
		name     string
		lastRead string
		pr       ShardProgress
		want     position
	}{
		{"new child", "", ShardProgress{}, position{kind: source.TrimHorizon}},
		{"trim horizon", "", ShardProgress{Start: TrimHorizon}, position{kind: source.TrimHorizon}},
		{"latest, stored by an older version", "", ShardProgress{Start: Latest}, position{kind: source.Latest}},
		{"latest resumes where it started", "", ShardProgress{Start: Latest, StartTimestamp: ts.Add(time.Minute)}, position{kind: source.AtTimestamp, timestamp: ts.Add(time.Minute)}},
		{"at timestamp", "", ShardProgress{Start: AtTimestamp}, position{kind: source.AtTimestamp, timestamp: ts}},
		{"checkpoint wins over start", "", ShardProgress{Start: Latest, Checkpoint: "42"}, position{kind: source.AfterSequenceNumber, seq: "42"}},
		{"last read wins over checkpoint", "50", ShardProgress{Checkpoint: "42"}, position{kind: source.AfterSequenceNumber, seq: "50"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := resumePosition(tt.lastRead, tt.pr, ts); got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestInitialProgress(t *testing.T) {
	shards := []types.Shard{closed(shard("0")), shard("1", "0"), shard("2")}
	now := time.Unix(1, 0)
	for _, pos := range []string{TrimHorizon, AtTimestamp} {
		got := initialProgress(kinesissrc.ShardsOf(shards), pos, now)
		for _, id := range []string{"0", "1", "2"} {
			if got[id].Start != pos || got[id].Finished {
				t.Fatalf("%s: shard %s = %+v", pos, id, got[id])
			}
		}
	}
	got := initialProgress(kinesissrc.ShardsOf(shards), Latest, now)
	if !got["0"].Finished {
		t.Fatal("LATEST: a closed shard has nothing newer than now and must count finished")
	}
	if got["1"].Start != Latest || got["2"].Start != Latest {
		t.Fatalf("LATEST: open shards start at their tip: %+v", got)
	}
}

func TestConfigValidation(t *testing.T) {
	base := Config{StartingPosition: TrimHorizon}
	now := time.Now()
	tests := []struct {
		name  string
		mod   func(*Config)
		field string
		text  string
	}{
		{"batch size too big", func(c *Config) { c.BatchSize = 10001 }, "batchSize", "Value '10001' at 'batchSize' failed to satisfy constraint: Member must have value less than or equal to 10000"},
		{"batch size negative", func(c *Config) { c.BatchSize = -1 }, "batchSize", "Member must have value greater than or equal to 1"},
		{"window too long", func(c *Config) { c.MaximumBatchingWindow = 301 * time.Second }, "maximumBatchingWindowInSeconds", "Value '301'"},
		{"no starting position", func(c *Config) { c.StartingPosition = "" }, "StartingPosition", "Value null at 'startingPosition' failed to satisfy constraint: Member must not be null."},
		{"bad starting position", func(c *Config) { c.StartingPosition = "invalid" }, "StartingPosition", "Member must satisfy enum value set: [LATEST, AT_TIMESTAMP, TRIM_HORIZON]"},
		{"timestamp without AT_TIMESTAMP", func(c *Config) { c.StartingPositionTimestamp = now }, "StartingPositionTimestamp", "only allowed with StartingPosition AT_TIMESTAMP"},
		{"AT_TIMESTAMP without timestamp", func(c *Config) { c.StartingPosition = AtTimestamp }, "StartingPositionTimestamp", "Need to specify a timestamp"},
		{"future timestamp", func(c *Config) { c.StartingPosition = AtTimestamp; c.StartingPositionTimestamp = now.Add(time.Hour) }, "StartingPositionTimestamp", "in the future"},
		{"retries too many", func(c *Config) { v := 10001; c.MaximumRetryAttempts = &v }, "maximumRetryAttempts", "less than or equal to 10000"},
		{"retries below -1", func(c *Config) { v := -2; c.MaximumRetryAttempts = &v }, "maximumRetryAttempts", "greater than or equal to -1"},
		{"record age 59", func(c *Config) { v := 59; c.MaximumRecordAgeInSeconds = &v }, "MaximumRecordAgeInSeconds", "must be either -1 (forever) or between 60 and 604800 (inclusive)"},
		{"record age too old", func(c *Config) { v := 604801; c.MaximumRecordAgeInSeconds = &v }, "MaximumRecordAgeInSeconds", "between 60 and 604800"},
		{"parallelization 11", func(c *Config) { c.ParallelizationFactor = 11 }, "parallelizationFactor", "less than or equal to 10"},
		{"tumbling 901", func(c *Config) { c.TumblingWindow = 901 * time.Second }, "tumblingWindowInSeconds", "Value '901'"},
		{"destination not a queue", func(c *Config) { c.OnFailureDestination = "arn:aws:lambda:us-east-1:1:function:f" }, "DestinationConfig", "SQS queue, an SNS topic or an S3 bucket"},
		{"FIFO queue destination", func(c *Config) { c.OnFailureDestination = "arn:aws:sqs:us-east-1:1:failures.fifo" }, "DestinationConfig",
			"arn:aws:sqs:us-east-1:1:failures.fifo is a FIFO queue: it cannot take Lambda's on-failure message, which has no message group id"},
		{"FIFO topic destination", func(c *Config) { c.OnFailureDestination = "arn:aws:sns:us-east-1:1:failures.fifo" }, "DestinationConfig",
			"arn:aws:sns:us-east-1:1:failures.fifo is a FIFO topic"},
		{"on destination failure unknown", func(c *Config) { c.OnDestinationFailure = "retry" }, "OnDestinationFailure", `OnDestinationFailure "retry": want block`},
		{"six filters", func(c *Config) { c.FilterPatterns = make([]string, 6) }, "FilterCriteria", "at most 5"},
		{"negative poll interval", func(c *Config) { c.PollInterval = -time.Second }, "PollInterval", "must be positive"},
		{"negative poll grid", func(c *Config) { c.PollGrid = -time.Millisecond }, "PollGrid", "PollGrid -1ms must be positive"},
		{"poll grid above the default poll interval", func(c *Config) { c.PollGrid = 1001 * time.Millisecond }, "PollGrid", "PollGrid 1.001s must be at most PollInterval 1s"},
		{"poll grid above the poll interval", func(c *Config) { c.PollInterval, c.PollGrid = 20*time.Millisecond, DefaultPollGrid }, "PollGrid", "PollGrid 50ms must be at most PollInterval 20ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			tt.mod(&c)
			_, err := c.withDefaults(now)
			var ve *ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("err = %v, want a ValidationError", err)
			}
			if ve.Field != tt.field || !strings.Contains(ve.Message, tt.text) {
				t.Fatalf("got field %q message %q; want field %q containing %q", ve.Field, ve.Message, tt.field, tt.text)
			}
		})
	}
	c, err := base.withDefaults(now)
	if err != nil {
		t.Fatal(err)
	}
	if c.OnDestinationFailure != DestinationFailureBlock {
		t.Fatalf("OnDestinationFailure default %q, want block", c.OnDestinationFailure)
	}
	if c.BatchSize != 100 || c.PollInterval != time.Second || c.PollGrid != 50*time.Millisecond || c.ShardSyncInterval != time.Minute {
		t.Fatalf("defaults not applied: %+v", c)
	}
}

// TestNewErrorsAreConfigErrors: every error of New, a missing source or dependency and a source
// without a client included, is a *ValidationError naming what is wrong and wraps
// ErrInvalidConfig, as New's doc says.
func TestNewErrorsAreConfigErrors(t *testing.T) {
	cfg := Config{StartingPosition: TrimHorizon}
	const arn = "arn:aws:kinesis:us-east-1:123456789012:stream/s"
	kin, store, inv := kinesissrc.API(fakeKinesisWithoutSubscribe{}), Store(NewMemoryStore()), Invoker(nopInvoker{})
	src, noClient := kinesisSource(kin, arn), kinesisSource(nil, arn)
	tests := []struct {
		name  string
		src   Source
		cfg   Config
		store Store
		inv   Invoker
		field string
	}{
		{"no source", nil, cfg, store, inv, "EventSourceArn"},
		{"no Kinesis client", noClient, cfg, store, inv, "Client"},
		{"no store", src, cfg, nil, inv, "Store"},
		{"no invoker", src, cfg, store, nil, "Invoker"},
		{"nothing", nil, cfg, nil, nil, "EventSourceArn"},
		{"a bad field", src, Config{}, store, inv, "StartingPosition"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.src, tt.cfg, tt.store, tt.inv)
			var ve *ValidationError
			if p != nil || !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &ve) || ve.Field != tt.field {
				t.Fatalf("New = %v, %v; want a ValidationError of field %s wrapping ErrInvalidConfig", p, err, tt.field)
			}
		})
	}
	if _, err := kinesissrc.New(kin, arn, kinesissrc.WithConsumer(arn+"/consumer/c:1")); err == nil {
		t.Fatal("a consumer, and a client that cannot subscribe: accepted")
	}
	if _, err := New(src, cfg, store, inv); err != nil {
		t.Fatalf("New with every dependency: %v", err)
	}
}

// fakeKinesisWithoutSubscribe is a kinesissrc.API that New accepts but never calls.
type fakeKinesisWithoutSubscribe struct{ kinesissrc.API }

type nopInvoker struct{}

func (nopInvoker) Invoke(context.Context, []byte) (invoke.Response, error) {
	return invoke.Response{}, nil
}

// TestCheckStartingPosition: the starting position rule that differs between sources, as data of
// the source's kind: AT_TIMESTAMP of a DynamoDB stream refused with Lambda's recorded message (as
// Validate refuses it), the other positions and a Kinesis stream's AT_TIMESTAMP passed.
func TestCheckStartingPosition(t *testing.T) {
	const ddb = "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/2026-01-01T00:00:00.000"
	err := CheckStartingPosition(ddb, AtTimestamp)
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "StartingPosition" || err.Error() != "Unsupported starting position for arn type: "+ddb {
		t.Fatalf("AT_TIMESTAMP of a DynamoDB stream: %v", err)
	}
	at := Config{StartingPosition: AtTimestamp, StartingPositionTimestamp: time.Unix(1, 0)}
	if err2 := at.Validate(ddb); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("Validate of AT_TIMESTAMP for a DynamoDB stream: %v, want %v", err2, err)
	}
	for _, ok := range []struct{ arn, pos string }{{ddb, TrimHorizon}, {ddb, Latest}, {testStreamARN, AtTimestamp}} {
		if err := CheckStartingPosition(ok.arn, ok.pos); err != nil {
			t.Fatalf("%s at %s: %v", ok.arn, ok.pos, err)
		}
	}
}
