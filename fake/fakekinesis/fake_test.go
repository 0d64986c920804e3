package fakekinesis_test

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
)

// API is a copy of the interface the poller declares.
type API interface {
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
}

var (
	_ API = (*fakekinesis.Fake)(nil)
	_ API = (*kinesis.Client)(nil)
)

// clock is a manual clock for WithClock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var ctx = context.Background()

func shardIter(t *testing.T, f *fakekinesis.Fake, in *kinesis.GetShardIteratorInput) string {
	t.Helper()
	out, err := f.GetShardIterator(ctx, in)
	if err != nil {
		t.Fatalf("GetShardIterator: %v", err)
	}
	return *out.ShardIterator
}

func trimHorizon(t *testing.T, f *fakekinesis.Fake, stream, shard string) string {
	t.Helper()
	return shardIter(t, f, &kinesis.GetShardIteratorInput{
		StreamName: &stream, ShardId: &shard, ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
	})
}

func getRecords(t *testing.T, f *fakekinesis.Fake, it string, limit int32) *kinesis.GetRecordsOutput {
	t.Helper()
	out, err := f.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: &it, Limit: &limit})
	if err != nil {
		t.Fatalf("GetRecords: %v", err)
	}
	return out
}

func seqsOf(recs []types.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = *r.SequenceNumber
	}
	return out
}

func listAll(t *testing.T, f *fakekinesis.Fake, stream string) []types.Shard {
	t.Helper()
	out, err := f.ListShards(ctx, &kinesis.ListShardsInput{StreamName: &stream})
	if err != nil {
		t.Fatalf("ListShards: %v", err)
	}
	return out.Shards
}

func TestIteratorTypes(t *testing.T) {
	c := newClock()
	f := fakekinesis.New(fakekinesis.WithClock(c.Now))
	f.CreateStream("s", 1)
	const shard = "shardId-000000000000"
	var seqs []string
	var times []time.Time
	for i := range 5 {
		times = append(times, c.Now())
		seqs = append(seqs, f.PutToShard("s", shard, "pk", []byte{byte(i)}))
		c.Add(10 * time.Millisecond)
	}
	tests := []struct {
		name string
		typ  types.ShardIteratorType
		seq  string
		at   time.Time
		want []string
	}{
		{name: "trim horizon", typ: types.ShardIteratorTypeTrimHorizon, want: seqs},
		{name: "latest", typ: types.ShardIteratorTypeLatest, want: []string{}},
		{name: "at sequence", typ: types.ShardIteratorTypeAtSequenceNumber, seq: seqs[2], want: seqs[2:]},
		{name: "after sequence", typ: types.ShardIteratorTypeAfterSequenceNumber, seq: seqs[2], want: seqs[3:]},
		{name: "after last", typ: types.ShardIteratorTypeAfterSequenceNumber, seq: seqs[4], want: []string{}},
		{name: "at timestamp exact", typ: types.ShardIteratorTypeAtTimestamp, at: times[2], want: seqs[2:]},
		{name: "at timestamp between", typ: types.ShardIteratorTypeAtTimestamp, at: times[2].Add(time.Millisecond), want: seqs[3:]},
		{name: "at timestamp before all", typ: types.ShardIteratorTypeAtTimestamp, at: times[0].Add(-time.Hour), want: seqs},
		{name: "at timestamp after all", typ: types.ShardIteratorTypeAtTimestamp, at: c.Now().Add(time.Hour), want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String(shard), ShardIteratorType: tt.typ}
			if tt.seq != "" {
				in.StartingSequenceNumber = &tt.seq
			}
			if !tt.at.IsZero() {
				in.Timestamp = &tt.at
			}
			out := getRecords(t, f, shardIter(t, f, in), 100)
			if got := seqsOf(out.Records); !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
			if out.NextShardIterator == nil || *out.MillisBehindLatest != 0 {
				t.Errorf("open shard at tip: NextShardIterator %v, MillisBehindLatest %d", out.NextShardIterator, *out.MillisBehindLatest)
			}
		})
	}
}

