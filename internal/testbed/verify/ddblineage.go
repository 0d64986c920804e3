package verify

import (
	"context"
	"fmt"
	"math/big"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/kinesis-esm/esm/example"
)

// DDBShard is a DynamoDB stream shard as DescribeStream lists it: its id, its parent ("": none)
// and its sequence number range (End "": open).
type DDBShard struct {
	ID, Parent, Start, End string
}

// DDBLineage checks that no invocation of a child shard started before the last invocation of
// its parent had ended, judged on the deliveries' InvokedAt and DoneAt. A DynamoDB Streams event
// does not name its shard, so each record's shard is the one whose sequence number range holds
// its SequenceNumber. It fails when a record falls in no shard, when a delivery has no times, and,
// when shards has a parent→child pair, when no pair of them both had deliveries (nothing judged).
// It also returns how many parent→child pairs were judged.
func DDBLineage(got []example.DDBDelivery, shards []DDBShard) (Check, int) {
	c := Check{Name: "parents drained before children", OK: true}
	first, last := map[string]int64{}, map[string]int64{}
	for _, d := range got {
		shard := DDBShardOf(shards, d.Record.Change.SequenceNumber)
		switch {
		case shard == "":
			return Check{Name: c.Name, Detail: fmt.Sprintf("record %q is in no shard's sequence number range", d.Record.Change.SequenceNumber)}, 0
		case d.InvokedAt == 0 || d.DoneAt == 0:
			return Check{Name: c.Name, Detail: fmt.Sprintf("the delivery of %q carries no invocation times", d.Record.Change.SequenceNumber)}, 0
		}
		if t, ok := first[shard]; !ok || d.InvokedAt < t {
			first[shard] = d.InvokedAt
		}
		last[shard] = max(last[shard], d.DoneAt)
	}
	pairs, edges := 0, 0
	for _, s := range shards {
		if s.Parent == "" {
			continue
		}
		edges++
		fc, okc := first[s.ID]
		lp, okp := last[s.Parent]
		if !okc || !okp {
			continue
		}
		pairs++
		if lp > fc && c.OK {
			c.OK, c.Detail = false, fmt.Sprintf("%s invoked at %s, before the last invocation of its parent %s ended at %s (%s later)",
				s.ID, time.Unix(0, fc).UTC().Format(time.StampMicro), s.Parent, time.Unix(0, lp).UTC().Format(time.StampMicro), time.Duration(lp-fc))
		}
	}
	switch {
	case c.OK && edges > 0 && pairs == 0:
		c.OK, c.Detail = false, "shards have parents but no parent and child both had deliveries: nothing was judged"
	case c.OK:
		c.Detail = fmt.Sprintf("%d parent→child pairs checked on invocation start and end times", pairs)
	}
	return c, pairs
}

// DDBShardOf is the id of the shard whose sequence number range holds seq ("" when none does).
func DDBShardOf(shards []DDBShard, seq string) string {
	n, ok := new(big.Int).SetString(seq, 10)
	if !ok {
		return ""
	}
	for _, s := range shards {
		lo, ok := new(big.Int).SetString(s.Start, 10)
		if !ok || n.Cmp(lo) < 0 {
			continue
		}
		if hi, ok := new(big.Int).SetString(s.End, 10); !ok || n.Cmp(hi) <= 0 {
			return s.ID
		}
	}
	return ""
}

// DDBDescriber is what ListDDBShards needs: a DynamoDB Streams client.
type DDBDescriber interface {
	DescribeStream(context.Context, *dynamodbstreams.DescribeStreamInput, ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
}

// ListDDBShards lists every shard of a stream (DescribeStream, paged), in the order listed.
func ListDDBShards(ctx context.Context, st DDBDescriber, arn string) ([]DDBShard, error) {
	var out []DDBShard
	in := &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)}
	for {
		d, err := st.DescribeStream(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, s := range d.StreamDescription.Shards {
			sh := DDBShard{ID: aws.ToString(s.ShardId), Parent: aws.ToString(s.ParentShardId)}
			if r := s.SequenceNumberRange; r != nil {
				sh.Start, sh.End = aws.ToString(r.StartingSequenceNumber), aws.ToString(r.EndingSequenceNumber)
			}
			out = append(out, sh)
		}
		if in.ExclusiveStartShardId = d.StreamDescription.LastEvaluatedShardId; in.ExclusiveStartShardId == nil {
			return out, nil
		}
	}
}

// DDBEventRecords are the records of deliveries, in delivery order, for DDBRecords.
func DDBEventRecords(got []example.DDBDelivery) []events.DynamoDBEventRecord {
	out := make([]events.DynamoDBEventRecord, len(got))
	for i, d := range got {
		out[i] = d.Record
	}
	return out
}

// DDBReader is what ReadDDBShards needs: a DynamoDB Streams client.
type DDBReader interface {
	DDBDescriber
	GetShardIterator(context.Context, *dynamodbstreams.GetShardIteratorInput, ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(context.Context, *dynamodbstreams.GetRecordsInput, ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// ReadDDBShards reads every shard of a stream from its trim horizon to its end (an open shard's
// end for now) and returns the shards (as ListDDBShards) and the shard of each record by its
// SequenceNumber. Unlike DDBShardOf it holds when several shards are open at once, whose
// sequence number ranges overlap.
func ReadDDBShards(ctx context.Context, st DDBReader, arn string) ([]DDBShard, map[string]string, error) {
	shards, err := ListDDBShards(ctx, st, arn)
	if err != nil {
		return nil, nil, err
	}
	of := map[string]string{}
	for _, s := range shards {
		it, err := st.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn),
			ShardId: aws.String(s.ID), ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			return nil, nil, fmt.Errorf("read shard %s: %w", s.ID, err)
		}
		for next := it.ShardIterator; next != nil; {
			out, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: next})
			if err != nil {
				return nil, nil, fmt.Errorf("read shard %s: %w", s.ID, err)
			}
			for _, r := range out.Records {
				of[aws.ToString(r.Dynamodb.SequenceNumber)] = s.ID
			}
			if next = out.NextShardIterator; len(out.Records) == 0 {
				break // an open shard's end, or a closed one's
			}
		}
	}
	return shards, of, nil
}
