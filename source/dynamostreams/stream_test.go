package dynamostreams

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go"

	"github.com/kinesis-esm/esm/poller"
)

const testStream = "arn:aws:dynamodb:us-east-1:123456789012:table/orders/stream/2026-12-07T00:00:00.000"

// stubAPI answers DescribeStream from shards (honouring Limit, ExclusiveStartShardId and
// ShardFilter), GetShardIterator and GetRecords from the functions set, and records the calls.
type stubAPI struct {
	shards    []types.Shard
	describes []*dynamodbstreams.DescribeStreamInput
	iterator  func(*dynamodbstreams.GetShardIteratorInput) (*dynamodbstreams.GetShardIteratorOutput, error)
	records   func(*dynamodbstreams.GetRecordsInput) (*dynamodbstreams.GetRecordsOutput, error)
	err       error // DescribeStream's
}

func (s *stubAPI) DescribeStream(_ context.Context, in *dynamodbstreams.DescribeStreamInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	s.describes = append(s.describes, in)
	if s.err != nil {
		return nil, s.err
	}
	var match []types.Shard
	for _, sh := range s.shards {
		if f := in.ShardFilter; f != nil && aws.ToString(sh.ParentShardId) != aws.ToString(f.ShardId) {
			continue
		}
		match = append(match, sh)
	}
	start := 0
	if in.ExclusiveStartShardId != nil {
		for i, sh := range match {
			if *sh.ShardId == *in.ExclusiveStartShardId {
				start = i + 1
			}
		}
	}
	end := min(start+int(aws.ToInt32(in.Limit)), len(match))
	d := &types.StreamDescription{StreamArn: in.StreamArn, Shards: match[start:end]}
	if end < len(match) {
		d.LastEvaluatedShardId = match[end-1].ShardId
	}
	return &dynamodbstreams.DescribeStreamOutput{StreamDescription: d}, nil
}

func (s *stubAPI) GetShardIterator(_ context.Context, in *dynamodbstreams.GetShardIteratorInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	return s.iterator(in)
}

func (s *stubAPI) GetRecords(_ context.Context, in *dynamodbstreams.GetRecordsInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	return s.records(in)
}

func shard(id, parent, end string) types.Shard {
	s := types.Shard{ShardId: aws.String(id), SequenceNumberRange: &types.SequenceNumberRange{StartingSequenceNumber: aws.String("100")}}
	if parent != "" {
		s.ParentShardId = aws.String(parent)
	}
	if end != "" {
		s.SequenceNumberRange.EndingSequenceNumber = aws.String(end)
	}
	return s
}

// TestListShardsPages: 250 shards come in three pages of at most 100, each asked after the last
// shard of the one before; every shard keeps its single parent and whether it is closed.
func TestListShardsPages(t *testing.T) {
	api := &stubAPI{}
	for i := range 250 {
		parent, end := "", "900"
		if i > 0 {
			parent = fmt.Sprintf("shardId-%03d", i-1)
		}
		if i == 249 {
			end = ""
		}
		api.shards = append(api.shards, shard(fmt.Sprintf("shardId-%03d", i), parent, end))
	}
	got, err := ListShards(context.Background(), api, testStream)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 250 || got[249].Closed() || !got[0].Closed() || got[0].Parent != "" || got[137].Parent != "shardId-136" || got[137].End != "900" {
		t.Fatalf("listed %d shards: first %+v, 137th %+v, last %+v", len(got), got[0], got[137], got[len(got)-1])
	}
	if len(api.describes) != 3 {
		t.Fatalf("%d DescribeStream calls, want 3", len(api.describes))
	}
	for i, in := range api.describes {
		wantStart := map[int]string{1: "shardId-099", 2: "shardId-199"}[i]
		if aws.ToInt32(in.Limit) != 100 || aws.ToString(in.ExclusiveStartShardId) != wantStart || aws.ToString(in.StreamArn) != testStream || in.ShardFilter != nil {
			t.Fatalf("call %d: limit %d, start %q, stream %q, filter %v", i, aws.ToInt32(in.Limit), aws.ToString(in.ExclusiveStartShardId), aws.ToString(in.StreamArn), in.ShardFilter)
		}
	}
}

// TestChildrenFilter: a closed shard's children are asked with ShardFilter CHILD_SHARDS.
func TestChildrenFilter(t *testing.T) {
	api := &stubAPI{shards: []types.Shard{shard("a", "", "200"), shard("b", "a", ""), shard("c", "", "")}}
	got, err := Children(context.Background(), api, testStream, "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "b" || got[0].Parent != "a" {
		t.Fatalf("children of a: %+v", got)
	}
	f := api.describes[0].ShardFilter
	if f == nil || f.Type != types.ShardFilterTypeChildShards || aws.ToString(f.ShardId) != "a" {
		t.Fatalf("filter %+v, want CHILD_SHARDS of a", f)
	}
}

func TestListShardsStreamNotFound(t *testing.T) {
	api := &stubAPI{err: &types.ResourceNotFoundException{Message: aws.String("Requested resource not found")}}
	if _, err := ListShards(context.Background(), api, testStream); !errors.Is(err, poller.ErrStreamNotFound) || !strings.Contains(err.Error(), testStream) {
		t.Fatalf("err %v, want ErrStreamNotFound naming the stream", err)
	}
}

