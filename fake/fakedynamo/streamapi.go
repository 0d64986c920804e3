package fakedynamo

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go"
)

// Operation names of the DynamoDB Streams API, as Call.Op.
const (
	OpListStreams      = "ListStreams"      // a ListStreams call
	OpDescribeStream   = "DescribeStream"   // a DescribeStream call
	OpGetShardIterator = "GetShardIterator" // a GetShardIterator call
	OpGetRecords       = "GetRecords"       // a GetRecords call
)

// serveStreams runs one DynamoDB Streams call like serve, with the streams API's errors: a
// Throttle fault or burst is a LimitExceededException, a ServerError its InternalServerError.
func serveStreams[T any](ctx context.Context, d *DB, op, tableName string, in any, run func() (T, error)) (T, error) {
	fault, err := d.begin(ctx, op, tableName, in)
	if err == nil {
		var out T
		out, err = finish(ctx, d, op, fault, run)
		if err == nil {
			return out, nil
		}
	}
	var zero T
	var pt *types.ProvisionedThroughputExceededException
	var ise *types.InternalServerError
	switch {
	case errors.As(err, &pt):
		err = limitExceeded()
	case errors.As(err, &ise):
		err = &streamtypes.InternalServerError{Message: ise.Message}
	}
	var oe *smithy.OperationError
	if errors.As(err, &oe) {
		err = oe.Err
	}
	return zero, &smithy.OperationError{ServiceID: "DynamoDB Streams", OperationName: op, Err: err}
}

func limitExceeded() error {
	return &streamtypes.LimitExceededException{Message: aws.String("Your request rate is too high. The AWS SDKs for DynamoDB automatically retry requests that receive this exception.")}
}

func streamNotFound(what string) error {
	return &streamtypes.ResourceNotFoundException{Message: aws.String("Requested resource not found: " + what)}
}

// tableOfStream is the table name inside a stream ARN ("" if it is not one).
func tableOfStream(arn string) string {
	_, rest, ok := strings.Cut(arn, ":table/")
	name, _, ok2 := strings.Cut(rest, "/stream/")
	if !ok || !ok2 {
		return ""
	}
	return name
}

// streamLocked finds a stream by ARN; d.mu is held.
func (d *DB) streamLocked(arn *string) (*stream, error) {
	if arn == nil || len(*arn) < 37 || len(*arn) > 1024 {
		return nil, validation("1 validation error detected: Value '%s' at 'streamArn' failed to satisfy constraint: Member must have length greater than or equal to 37", aws.ToString(arn))
	}
	for _, s := range d.streams {
		if s.arn == *arn {
			return s, nil
		}
	}
	return nil, streamNotFound("Stream: " + *arn + " not found")
}

func (s *stream) shardByID(id string) *shard {
	for _, sh := range s.shards {
		if sh.id == id {
			return sh
		}
	}
	return nil
}

// limitOf checks an optional Limit against [1, most] and returns it (most when absent).
func limitOf(l *int32, most int) (int, error) {
	if l == nil {
		return most, nil
	}
	if *l < 1 || int(*l) > most {
		return 0, validation("1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value between 1 and %d", *l, most)
	}
	return int(*l), nil
}

// ListStreams lists streams, of one table if TableName is set, in creation order, paged by
// Limit (at most 100) and ExclusiveStartStreamArn. Disabled streams stay listed until their
// records are trimmed.
func (d *DB) ListStreams(ctx context.Context, in *dynamodbstreams.ListStreamsInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.ListStreamsOutput, error) {
	return serveStreams(ctx, d, OpListStreams, aws.ToString(in.TableName), in, func() (*dynamodbstreams.ListStreamsOutput, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		limit, err := limitOf(in.Limit, 100)
		if err != nil {
			return nil, err
		}
		d.tick()
		out := &dynamodbstreams.ListStreamsOutput{Streams: []streamtypes.Stream{}}
		started := in.ExclusiveStartStreamArn == nil
		for _, s := range d.streams {
			if !started {
				started = s.arn == *in.ExclusiveStartStreamArn
				continue
			}
			if in.TableName != nil && s.table != *in.TableName {
				continue
			}
			if len(out.Streams) == limit {
				out.LastEvaluatedStreamArn = out.Streams[limit-1].StreamArn
				break
			}
			out.Streams = append(out.Streams, streamtypes.Stream{StreamArn: aws.String(s.arn), StreamLabel: aws.String(s.label), TableName: aws.String(s.table)})
		}
		return out, nil
	})
}