func TestLatestSeesLaterRecords(t *testing.T) {
	f := fakekinesis.New()
	f.CreateStream("s", 1)
	f.Put("s", "a", []byte("old"))
	it := shardIter(t, f, &kinesis.GetShardIteratorInput{
		StreamName: aws.String("s"), ShardId: aws.String("shardId-000000000000"), ShardIteratorType: types.ShardIteratorTypeLatest,
	})
	out := getRecords(t, f, it, 10)
	if len(out.Records) != 0 {
		t.Fatalf("got %d records at LATEST, want 0", len(out.Records))
	}
	_, seq := f.Put("s", "a", []byte("new"))
	out = getRecords(t, f, *out.NextShardIterator, 10)
	if got := seqsOf(out.Records); !slices.Equal(got, []string{seq}) {
		t.Fatalf("got %v, want [%s]", got, seq)
	}
}

func TestGetShardIteratorErrors(t *testing.T) {
	f := fakekinesis.New()
	f.CreateStream("s", 2)
	foreign := f.PutToShard("s", "shardId-000000000001", "k", nil)
	tests := []struct {
		name string
		in   kinesis.GetShardIteratorInput
		want any
	}{
		{"unknown stream", kinesis.GetShardIteratorInput{StreamName: aws.String("nope"), ShardId: aws.String("shardId-000000000000"),
			ShardIteratorType: types.ShardIteratorTypeLatest}, new(*types.ResourceNotFoundException)},
		{"unknown shard", kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String("shardId-000000000009"),
			ShardIteratorType: types.ShardIteratorTypeLatest}, new(*types.ResourceNotFoundException)},
		{"sequence from another shard", kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String("shardId-000000000000"),
			ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber, StartingSequenceNumber: &foreign}, new(*types.InvalidArgumentException)},
		{"missing sequence", kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String("shardId-000000000000"),
			ShardIteratorType: types.ShardIteratorTypeAfterSequenceNumber}, new(*types.InvalidArgumentException)},
		{"missing timestamp", kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String("shardId-000000000000"),
			ShardIteratorType: types.ShardIteratorTypeAtTimestamp}, new(*types.InvalidArgumentException)},
		{"bad type", kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String("shardId-000000000000"),
			ShardIteratorType: "SOMEWHERE"}, new(*types.InvalidArgumentException)},
		{"no stream", kinesis.GetShardIteratorInput{ShardId: aws.String("shardId-000000000000"),
			ShardIteratorType: types.ShardIteratorTypeLatest}, new(*types.InvalidArgumentException)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.GetShardIterator(ctx, &tt.in)
			if !errors.As(err, tt.want) {
				t.Fatalf("got %T %v, want %T", err, err, tt.want)
			}
		})
	}
}

func TestStreamNotFoundMessage(t *testing.T) {
	f := fakekinesis.New(fakekinesis.WithAccount("123456789012"))
	_, err := f.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String("gone")})
	var rnf *types.ResourceNotFoundException
	if !errors.As(err, &rnf) || rnf.ErrorMessage() != "Stream gone under account 123456789012 not found." {
		t.Fatalf("got %v", err)
	}
}

func TestStreamByARN(t *testing.T) {
	f := fakekinesis.New(fakekinesis.WithRegion("eu-west-1"), fakekinesis.WithAccount("123456789012"))
	arn := f.CreateStream("s", 3)
	if arn != "arn:aws:kinesis:eu-west-1:123456789012:stream/s" {
		t.Fatalf("arn %s", arn)
	}
	out, err := f.ListShards(ctx, &kinesis.ListShardsInput{StreamARN: &arn})
	if err != nil || len(out.Shards) != 3 {
		t.Fatalf("ListShards by ARN: %v, %d shards", err, len(out.Shards))
	}
}

func TestListShardsPaging(t *testing.T) {
	f := fakekinesis.New()
	f.CreateStream("s", 5)
	var got []string
	in := &kinesis.ListShardsInput{StreamName: aws.String("s"), MaxResults: aws.Int32(1)}
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("too many pages")
		}
		out, err := f.ListShards(ctx, in)
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		for _, s := range out.Shards {
			got = append(got, *s.ShardId)
		}
		if out.NextToken == nil {
			break
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken, MaxResults: aws.Int32(1)}
	}
	want := []string{"shardId-000000000000", "shardId-000000000001", "shardId-000000000002", "shardId-000000000003", "shardId-000000000004"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}

	out, err := f.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String("s"), MaxResults: aws.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String("s"), NextToken: out.NextToken})
	var iae *types.InvalidArgumentException
	if !errors.As(err, &iae) {
		t.Fatalf("StreamName with NextToken: got %v, want InvalidArgumentException", err)
	}
	out, err = f.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String("s"), ExclusiveStartShardId: aws.String("shardId-000000000002")})
	if err != nil || len(out.Shards) != 2 || *out.Shards[0].ShardId != "shardId-000000000003" {
		t.Fatalf("ExclusiveStartShardId: %v %v", err, out)
	}
}

