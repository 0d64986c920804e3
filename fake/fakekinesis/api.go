package fakekinesis

import (
	"context"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
)

// begin counts the call, runs the injector and checks ctx, in that order.
func (f *Fake) begin(ctx context.Context, op string, in any) error {
	f.calls[opIndex(op)].Add(1)
	if fn := f.injector.Load(); fn != nil {
		if err := (*fn)(op, in); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return &smithy.CanceledError{Err: err}
	}
	return nil
}

// page is the state behind a ListShards NextToken.
type page struct {
	stream int
	after  string // list shard ids above this one
	filter types.ShardFilter
	issued time.Time
}

// ListShards lists the stream's shards, open and closed, in shard id order.
// MaxResults defaults to 1000; values above 1000 return at most 1000, and
// values outside [1, 10000] are an InvalidArgumentException. A NextToken
// expires after 300 seconds (ExpiredNextTokenException) and must not be
// combined with StreamName, StreamCreationTimestamp or ExclusiveStartShardId.
// ShardFilter supports every type Kinesis defines; AT_TRIM_HORIZON means
// shards with no remaining parent. It does not block.
func (f *Fake) ListShards(ctx context.Context, in *kinesis.ListShardsInput, _ ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	if err := f.begin(ctx, OpListShards, in); err != nil {
		return nil, wrapSDK(OpListShards, err)
	}
	out, err := f.listShards(in)
	if err != nil {
		return nil, wrapSDK(OpListShards, err)
	}
	return out, nil
}

func (f *Fake) listShards(in *kinesis.ListShardsInput) (*kinesis.ListShardsOutput, error) {
	limit := f.cfg.pageSize
	if in.MaxResults != nil {
		m := int(*in.MaxResults)
		if m < 1 || m > maxListShardsInput {
			return nil, invalidArg("1 validation error detected: Value '%d' at 'maxResults' failed to satisfy constraint: "+
				"Member must have value between 1 and %d", m, maxListShardsInput)
		}
		limit = min(m, defaultListShards)
	}
	now := f.cfg.now()
	f.mu.Lock()
	defer f.mu.Unlock()

	var pg page
	if in.NextToken != nil {
		if in.StreamName != nil || in.StreamCreationTimestamp != nil || in.ExclusiveStartShardId != nil {
			return nil, invalidArg("NextToken and StreamName, StreamCreationTimestamp or ExclusiveStartShardId cannot be provided together.")
		}
		var ok bool
		if pg, ok = f.pages[*in.NextToken]; !ok {
			return nil, invalidArg("Invalid NextToken.")
		}
		if now.Sub(pg.issued) > pageTokenTTL {
			delete(f.pages, *in.NextToken)
			return nil, &types.ExpiredNextTokenException{Message: aws.String("The timestamp in the NextToken has expired.")}
		}
		if in.StreamARN != nil && *in.StreamARN != f.streams[pg.stream].arn {
			return nil, invalidArg("StreamARN %s does not match the NextToken.", *in.StreamARN)
		}
	} else {
		s, err := f.lookup(in.StreamName, in.StreamARN)
		if err != nil {
			return nil, err
		}
		pg.stream = s.id
		if in.ExclusiveStartShardId != nil {
			pg.after = *in.ExclusiveStartShardId
		}
		if in.ShardFilter != nil {
			if err := checkFilter(in.ShardFilter); err != nil {
				return nil, err
			}
			pg.filter = *in.ShardFilter
			if pg.filter.Type == types.ShardFilterTypeAfterShardId && *pg.filter.ShardId > pg.after {
				pg.after = *pg.filter.ShardId
			}
		}
	}

	s := f.streams[pg.stream]
	out := &kinesis.ListShardsOutput{Shards: []types.Shard{}}
	for _, sh := range s.shards {
		if sh == nil || sh.id <= pg.after || !pg.match(s, sh) {
			continue
		}
		if len(out.Shards) == limit {
			f.pageSeq++
			tok := pagePrefix + strconv.FormatUint(f.pageSeq, 10)
			f.pages[tok] = page{stream: pg.stream, after: *out.Shards[limit-1].ShardId, filter: pg.filter, issued: now}
			out.NextToken = &tok
			break
		}
		hr := sh.hashRange
		out.Shards = append(out.Shards, types.Shard{
			ShardId:               &sh.id,
			ParentShardId:         sh.parent,
			AdjacentParentShardId: sh.adjacent,
			HashKeyRange:          &hr,
			SequenceNumberRange:   &types.SequenceNumberRange{StartingSequenceNumber: &sh.startSeq, EndingSequenceNumber: sh.endSeq},
		})
	}
	return out, nil
}