// TestReadEndsClosedShard: a null NextShardIterator ends the shard; an empty answer with an
// iterator does not. The limit is capped at 1,000.
func TestReadEndsClosedShard(t *testing.T) {
	var limits []int32
	next := aws.String("it-2")
	api := &stubAPI{records: func(in *dynamodbstreams.GetRecordsInput) (*dynamodbstreams.GetRecordsOutput, error) {
		limits = append(limits, aws.ToInt32(in.Limit))
		return &dynamodbstreams.GetRecordsOutput{NextShardIterator: next}, nil
	}}
	b, err := Read(context.Background(), api, "it-1", 10000)
	if err != nil || b.Ended || b.Next != "it-2" {
		t.Fatalf("open shard: %+v, %v", b, err)
	}
	next = nil
	if b, err = Read(context.Background(), api, "it-2", 7); err != nil || !b.Ended {
		t.Fatalf("closed shard at its end: %+v, %v", b, err)
	}
	if limits[0] != 1000 || limits[1] != 7 {
		t.Fatalf("limits %v, want [1000 7]", limits)
	}
}

// TestClassify: each exception of DynamoDB Streams is the condition the reader acts on, kept in
// the chain; others are transient.
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err  error
		want error
	}{
		{&types.LimitExceededException{}, ErrThrottled},
		{&types.ExpiredIteratorException{}, ErrExpiredIterator},
		{&types.TrimmedDataAccessException{}, ErrTrimmed},
		{&types.ResourceNotFoundException{}, ErrShardGone},
		{&smithy.GenericAPIError{Code: "ValidationException", Message: "Invalid SequenceNumber"}, ErrInvalidPosition},
		{&types.InternalServerError{}, nil},
		{errors.New("connection reset"), nil},
	} {
		api := &stubAPI{
			iterator: func(*dynamodbstreams.GetShardIteratorInput) (*dynamodbstreams.GetShardIteratorOutput, error) {
				return nil, c.err
			},
			records: func(*dynamodbstreams.GetRecordsInput) (*dynamodbstreams.GetRecordsOutput, error) { return nil, c.err },
		}
		_, openErr := Open(context.Background(), api, testStream, "s", Position{Kind: types.ShardIteratorTypeTrimHorizon})
		_, readErr := Read(context.Background(), api, "it", 1)
		for _, err := range []error{openErr, readErr} {
			if !errors.Is(err, c.err) {
				t.Fatalf("%T: %v does not keep the cause", c.err, err)
			}
			for _, s := range []error{ErrThrottled, ErrExpiredIterator, ErrTrimmed, ErrShardGone, ErrInvalidPosition} {
				if errors.Is(err, s) != (s == c.want) {
					t.Fatalf("%T: %v: is %v = %v", c.err, err, s, errors.Is(err, s))
				}
			}
		}
	}
}

// TestOpenPositions: each position is asked as GetShardIterator takes it.
func TestOpenPositions(t *testing.T) {
	var got []*dynamodbstreams.GetShardIteratorInput
	api := &stubAPI{iterator: func(in *dynamodbstreams.GetShardIteratorInput) (*dynamodbstreams.GetShardIteratorOutput, error) {
		got = append(got, in)
		return &dynamodbstreams.GetShardIteratorOutput{ShardIterator: aws.String("it")}, nil
	}}
	at := recordedCreation
	for _, pos := range []Position{{Kind: types.ShardIteratorTypeTrimHorizon}, {Kind: types.ShardIteratorTypeAfterSequenceNumber, Seq: "42"},
		{Kind: types.ShardIteratorTypeAtTimestamp, Time: at}} {
		if it, err := Open(context.Background(), api, testStream, "s1", pos); err != nil || it != "it" {
			t.Fatalf("%s: %q, %v", pos, it, err)
		}
	}
	if got[0].SequenceNumber != nil || got[0].Timestamp != nil || aws.ToString(got[1].SequenceNumber) != "42" ||
		!aws.ToTime(got[2].Timestamp).Equal(at) || aws.ToString(got[2].ShardId) != "s1" || aws.ToString(got[2].StreamArn) != testStream {
		t.Fatalf("requests %+v %+v %+v", got[0], got[1], got[2])
	}
}

// TestThirdReaderWarned: a third reader of one shard in the process is warned about, the first
// two are not, and a reader that left no longer counts.
func TestThirdReaderWarned(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	r := &readers{n: map[string]int{}}
	a, b := r.join(log, testStream, "s"), r.join(log, testStream, "s")
	other := r.join(log, testStream, "t")
	if logs.Len() != 0 {
		t.Fatalf("warned at two readers: %s", logs.String())
	}
	c := r.join(log, testStream, "s")
	if !strings.Contains(logs.String(), "more than two readers") || !strings.Contains(logs.String(), "readers=3") {
		t.Fatalf("no warning for a third reader: %q", logs.String())
	}
	c()
	c() // leaving twice counts once
	a()
	logs.Reset()
	d := r.join(log, testStream, "s")
	if logs.Len() != 0 {
		t.Fatalf("warned with two readers after two left: %s", logs.String())
	}
	b()
	d()
	other()
	if len(r.n) != 0 {
		t.Fatalf("counts left: %v", r.n)
	}
}