func TestListShardsTokenExpires(t *testing.T) {
	c := newClock()
	f := fakekinesis.New(fakekinesis.WithClock(c.Now))
	f.CreateStream("s", 2)
	out, err := f.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String("s"), MaxResults: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	c.Add(301 * time.Second)
	_, err = f.ListShards(ctx, &kinesis.ListShardsInput{NextToken: out.NextToken})
	var ent *types.ExpiredNextTokenException
	if !errors.As(err, &ent) {
		t.Fatalf("got %v, want ExpiredNextTokenException", err)
	}
}

func TestListShardsFilters(t *testing.T) {
	c := newClock()
	f := fakekinesis.New(fakekinesis.WithClock(c.Now))
	f.CreateStream("s", 2)
	c.Add(time.Minute)
	beforeSplit := c.Now()
	c.Add(time.Minute)
	f.Split("s", "shardId-000000000000") // creates 2 and 3
	ids := func(filter types.ShardFilter) []string {
		out, err := f.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String("s"), ShardFilter: &filter})
		if err != nil {
			t.Fatalf("%s: %v", filter.Type, err)
		}
		var got []string
		for _, s := range out.Shards {
			got = append(got, strings.TrimPrefix(*s.ShardId, "shardId-00000000000"))
		}
		return got
	}
	tests := []struct {
		filter types.ShardFilter
		want   []string
	}{
		{types.ShardFilter{Type: types.ShardFilterTypeAtLatest}, []string{"1", "2", "3"}},
		{types.ShardFilter{Type: types.ShardFilterTypeAtTrimHorizon}, []string{"0", "1"}},
		{types.ShardFilter{Type: types.ShardFilterTypeFromTrimHorizon}, []string{"0", "1", "2", "3"}},
		{types.ShardFilter{Type: types.ShardFilterTypeAfterShardId, ShardId: aws.String("shardId-000000000001")}, []string{"2", "3"}},
		{types.ShardFilter{Type: types.ShardFilterTypeAtTimestamp, Timestamp: &beforeSplit}, []string{"0", "1"}},
		{types.ShardFilter{Type: types.ShardFilterTypeFromTimestamp, Timestamp: &beforeSplit}, []string{"0", "1", "2", "3"}},
	}
	for _, tt := range tests {
		t.Run(string(tt.filter.Type), func(t *testing.T) {
			if got := ids(tt.filter); !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSplitReadsParentToEnd(t *testing.T) {
	f := fakekinesis.New()
	f.CreateStream("s", 1)
	const parent = "shardId-000000000000"
	var want []string
	for i := range 5 {
		want = append(want, f.PutToShard("s", parent, fmt.Sprint(i), nil))
	}
	children := f.Split("s", parent)
	if children != [2]string{"shardId-000000000001", "shardId-000000000002"} {
		t.Fatalf("children %v", children)
	}
	for i := range 20 {
		if sh, _ := f.Put("s", fmt.Sprint(i), nil); sh == parent {
			t.Fatal("Put routed to the closed parent")
		}
	}

	var got []string
	var childShards []types.ChildShard
	it := trimHorizon(t, f, "s", parent)
	for calls := 0; ; calls++ {
		if calls > 10 {
			t.Fatal("parent never ended")
		}
		out := getRecords(t, f, it, 2)
		got = append(got, seqsOf(out.Records)...)
		if out.NextShardIterator == nil {
			childShards = out.ChildShards
			break
		}
		if len(out.ChildShards) != 0 {
			t.Fatalf("ChildShards before the end: %v", out.ChildShards)
		}
		it = *out.NextShardIterator
	}
	if !slices.Equal(got, want) {
		t.Fatalf("records %v, want %v", got, want)
	}
	if len(childShards) != 2 {
		t.Fatalf("ChildShards %v", childShards)
	}
	for i, cs := range childShards {
		if *cs.ShardId != children[i] || !slices.Equal(cs.ParentShards, []string{parent}) || cs.HashKeyRange == nil {
			t.Errorf("child %d: %s parents %v", i, *cs.ShardId, cs.ParentShards)
		}
	}
	if *childShards[0].HashKeyRange.StartingHashKey != "0" ||
		*childShards[0].HashKeyRange.EndingHashKey != "170141183460469231731687303715884105727" ||
		*childShards[1].HashKeyRange.StartingHashKey != "170141183460469231731687303715884105728" ||
		*childShards[1].HashKeyRange.EndingHashKey != "340282366920938463463374607431768211455" {
		t.Errorf("children do not cover the parent: %+v %+v", childShards[0].HashKeyRange, childShards[1].HashKeyRange)
	}

	shards := listAll(t, f, "s")
	if shards[0].SequenceNumberRange.EndingSequenceNumber == nil {
		t.Error("closed parent has no EndingSequenceNumber")
	}
	for _, s := range shards[1:] {
		if *s.ParentShardId != parent || s.SequenceNumberRange.EndingSequenceNumber != nil {
			t.Errorf("child %s: parent %v, ending %v", *s.ShardId, s.ParentShardId, s.SequenceNumberRange.EndingSequenceNumber)
		}
	}

	latest := shardIter(t, f, &kinesis.GetShardIteratorInput{
		StreamName: aws.String("s"), ShardId: aws.String(parent), ShardIteratorType: types.ShardIteratorTypeLatest,
	})
	out := getRecords(t, f, latest, 10)
	if len(out.Records) != 0 || out.NextShardIterator != nil || len(out.ChildShards) != 2 {
		t.Errorf("LATEST on closed shard: %d records, next %v, %d children", len(out.Records), out.NextShardIterator, len(out.ChildShards))
	}
}

func TestMerge(t *testing.T) {
	f := fakekinesis.New()
	f.CreateStream("s", 3)
	a, b := "shardId-000000000002", "shardId-000000000001" // B lies before A: either order merges
	child := f.Merge("s", a, b)
	shards := listAll(t, f, "s")
	c := shards[len(shards)-1]
	if *c.ShardId != child || *c.ParentShardId != a || *c.AdjacentParentShardId != b {
		t.Fatalf("child %s parent %v adjacent %v", *c.ShardId, c.ParentShardId, c.AdjacentParentShardId)
	}
	if *c.HashKeyRange.StartingHashKey != *shards[1].HashKeyRange.StartingHashKey ||
		*c.HashKeyRange.EndingHashKey != *shards[2].HashKeyRange.EndingHashKey {
		t.Fatalf("child range %+v", c.HashKeyRange)
	}
	for _, p := range []string{a, b} {
		out := getRecords(t, f, trimHorizon(t, f, "s", p), 10)
		if out.NextShardIterator != nil || len(out.ChildShards) != 1 ||
			!slices.Equal(out.ChildShards[0].ParentShards, []string{a, b}) {
			t.Errorf("%s end: next %v children %v", p, out.NextShardIterator, out.ChildShards)
		}
	}
	for i := range 50 {
		if sh, _ := f.Put("s", fmt.Sprint(i), nil); sh == a || sh == b {
			t.Fatalf("Put routed to closed %s", sh)
		}
	}
}

func TestTrim(t *testing.T) {
	f := fakekinesis.New()
	f.CreateStream("s", 1)
	const parent = "shardId-000000000000"
	f.PutToShard("s", parent, "k", nil)
	it := trimHorizon(t, f, "s", parent)
	f.Split("s", parent)
	f.Trim("s", parent)

	var rnf *types.ResourceNotFoundException
	if _, err := f.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: &it}); !errors.As(err, &rnf) {
		t.Errorf("GetRecords on trimmed shard: %v", err)
	}
	_, err := f.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
		StreamName: aws.String("s"), ShardId: aws.String(parent), ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
	})
	if !errors.As(err, &rnf) {
		t.Errorf("GetShardIterator on trimmed shard: %v", err)
	}
	for _, s := range listAll(t, f, "s") {
		if *s.ShardId == parent {
			t.Error("trimmed shard still listed")
		}
	}
}

