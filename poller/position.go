package poller

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/source"
)

// position is where GetShardIterator starts: after the last record read, else after the
// checkpoint, else the shard's starting position (its first record for shards found later).
type position struct {
	kind      types.ShardIteratorType
	seq       string
	timestamp time.Time
}

// at is pos as a source opens a shard at it.
func (pos position) at() source.Position {
	return source.Position{Type: source.PositionType(pos.kind), SequenceNumber: pos.seq, Timestamp: pos.timestamp}
}

func resumePosition(lastRead string, pr ShardProgress, ts time.Time) position {
	switch {
	case lastRead != "":
		return position{kind: types.ShardIteratorTypeAfterSequenceNumber, seq: lastRead}
	case pr.Checkpoint != "":
		return position{kind: types.ShardIteratorTypeAfterSequenceNumber, seq: pr.Checkpoint}
	case pr.Rewind != nil && pr.Rewind.Sequence != "":
		return position{kind: types.ShardIteratorTypeAtSequenceNumber, seq: pr.Rewind.Sequence}
	case pr.Rewind != nil && !pr.Rewind.Timestamp.IsZero():
		return position{kind: types.ShardIteratorTypeAtTimestamp, timestamp: pr.Rewind.Timestamp}
	case pr.Rewind != nil:
		return position{kind: types.ShardIteratorTypeTrimHorizon}
	case pr.Start == Latest && !pr.StartTimestamp.IsZero():
		return position{kind: types.ShardIteratorTypeAtTimestamp, timestamp: pr.StartTimestamp}
	case pr.Start == Latest:
		return position{kind: types.ShardIteratorTypeLatest}
	case pr.Start == AtTimestamp:
		return position{kind: types.ShardIteratorTypeAtTimestamp, timestamp: ts}
	default:
		return position{kind: types.ShardIteratorTypeTrimHorizon}
	}
}

// openPosition is where the reader opens (or subscribes): its resumePosition, but LATEST itself
// the first time when this run decided a LATEST start (a retry must not skip what arrived since).
// first is that position, pos the resumePosition.
func (r *reader) openPosition() (first, pos position) {
	pr := r.currentProgress()
	pos = resumePosition(r.lastRead, pr, r.p.cfg.StartingPositionTimestamp)
	first = pos
	if r.atTip && pos.kind == types.ShardIteratorTypeAtTimestamp && pr.Start == Latest {
		first = position{kind: types.ShardIteratorTypeLatest}
	}
	return first, pos
}

// iteratorInput is the GetShardIterator request for pos.
func (r *reader) iteratorInput(pos position) *kinesis.GetShardIteratorInput {
	in := &kinesis.GetShardIteratorInput{StreamARN: &r.p.id.ARN, ShardId: &r.shardID, ShardIteratorType: pos.kind}
	if pos.seq != "" {
		in.StartingSequenceNumber = aws.String(pos.seq)
	}
	if pos.kind == types.ShardIteratorTypeAtTimestamp {
		in.Timestamp = aws.Time(pos.timestamp)
	}
	return in
}

func (r *reader) describePosition() string {
	pos := resumePosition(r.lastRead, r.progress, r.p.cfg.StartingPositionTimestamp)
	switch pos.kind {
	case types.ShardIteratorTypeAfterSequenceNumber:
		return "after " + pos.seq
	case types.ShardIteratorTypeAtSequenceNumber:
		return "at " + pos.seq
	case types.ShardIteratorTypeAtTimestamp:
		return "at " + pos.timestamp.UTC().Format(time.RFC3339Nano)
	}
	return string(pos.kind)
}