func checkFilter(sf *types.ShardFilter) error {
	switch sf.Type {
	case types.ShardFilterTypeAtLatest, types.ShardFilterTypeAtTrimHorizon, types.ShardFilterTypeFromTrimHorizon:
	case types.ShardFilterTypeAfterShardId:
		if sf.ShardId == nil {
			return invalidArg("ShardId must be provided for the AFTER_SHARD_ID ShardFilter type.")
		}
	case types.ShardFilterTypeAtTimestamp, types.ShardFilterTypeFromTimestamp:
		if sf.Timestamp == nil {
			return invalidArg("Timestamp must be provided for the %s ShardFilter type.", sf.Type)
		}
	default:
		return invalidArg("Invalid ShardFilter type %q.", sf.Type)
	}
	return nil
}

// match applies the page's ShardFilter; the zero filter matches everything.
func (pg *page) match(s *stream, sh *shard) bool {
	open := sh.endSeq == nil
	switch pg.filter.Type {
	case types.ShardFilterTypeAtLatest:
		return open
	case types.ShardFilterTypeAtTrimHorizon:
		return (sh.parent == nil || s.shardByID(*sh.parent) == nil) &&
			(sh.adjacent == nil || s.shardByID(*sh.adjacent) == nil)
	case types.ShardFilterTypeAtTimestamp:
		t := *pg.filter.Timestamp
		return !sh.created.After(t) && (open || sh.closedAt.After(t))
	case types.ShardFilterTypeFromTimestamp:
		return open || sh.closedAt.After(*pg.filter.Timestamp)
	}
	return true
}

// lookup resolves a stream by ARN or name. The caller holds f.mu.
func (f *Fake) lookup(name, arn *string) (*stream, error) {
	switch {
	case arn != nil:
		s := f.byARN[*arn]
		if s == nil {
			return nil, f.streamNotFound(nameFromARN(*arn))
		}
		if name != nil && *name != s.name {
			return nil, invalidArg("StreamARN %s and StreamName %s do not refer to the same stream.", *arn, *name)
		}
		return s, nil
	case name != nil:
		if s := f.byName[*name]; s != nil {
			return s, nil
		}
		return nil, f.streamNotFound(*name)
	}
	return nil, invalidArg("Either StreamName or StreamARN should be provided.")
}

// GetShardIterator returns an iterator for TRIM_HORIZON, LATEST,
// AT_SEQUENCE_NUMBER, AFTER_SEQUENCE_NUMBER or AT_TIMESTAMP (the first
// record that arrived at or after Timestamp). A sequence number from another
// shard is an InvalidArgumentException; one below the trim horizon starts at
// the trim horizon. The iterator is valid for the iterator TTL. It does not
// block.
func (f *Fake) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, _ ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	if err := f.begin(ctx, OpGetShardIterator, in); err != nil {
		return nil, wrapSDK(OpGetShardIterator, err)
	}
	out, err := f.getShardIterator(in)
	if err != nil {
		return nil, wrapSDK(OpGetShardIterator, err)
	}
	return out, nil
}

type iteratorResult struct {
	out kinesis.GetShardIteratorOutput
	it  string
}

func (f *Fake) getShardIterator(in *kinesis.GetShardIteratorInput) (*kinesis.GetShardIteratorOutput, error) {
	if in.ShardId == nil {
		return nil, invalidArg("ShardId must be provided.")
	}
	now := f.cfg.now()
	f.mu.RLock()
	defer f.mu.RUnlock()
	s, err := f.lookup(in.StreamName, in.StreamARN)
	if err != nil {
		return nil, err
	}
	sh := s.shardByID(*in.ShardId)
	if sh == nil {
		return nil, f.shardNotFound(*in.ShardId, s.name)
	}
	var i int
	switch t := in.ShardIteratorType; t {
	case types.ShardIteratorTypeTrimHorizon:
		i = 0
	case types.ShardIteratorTypeLatest:
		i = len(sh.recs)
	case types.ShardIteratorTypeAtSequenceNumber, types.ShardIteratorTypeAfterSequenceNumber:
		if in.StartingSequenceNumber == nil {
			return nil, invalidArg("StartingSequenceNumber must be provided for %s.", t)
		}
		seq := *in.StartingSequenceNumber
		if n, ok := seqShard(seq); !ok || n != sh.num {
			return nil, invalidArg("StartingSequenceNumber %s used in GetShardIterator on shard %s in stream %s under account %s is invalid.",
				seq, sh.id, s.name, f.cfg.account)
		}
		i = sh.search(seq, t == types.ShardIteratorTypeAfterSequenceNumber)
	case types.ShardIteratorTypeAtTimestamp:
		if in.Timestamp == nil {
			return nil, invalidArg("Timestamp must be provided for AT_TIMESTAMP.")
		}
		at := *in.Timestamp
		i = sort.Search(len(sh.recs), func(i int) bool { return !sh.recs[i].ApproximateArrivalTimestamp.Before(at) })
	default:
		return nil, invalidArg("1 validation error detected: Value '%s' at 'shardIteratorType' failed to satisfy constraint: "+
			"Member must satisfy enum value set: [AFTER_SEQUENCE_NUMBER, AT_SEQUENCE_NUMBER, AT_TIMESTAMP, TRIM_HORIZON, LATEST]", t)
	}
	r := &iteratorResult{it: encodeIterator(iterator{stream: s.id, shard: sh.num, pos: sh.base + i, issued: now})}
	r.out.ShardIterator = &r.it
	return &r.out, nil
}