func TestTrimBefore(t *testing.T) {
	f := fakekinesis.New()
	f.CreateStream("s", 1)
	const shard = "shardId-000000000000"
	var seqs []string
	for range 4 {
		seqs = append(seqs, f.PutToShard("s", shard, "k", nil))
	}
	old := trimHorizon(t, f, "s", shard)
	f.TrimBefore("s", shard, seqs[2])
	if got := seqsOf(getRecords(t, f, old, 10).Records); !slices.Equal(got, seqs[2:]) {
		t.Errorf("stale iterator read %v, want %v", got, seqs[2:])
	}
	it := shardIter(t, f, &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String(shard),
		ShardIteratorType: types.ShardIteratorTypeAfterSequenceNumber, StartingSequenceNumber: &seqs[0]})
	if got := seqsOf(getRecords(t, f, it, 10).Records); !slices.Equal(got, seqs[2:]) {
		t.Errorf("AFTER a trimmed sequence read %v, want %v", got, seqs[2:])
	}
}

func TestIteratorExpiry(t *testing.T) {
	c := newClock()
	f := fakekinesis.New(fakekinesis.WithClock(c.Now))
	f.CreateStream("s", 1)
	it := trimHorizon(t, f, "s", "shardId-000000000000")
	c.Add(5 * time.Minute)
	out := getRecords(t, f, it, 1) // exactly at the TTL is still valid
	c.Add(5*time.Minute + time.Millisecond)
	_, err := f.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: out.NextShardIterator})
	var eie *types.ExpiredIteratorException
	if !errors.As(err, &eie) {
		t.Fatalf("got %v, want ExpiredIteratorException", err)
	}

	short := fakekinesis.New(fakekinesis.WithClock(c.Now), fakekinesis.WithIteratorTTL(time.Second))
	short.CreateStream("s", 1)
	it = trimHorizon(t, short, "s", "shardId-000000000000")
	c.Add(2 * time.Second)
	if _, err := short.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: &it}); !errors.As(err, &eie) {
		t.Fatalf("WithIteratorTTL: got %v", err)
	}
}