// DescribeStream describes a stream and its shards in creation order, paged by Limit (at most
// 100) and ExclusiveStartShardId; ShardFilter CHILD_SHARDS lists one shard's children instead.
// A closed shard has an EndingSequenceNumber.
func (d *DB) DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	return serveStreams(ctx, d, OpDescribeStream, tableOfStream(aws.ToString(in.StreamArn)), in, func() (*dynamodbstreams.DescribeStreamOutput, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		limit, err := limitOf(in.Limit, 100)
		if err != nil {
			return nil, err
		}
		d.tick()
		s, err := d.streamLocked(in.StreamArn)
		if err != nil {
			return nil, err
		}
		shards, err := pickShards(s, in, limit)
		if err != nil {
			return nil, err
		}
		desc := &streamtypes.StreamDescription{
			CreationRequestDateTime: aws.Time(s.created), StreamArn: aws.String(s.arn), StreamLabel: aws.String(s.label),
			StreamStatus: streamtypes.StreamStatusEnabled, StreamViewType: streamtypes.StreamViewType(s.view), TableName: aws.String(s.table),
			Shards: []streamtypes.Shard{},
		}
		if !s.enabled {
			desc.StreamStatus = streamtypes.StreamStatusDisabled
		}
		for _, k := range s.keySchema {
			desc.KeySchema = append(desc.KeySchema, streamtypes.KeySchemaElement{AttributeName: k.AttributeName, KeyType: streamtypes.KeyType(k.KeyType)})
		}
		for _, sh := range shards {
			out := streamtypes.Shard{ShardId: aws.String(sh.id), SequenceNumberRange: &streamtypes.SequenceNumberRange{StartingSequenceNumber: aws.String(formatStreamSeq(sh.start))}}
			if sh.parent != "" {
				out.ParentShardId = aws.String(sh.parent)
			}
			if sh.closed {
				out.SequenceNumberRange.EndingSequenceNumber = aws.String(formatStreamSeq(sh.end))
			}
			desc.Shards = append(desc.Shards, out)
		}
		if len(shards) == limit && in.ShardFilter == nil && shards[limit-1] != s.shards[len(s.shards)-1] {
			desc.LastEvaluatedShardId = aws.String(shards[limit-1].id)
		}
		return &dynamodbstreams.DescribeStreamOutput{StreamDescription: desc}, nil
	})
}

// pickShards is the page of shards DescribeStream answers with.
func pickShards(s *stream, in *dynamodbstreams.DescribeStreamInput, limit int) ([]*shard, error) {
	if f := in.ShardFilter; f != nil {
		if f.Type != streamtypes.ShardFilterTypeChildShards || aws.ToString(f.ShardId) == "" {
			return nil, validation("1 validation error detected: ShardFilter must have Type CHILD_SHARDS and a ShardId")
		}
		var out []*shard
		for _, sh := range s.shards {
			if sh.parent == *f.ShardId && len(out) < limit {
				out = append(out, sh)
			}
		}
		return out, nil
	}
	from := 0
	if id := aws.ToString(in.ExclusiveStartShardId); id != "" {
		// Shard ids sort in creation order, so a start id that has since been trimmed still
		// places the page.
		from = len(s.shards)
		if i := slices.IndexFunc(s.shards, func(sh *shard) bool { return sh.id > id }); i >= 0 {
			from = i
		}
	}
	return s.shards[from:min(len(s.shards), from+limit)], nil
}

// iterator is a decoded shard iterator: a position in a shard, and when it was issued.
type iterator struct {
	arn, shard string
	pos        int
	issued     time.Time
}

// encode renders it as DynamoDB does, the stream ARN, then opaque text.
func (it iterator) encode() string {
	tail := fmt.Sprintf("%s/%d/%d", it.shard, it.pos, it.issued.UnixNano())
	return it.arn + "|1|" + base64.RawURLEncoding.EncodeToString([]byte(tail))
}

func decodeIterator(s string) (iterator, bool) {
	arn, tail, ok := strings.Cut(s, "|1|")
	if !ok {
		return iterator{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(tail)
	if err != nil {
		return iterator{}, false
	}
	f := strings.Split(string(raw), "/")
	if len(f) != 3 {
		return iterator{}, false
	}
	pos, err1 := strconv.Atoi(f[1])
	issued, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || pos < 0 {
		return iterator{}, false
	}
	return iterator{arn: arn, shard: f[0], pos: pos, issued: time.Unix(0, issued)}, true
}
