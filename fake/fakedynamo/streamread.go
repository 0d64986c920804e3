package fakedynamo

import (
	"context"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

func trimmed() error {
	return &streamtypes.TrimmedDataAccessException{Message: aws.String("The operation attempted to read past the oldest stream record in a shard.")}
}

func expired() error {
	return &streamtypes.ExpiredIteratorException{Message: aws.String("Iterator expired. The iterator was created more than 15 minutes ago.")}
}

// GetShardIterator returns an iterator into a shard: TRIM_HORIZON (its oldest retained
// record), LATEST (after its newest), AT_SEQUENCE_NUMBER and AFTER_SEQUENCE_NUMBER (at or
// after a record of the shard; a trimmed one is a TrimmedDataAccessException) or AT_TIMESTAMP
// (its first record created at or after Timestamp, which must not lie in the future). A
// sequence number outside the shard is a ValidationException (AWS does not document which error).
func (d *DB) GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	return serveStreams(ctx, d, OpGetShardIterator, tableOfStream(aws.ToString(in.StreamArn)), in, func() (*dynamodbstreams.GetShardIteratorOutput, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		id := aws.ToString(in.ShardId)
		if len(id) < 28 || len(id) > 65 {
			return nil, validation("1 validation error detected: Value '%s' at 'shardId' failed to satisfy constraint: Member must have length between 28 and 65", id)
		}
		d.tick()
		s, err := d.streamLocked(in.StreamArn)
		if err != nil {
			return nil, err
		}
		sh := s.shardByID(id)
		if sh == nil {
			return nil, streamNotFound("Shard does not exist") // never made, or trimmed away
		}
		pos, err := d.position(sh, in)
		if err != nil {
			return nil, err
		}
		it := iterator{arn: s.arn, shard: sh.id, pos: pos, issued: d.now()}
		return &dynamodbstreams.GetShardIteratorOutput{ShardIterator: aws.String(it.encode())}, nil
	})
}

// position is where an iterator of in's type starts in sh (an absolute position).
func (d *DB) position(sh *shard, in *dynamodbstreams.GetShardIteratorInput) (int, error) {
	end := sh.base + len(sh.records)
	switch in.ShardIteratorType {
	case streamtypes.ShardIteratorTypeTrimHorizon:
		return sh.base, nil
	case streamtypes.ShardIteratorTypeLatest:
		return end, nil
	case streamtypes.ShardIteratorTypeAtSequenceNumber, streamtypes.ShardIteratorTypeAfterSequenceNumber:
		if in.SequenceNumber == nil {
			return 0, validation("SequenceNumber is required for iterator type %s", in.ShardIteratorType)
		}
		n, ok := parseStreamSeq(*in.SequenceNumber)
		if !ok || n < sh.start || n > sh.last {
			return 0, validation("Invalid SequenceNumber %s for shard %s", *in.SequenceNumber, sh.id)
		}
		if sh.base > 0 && n < sh.firstSeq() {
			return 0, trimmed()
		}
		after := in.ShardIteratorType == streamtypes.ShardIteratorTypeAfterSequenceNumber
		return sh.base + sort.Search(len(sh.records), func(i int) bool {
			return sh.records[i].seq > n || (!after && sh.records[i].seq == n)
		}), nil
	case streamtypes.ShardIteratorTypeAtTimestamp:
		if in.Timestamp == nil {
			return 0, validation("Timestamp is required for iterator type AT_TIMESTAMP")
		}
		if in.Timestamp.After(d.now()) {
			return 0, validation("The timestamp %s is in the future", in.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z"))
		}
		return sh.base + sort.Search(len(sh.records), func(i int) bool { return !sh.records[i].at.Before(*in.Timestamp) }), nil
	}
	return 0, validation("1 validation error detected: Value '%s' at 'shardIteratorType' failed to satisfy constraint: Member must satisfy enum value set: [TRIM_HORIZON, LATEST, AT_SEQUENCE_NUMBER, AFTER_SEQUENCE_NUMBER, AT_TIMESTAMP]", in.ShardIteratorType)
}

// firstSeq is the oldest retained record's sequence number, or past every record when none
// is retained.
func (sh *shard) firstSeq() uint64 {
	if len(sh.records) == 0 {
		return ^uint64(0)
	}
	return sh.records[0].seq
}

// GetRecords reads from an iterator: at most Limit records (1,000 by default and at most),
// and no more than 1 MB of them (SizeBytes), but at least one. NextShardIterator continues
// after them; it is null once a closed shard has been read to its end. An iterator expires
// WithIteratorTTL after it was issued (ExpiredIteratorException); one whose records were
// trimmed since is a TrimmedDataAccessException.
func (d *DB) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	raw := aws.ToString(in.ShardIterator)
	it, ok := decodeIterator(raw)
	return serveStreams(ctx, d, OpGetRecords, tableOfStream(it.arn), in, func() (*dynamodbstreams.GetRecordsOutput, error) {
		if len(raw) < 1 || len(raw) > 2048 || !ok {
			return nil, validation("Invalid ShardIterator")
		}
		limit, err := limitOf(in.Limit, maxStreamRecords)
		if err != nil {
			return nil, err
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		d.tick()
		now := d.now()
		if now.Sub(it.issued) > d.iterTTL {
			return nil, expired()
		}
		s, err := d.streamLocked(&it.arn)
		if err != nil {
			return nil, err
		}
		sh, err := s.shardLocked(it.shard)
		if err != nil {
			return nil, err
		}
		if d.readRate > 0 {
			if !sh.reads.ok(now) {
				return nil, limitExceeded()
			}
			sh.reads.tokens--
		}
		if it.pos < sh.base {
			return nil, trimmed()
		}
		return d.readShard(s, sh, it, limit), nil
	})
}

// readShard answers GetRecords from an iterator whose position is retained.
func (d *DB) readShard(s *stream, sh *shard, it iterator, limit int) *dynamodbstreams.GetRecordsOutput {
	out := &dynamodbstreams.GetRecordsOutput{Records: []streamtypes.Record{}}
	pos := min(it.pos, sh.base+len(sh.records))
	bytes := 0
	for i := pos - sh.base; i < len(sh.records) && len(out.Records) < limit; i++ {
		r := d.view(s, sh.records[i])
		size := int(aws.ToInt64(r.Dynamodb.SizeBytes))
		if len(out.Records) > 0 && bytes+size > maxStreamBytes {
			break
		}
		out.Records, bytes, pos = append(out.Records, r), bytes+size, pos+1
	}
	if sh.closed && pos == sh.base+len(sh.records) {
		return out // the shard's end: no next iterator
	}
	next := iterator{arn: s.arn, shard: sh.id, pos: pos, issued: d.now()}
	out.NextShardIterator = aws.String(next.encode())
	return out
}

// shardLocked finds the shard of an iterator: one trimmed away since is a
// TrimmedDataAccessException (the iterator reads records that no longer exist, as AWS documents
// for a record trimmed after its iterator was made), one never made a
// ResourceNotFoundException. GetShardIterator on a shard trimmed away is a
// ResourceNotFoundException: the shard no longer exists. d.mu is held.
func (s *stream) shardLocked(id string) (*shard, error) {
	if sh := s.shardByID(id); sh != nil {
		return sh, nil
	}
	if s.trimmed[id] {
		return nil, trimmed()
	}
	return nil, streamNotFound("Shard does not exist")
}