func TestInjectedErrors(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		as     any
		status int
	}{
		{"throttled", fakekinesis.ErrThrottled(), new(*types.ProvisionedThroughputExceededException), http.StatusBadRequest},
		{"expired", fakekinesis.ErrExpired(), new(*types.ExpiredIteratorException), http.StatusBadRequest},
		{"internal", fakekinesis.ErrInternal(), new(*smithy.GenericAPIError), http.StatusInternalServerError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fakekinesis.New()
			f.CreateStream("s", 1)
			it := trimHorizon(t, f, "s", "shardId-000000000000")
			f.Inject(func(op string, in any) error {
				if _, ok := in.(*kinesis.GetRecordsInput); ok && op == fakekinesis.OpGetRecords {
					return tt.err
				}
				return nil
			})
			_, err := f.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: &it})
			if !errors.As(err, tt.as) {
				t.Fatalf("got %v, want %T", err, tt.as)
			}
			var re *awshttp.ResponseError
			var oe *smithy.OperationError
			if !errors.As(err, &re) || re.HTTPStatusCode() != tt.status || !errors.As(err, &oe) || oe.Operation() != "GetRecords" {
				t.Fatalf("not in the SDK envelope: %v", err)
			}
			if _, err := f.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String("s")}); err != nil {
				t.Fatalf("ListShards was not targeted: %v", err)
			}
			f.Inject(nil)
			if _, err := f.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: &it}); err != nil {
				t.Fatalf("after Inject(nil): %v", err)
			}
			if f.Calls(fakekinesis.OpGetRecords) != 2 || f.Calls(fakekinesis.OpGetShardIterator) != 1 || f.Calls(fakekinesis.OpListShards) != 1 {
				t.Fatalf("calls %d %d %d", f.Calls(fakekinesis.OpGetRecords), f.Calls(fakekinesis.OpGetShardIterator), f.Calls(fakekinesis.OpListShards))
			}
		})
	}
	var ae smithy.APIError
	if !errors.As(fakekinesis.ErrInternal(), &ae) || ae.ErrorFault() != smithy.FaultServer || ae.ErrorCode() != "InternalFailure" {
		t.Fatalf("ErrInternal: %v", ae)
	}
}

func TestInjectMayReshard(t *testing.T) {
	f := fakekinesis.New()
	f.CreateStream("s", 1)
	f.Inject(func(op string, _ any) error {
		if op == fakekinesis.OpGetRecords && f.Calls(op) == 2 {
			f.Split("s", "shardId-000000000000")
		}
		return nil
	})
	out := getRecords(t, f, trimHorizon(t, f, "s", "shardId-000000000000"), 10)
	out = getRecords(t, f, *out.NextShardIterator, 10)
	if out.NextShardIterator != nil || len(out.ChildShards) != 2 {
		t.Fatalf("split from the injector not seen: %v", out.ChildShards)
	}
}

