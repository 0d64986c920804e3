package dynamostreams

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go"

	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/source"
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
	if len(got) != 250 || got[249].Closed || !got[0].Closed || got[0].Parents != nil || !slices.Equal(got[137].Parents, []string{"shardId-136"}) {
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
	if len(got) != 1 || got[0].ID != "b" || !slices.Equal(got[0].Parents, []string{"a"}) {
		t.Fatalf("children of a: %+v", got)
	}
	f := api.describes[0].ShardFilter
	if f == nil || f.Type != types.ShardFilterTypeChildShards || aws.ToString(f.ShardId) != "a" {
		t.Fatalf("filter %+v, want CHILD_SHARDS of a", f)
	}
}

func TestListShardsStreamNotFound(t *testing.T) {
	api := &stubAPI{err: &types.ResourceNotFoundException{Message: aws.String("Requested resource not found")}}
	if _, err := ListShards(context.Background(), api, testStream); !errors.Is(err, source.ErrNotFound) || !strings.Contains(err.Error(), testStream) {
		t.Fatalf("err %v, want ErrNotFound naming the stream", err)
	}
}

func newStream(t *testing.T, api API) *Stream {
	t.Helper()
	s, err := New(api, testStream)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestReadEndsClosedShard: a null NextShardIterator ends the shard, and its children are those
// DescribeStream's CHILD_SHARDS lists; an empty answer with an iterator does not end it. The
// limit is capped at 1,000. Each record is the engine's: its sequence number, creation time,
// keys and event object.
func TestReadEndsClosedShard(t *testing.T) {
	var limits []int32
	next := aws.String("it-2")
	put := recordedPut()
	api := &stubAPI{
		shards: []types.Shard{shard("a", "", "200"), shard("b", "a", ""), shard("c", "b", "")},
		records: func(in *dynamodbstreams.GetRecordsInput) (*dynamodbstreams.GetRecordsOutput, error) {
			limits = append(limits, aws.ToInt32(in.Limit))
			return &dynamodbstreams.GetRecordsOutput{NextShardIterator: next, Records: []types.Record{put}}, nil
		},
	}
	s := newStream(t, api)
	p, err := s.Read(context.Background(), "a", "it-1", 10000)
	if err != nil || p.Next != "it-2" || p.Children != nil || len(api.describes) != 0 {
		t.Fatalf("open shard: %+v, %v, %d DescribeStream calls", p, err, len(api.describes))
	}
	rec := p.Records[0]
	want, _ := Event([]types.Record{put}, testStream)
	if rec.SequenceNumber != "<sequence-number>" || !rec.ArrivalTime.Equal(recordedCreation) ||
		rec.PartitionKey != `{"my_partition_key":{"S":"hello world"}}` || `{"Records":[`+string(rec.Data)+`]}` != string(want) {
		t.Fatalf("record %+v", rec)
	}
	next = nil
	if p, err = s.Read(context.Background(), "a", "it-2", 7); err != nil || p.Next != "" || len(p.Children) != 1 || p.Children[0].ID != "b" {
		t.Fatalf("closed shard at its end: %+v, %v", p, err)
	}
	if limits[0] != 1000 || limits[1] != 7 {
		t.Fatalf("limits %v, want [1000 7]", limits)
	}
}

// TestClassify: each exception of DynamoDB Streams is the class the engine acts on, its cause
// kept; others are transient. A read whose position was trimmed is an expired iterator.
func TestClassify(t *testing.T) {
	classes := []error{source.ErrThrottled, source.ErrExpired, source.ErrInvalidPosition, source.ErrNotFound}
	for _, c := range []struct {
		err        error
		open, read error
	}{
		{&types.LimitExceededException{}, source.ErrThrottled, source.ErrThrottled},
		{&types.ExpiredIteratorException{}, source.ErrExpired, source.ErrExpired},
		{&smithy.GenericAPIError{Code: "ValidationException", Message: "Invalid SequenceNumber"}, source.ErrInvalidPosition, source.ErrInvalidPosition},
		{&types.TrimmedDataAccessException{}, nil, source.ErrExpired},
		{&types.ResourceNotFoundException{}, nil, nil}, // Open: the shard is gone (below)
		{&types.InternalServerError{}, nil, nil},
		{errors.New("connection reset"), nil, nil},
	} {
		api := &stubAPI{
			iterator: func(*dynamodbstreams.GetShardIteratorInput) (*dynamodbstreams.GetShardIteratorOutput, error) {
				return nil, c.err
			},
			records: func(*dynamodbstreams.GetRecordsInput) (*dynamodbstreams.GetRecordsOutput, error) { return nil, c.err },
		}
		s := newStream(t, api)
		it, openErr := s.Open(context.Background(), "s", source.Position{Type: source.TrimHorizon})
		_, readErr := s.Read(context.Background(), "s", "it", 1)
		checks := []struct{ err, want error }{{openErr, c.open}, {readErr, c.read}}
		var (
			trimmed *types.TrimmedDataAccessException
			gone    *types.ResourceNotFoundException
		)
		if errors.As(c.err, &trimmed) || errors.As(c.err, &gone) { // the shard was trimmed away whole
			if openErr != nil || it != trimmedAway {
				t.Fatalf("TRIM_HORIZON trimmed: %q, %v; want the shard's end", it, openErr)
			}
			checks = checks[1:]
		}
		for _, got := range checks {
			if !errors.Is(got.err, c.err) || got.err.Error() != c.err.Error() {
				t.Fatalf("%T: %v does not keep the cause as it is", c.err, got.err)
			}
			for _, class := range classes {
				if errors.Is(got.err, class) != (class == got.want) {
					t.Fatalf("%T: %v: is %v = %v", c.err, got.err, class, errors.Is(got.err, class))
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
	s := newStream(t, api)
	at := recordedCreation
	for _, pos := range []source.Position{{Type: source.TrimHorizon}, {Type: source.AfterSequenceNumber, SequenceNumber: "42"},
		{Type: source.AtTimestamp, Timestamp: at}, {Type: source.Latest}} {
		if it, err := s.Open(context.Background(), "s1", pos); err != nil || it != "it" {
			t.Fatalf("%s: %q, %v", describePosition(pos), it, err)
		}
	}
	if got[0].SequenceNumber != nil || got[0].Timestamp != nil || got[1].ShardIteratorType != types.ShardIteratorTypeAfterSequenceNumber ||
		aws.ToString(got[1].SequenceNumber) != "42" || !aws.ToTime(got[2].Timestamp).Equal(at) || got[3].ShardIteratorType != types.ShardIteratorTypeLatest ||
		aws.ToString(got[2].ShardId) != "s1" || aws.ToString(got[2].StreamArn) != testStream {
		t.Fatalf("requests %+v %+v %+v %+v", got[0], got[1], got[2], got[3])
	}
}

// TestOpenTrimmedPosition: a checkpoint older than the 24-hour trim point opens at TRIM_HORIZON,
// with a warning that records were lost.
func TestOpenTrimmedPosition(t *testing.T) {
	var asked []types.ShardIteratorType
	api := &stubAPI{iterator: func(in *dynamodbstreams.GetShardIteratorInput) (*dynamodbstreams.GetShardIteratorOutput, error) {
		asked = append(asked, in.ShardIteratorType)
		if in.ShardIteratorType == types.ShardIteratorTypeAfterSequenceNumber {
			return nil, &types.TrimmedDataAccessException{Message: aws.String("trimmed")}
		}
		return &dynamodbstreams.GetShardIteratorOutput{ShardIterator: aws.String("oldest")}, nil
	}}
	var logs bytes.Buffer
	s, err := New(api, testStream, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	it, err := s.Open(context.Background(), "s1", source.Position{Type: source.AfterSequenceNumber, SequenceNumber: "42"})
	if err != nil || it != "oldest" || !slices.Equal(asked, []types.ShardIteratorType{"AFTER_SEQUENCE_NUMBER", "TRIM_HORIZON"}) {
		t.Fatalf("iterator %q, %v, asked %v", it, err, asked)
	}
	if !strings.Contains(logs.String(), "records between are lost") || !strings.Contains(logs.String(), "AFTER_SEQUENCE_NUMBER 42") {
		t.Fatalf("no warning: %q", logs.String())
	}
}

// TestNew: identity of a DynamoDB source; a table's ARN is refused.
func TestNew(t *testing.T) {
	s := newStream(t, &stubAPI{})
	id := s.Identity()
	if id.ARN != testStream || id.EventSource != "aws:dynamodb" || id.Name != "orders" || id.Region != "us-east-1" || id.Account != "123456789012" || id.InvokeIdentityARN != "" {
		t.Fatalf("identity %+v", id)
	}
	if l := s.Limits(); l.MaxRecordsPerRead != 1000 || l.MinPollSpacing != 250*time.Millisecond {
		t.Fatalf("limits %+v", l)
	}
	if d, err := s.Retention(context.Background()); d != 24*time.Hour || err != nil {
		t.Fatalf("retention %s, %v", d, err)
	}
	if _, err := New(&stubAPI{}, "arn:aws:dynamodb:us-east-1:1:table/orders"); !errors.Is(err, source.ErrInvalidConfig) {
		t.Fatalf("a table's ARN: %v", err)
	}
	if _, err := New(nil, testStream); !errors.Is(err, source.ErrInvalidConfig) {
		t.Fatalf("no client: %v", err)
	}
}

// TestThirdReaderWarned: a third reader of one shard in the process is warned about, once; the
// first two are not; a reader that read the shard to its end, or has not read it for
// readerActive, no longer counts.
func TestThirdReaderWarned(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	r := &readers{last: map[string]map[*Stream]*reading{}}
	a, b, c, d := &Stream{}, &Stream{}, &Stream{}, &Stream{}
	now := recordedCreation
	r.touch(log, a, testStream, "s", now)
	r.touch(log, b, testStream, "s", now)
	r.touch(log, c, testStream, "t", now)
	if logs.Len() != 0 {
		t.Fatalf("warned at two readers: %s", logs.String())
	}
	r.touch(log, c, testStream, "s", now)
	if !strings.Contains(logs.String(), "more than two readers") || !strings.Contains(logs.String(), "readers=3") {
		t.Fatalf("no warning for a third reader: %q", logs.String())
	}
	logs.Reset()
	r.touch(log, c, testStream, "s", now.Add(PollInterval))
	if logs.Len() != 0 {
		t.Fatalf("warned twice: %s", logs.String())
	}
	r.done(c, testStream, "s")
	r.touch(log, d, testStream, "s", now.Add(2*PollInterval))
	if !strings.Contains(logs.String(), "readers=3") {
		t.Fatalf("a reader that ended still counted, or d not warned: %q", logs.String())
	}
	logs.Reset()
	// a and b stop reading: after readerActive, c and a fourth count as two.
	later := now.Add(readerActive + time.Second)
	r.touch(log, c, testStream, "s", later)
	r.touch(log, d, testStream, "s", later)
	if logs.Len() != 0 {
		t.Fatalf("readers that stopped still counted: %s", logs.String())
	}
	for _, s := range []*Stream{a, b, c, d} {
		r.done(s, testStream, "s")
		r.done(s, testStream, "t")
	}
	if len(r.last) != 0 {
		t.Fatalf("counts left: %v", r.last)
	}
}

var _ poller.Source = (*Stream)(nil)