// GetRecords returns up to Limit records (default and maximum 10000, and at
// most 10 MiB of data but always at least one record) from the iterator's
// position. Record data is the []byte given to Put, not a copy; the returned
// slice is the caller's, but the strings and times its pointers reach are
// shared and must not be modified.
//
// MillisBehindLatest is 0 when no records remain after the returned ones,
// otherwise the age of the last returned record, at least 1. On an open
// shard NextShardIterator is always set. On a closed shard, the response
// that reaches its end has a nil NextShardIterator and the ChildShards.
// An iterator older than the TTL gives *types.ExpiredIteratorException, and
// one for a trimmed shard *types.ResourceNotFoundException. It does not block.
func (f *Fake) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	if err := f.begin(ctx, OpGetRecords, in); err != nil {
		return nil, wrapSDK(OpGetRecords, err)
	}
	out, err := f.getRecords(in)
	if err != nil {
		return nil, wrapSDK(OpGetRecords, err)
	}
	return out, nil
}

// recordsResult puts the output and what its pointers reach in one allocation.
type recordsResult struct {
	out    kinesis.GetRecordsOutput
	next   string
	behind int64
}

func (f *Fake) getRecords(in *kinesis.GetRecordsInput) (*kinesis.GetRecordsOutput, error) {
	limit := maxGetRecords
	if in.Limit != nil {
		limit = int(*in.Limit)
		if limit < 1 || limit > maxGetRecords {
			return nil, invalidArg("1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: "+
				"Member must have value between 1 and %d", limit, maxGetRecords)
		}
	}
	if in.ShardIterator == nil {
		return nil, invalidArg("ShardIterator must be provided.")
	}
	it, ok := decodeIterator(*in.ShardIterator)
	if !ok {
		return nil, invalidArg("Invalid ShardIterator.")
	}
	now := f.cfg.now()
	if now.Sub(it.issued) > f.cfg.ttl {
		return nil, &types.ExpiredIteratorException{Message: aws.String("Iterator expired. The iterator was created at time " +
			it.issued.UTC().Format(time.RFC3339Nano) + " while right now it is " + now.UTC().Format(time.RFC3339Nano) +
			" which is further in the future than the tolerated delay of " +
			strconv.FormatInt(f.cfg.ttl.Milliseconds(), 10) + " milliseconds.")}
	}

	f.mu.RLock()
	defer f.mu.RUnlock()
	if it.stream >= len(f.streams) {
		return nil, invalidArg("Invalid ShardIterator.")
	}
	s := f.streams[it.stream]
	if in.StreamARN != nil && *in.StreamARN != s.arn {
		return nil, invalidArg("StreamARN %s does not match the ShardIterator.", *in.StreamARN)
	}
	if it.shard >= len(s.shards) || s.shards[it.shard] == nil {
		return nil, f.shardNotFound(shardName(it.shard), s.name)
	}
	sh := s.shards[it.shard]

	start := min(max(it.pos-sh.base, 0), len(sh.recs))
	end := min(start+limit, len(sh.recs))
	bytes := 0
	for i := start; i < end; i++ {
		if bytes += len(sh.recs[i].Data); bytes > maxGetBytes && i > start {
			end = i
			break
		}
	}

	r := &recordsResult{}
	r.out.Records = make([]types.Record, end-start)
	copy(r.out.Records, sh.recs[start:end])
	if end < len(sh.recs) {
		r.behind = 1
		if end > start {
			r.behind = max(now.Sub(*sh.recs[end-1].ApproximateArrivalTimestamp).Milliseconds(), 1)
		}
	}
	r.out.MillisBehindLatest = &r.behind
	if sh.endSeq != nil && end == len(sh.recs) {
		r.out.ChildShards = append([]types.ChildShard(nil), sh.children...)
		return &r.out, nil
	}
	r.next = encodeIterator(iterator{stream: it.stream, shard: it.shard, pos: sh.base + end, issued: now})
	r.out.NextShardIterator = &r.next
	return &r.out, nil
}