func TestCanceledContext(t *testing.T) {
	f := fakekinesis.New()
	f.CreateStream("s", 1)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err := f.ListShards(cctx, &kinesis.ListShardsInput{StreamName: aws.String("s")})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

func TestSequenceNumbers(t *testing.T) {
	f := fakekinesis.New()
	f.CreateStream("s", 4)
	prev := ""
	for i := range 200 {
		shard, seq := f.Put("s", fmt.Sprint("key", i), nil)
		if len(seq) != 56 || strings.Trim(seq, "0123456789") != "" {
			t.Fatalf("seq %q is not 56 decimal digits", seq)
		}
		if prev != "" && (fakekinesis.CompareSeq(prev, seq) >= 0 || seq <= prev) {
			t.Fatalf("seq %s (shard %s) does not follow %s", seq, shard, prev)
		}
		prev = seq
	}
	tests := []struct {
		a, b string
		want int
	}{
		{"1", "2", -1},
		{"10", "9", 1},
		{"0010", "10", 0},
		{"49590338271490256608559692538361571095921575989136588898", "49590338271490256608559692538361571095921575989136588899", -1},
		{"49590338271490256608559692538361571095921575989136588898", "5", 1},
		{"", "0", 0},
	}
	for _, tt := range tests {
		if got := fakekinesis.CompareSeq(tt.a, tt.b); got != tt.want {
			t.Errorf("CompareSeq(%s, %s) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := fakekinesis.CompareSeq(tt.b, tt.a); got != -tt.want {
			t.Errorf("CompareSeq(%s, %s) = %d, want %d", tt.b, tt.a, got, -tt.want)
		}
	}
}

func TestRoutingByMD5(t *testing.T) {
	f := fakekinesis.New()
	f.CreateStream("s", 5)
	f.Split("s", "shardId-000000000002")
	f.Merge("s", "shardId-000000000003", "shardId-000000000004")
	ranges := map[string][2]*big.Int{}
	for _, s := range listAll(t, f, "s") {
		lo, _ := new(big.Int).SetString(*s.HashKeyRange.StartingHashKey, 10)
		hi, _ := new(big.Int).SetString(*s.HashKeyRange.EndingHashKey, 10)
		ranges[*s.ShardId] = [2]*big.Int{lo, hi}
	}
	seen := map[string]bool{}
	for i := range 1000 {
		key := fmt.Sprint("user-", i)
		shard, _ := f.Put("s", key, nil)
		sum := md5.Sum([]byte(key))
		h := new(big.Int).SetBytes(sum[:])
		r := ranges[shard]
		if h.Cmp(r[0]) < 0 || h.Cmp(r[1]) > 0 {
			t.Fatalf("key %s hash %s routed to %s [%s, %s]", key, h, shard, r[0], r[1])
		}
		seen[shard] = true
	}
	if want := []string{"shardId-000000000000", "shardId-000000000001", "shardId-000000000005",
		"shardId-000000000006", "shardId-000000000007"}; len(seen) != len(want) {
		t.Fatalf("routed to %v, want the open shards %v", seen, want)
	}
}

func TestEvenHashRanges(t *testing.T) {
	f := fakekinesis.New()
	f.CreateStream("s", 3)
	shards := listAll(t, f, "s")
	want := [][2]string{
		{"0", "113427455640312821154458202477256070484"},
		{"113427455640312821154458202477256070485", "226854911280625642308916404954512140969"},
		{"226854911280625642308916404954512140970", "340282366920938463463374607431768211455"},
	}
	for i, s := range shards {
		if got := [2]string{*s.HashKeyRange.StartingHashKey, *s.HashKeyRange.EndingHashKey}; got != want[i] {
			t.Errorf("shard %d range %v, want %v", i, got, want[i])
		}
	}
}

func TestGetRecordsLimitAndLag(t *testing.T) {
	c := newClock()
	f := fakekinesis.New(fakekinesis.WithClock(c.Now))
	f.CreateStream("s", 1)
	for range 5 {
		f.Put("s", "k", []byte("x"))
	}
	out := getRecords(t, f, trimHorizon(t, f, "s", "shardId-000000000000"), 2)
	if len(out.Records) != 2 || *out.MillisBehindLatest <= 0 {
		t.Fatalf("%d records, behind %d", len(out.Records), *out.MillisBehindLatest)
	}
	out = getRecords(t, f, *out.NextShardIterator, 10)
	if len(out.Records) != 3 || *out.MillisBehindLatest != 0 {
		t.Fatalf("%d records, behind %d", len(out.Records), *out.MillisBehindLatest)
	}
	for _, bad := range []int32{0, 10001} {
		_, err := f.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: out.NextShardIterator, Limit: &bad})
		var iae *types.InvalidArgumentException
		if !errors.As(err, &iae) {
			t.Errorf("Limit %d: %v", bad, err)
		}
	}
	_, err := f.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: aws.String("garbage")})
	var iae *types.InvalidArgumentException
	if !errors.As(err, &iae) {
		t.Errorf("bad iterator: %v", err)
	}
}

func TestGetRecordsSharesData(t *testing.T) {
	f := fakekinesis.New()
	f.CreateStream("s", 1)
	data := []byte("payload")
	f.Put("s", "k", data)
	out := getRecords(t, f, trimHorizon(t, f, "s", "shardId-000000000000"), 1)
	if &out.Records[0].Data[0] != &data[0] {
		t.Fatal("GetRecords copied the record data")
	}
}

func TestConcurrentUse(t *testing.T) {
	f := fakekinesis.New()
	f.CreateStream("s", 4)
	const perWriter = 500
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range perWriter {
				f.Put("s", fmt.Sprint(w, "-", i), []byte("x"))
			}
		})
	}
	counts := make([]int, 4)
	for r := range 4 {
		wg.Go(func() {
			first, err := f.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("s"),
				ShardId: aws.String(fmt.Sprintf("shardId-%012d", r)), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
			if err != nil {
				t.Error(err)
				return
			}
			it := *first.ShardIterator
			for range 200 {
				out, err := f.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: &it})
				if err != nil {
					t.Error(err)
					return
				}
				counts[r] += len(out.Records)
				it = *out.NextShardIterator
				if _, err := f.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String("s")}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for _, s := range listAll(t, f, "s") {
		out := getRecords(t, f, trimHorizon(t, f, "s", *s.ShardId), 10000)
		total += len(out.Records)
	}
	if total != 4*perWriter {
		t.Fatalf("stored %d records, want %d", total, 4*perWriter)
	}
}

func benchmarkGetRecords(b *testing.B, limit int32) {
	f := fakekinesis.New()
	f.CreateStream("s", 1)
	data := make([]byte, 1024)
	const n = 100_000
	entries := make([]fakekinesis.Entry, n)
	for i := range entries {
		entries[i] = fakekinesis.Entry{PartitionKey: "k", Data: data}
	}
	f.PutMany("s", entries)
	in := &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String("shardId-000000000000"),
		ShardIteratorType: types.ShardIteratorTypeTrimHorizon}
	first, err := f.GetShardIterator(ctx, in)
	if err != nil {
		b.Fatal(err)
	}
	it := *first.ShardIterator
	records := 0
	b.ReportAllocs()
	for b.Loop() {
		out, err := f.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: &it, Limit: &limit})
		if err != nil {
			b.Fatal(err)
		}
		records += len(out.Records)
		it = *out.NextShardIterator
		if *out.MillisBehindLatest == 0 {
			it = *first.ShardIterator
		}
	}
	b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
}

func BenchmarkGetRecords(b *testing.B) {
	for _, limit := range []int32{100, 10000} {
		b.Run(fmt.Sprint("limit=", limit), func(b *testing.B) { benchmarkGetRecords(b, limit) })
	}
}

func TestGetRecordsByteCap(t *testing.T) {
	f := fakekinesis.New()
	f.CreateStream("s", 1)
	mib := make([]byte, 1<<20)
	for range 12 {
		f.Put("s", "k", mib)
	}
	out := getRecords(t, f, trimHorizon(t, f, "s", "shardId-000000000000"), 10000)
	if len(out.Records) != 10 || *out.MillisBehindLatest == 0 {
		t.Fatalf("got %d records of 1 MiB, want 10 (the 10 MiB cap)", len(out.Records))
	}
}
