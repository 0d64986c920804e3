package dynamostreams

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/kinesis-esm/esm/source"
)

// EventSource is the events' eventSource.
const EventSource = "aws:dynamodb"

// Stream is a DynamoDB stream as a mapping reads it: a poller.Source. Create it with New.
type Stream struct {
	api API
	arn StreamARN
	id  source.Identity
	log *slog.Logger
	now func() time.Time
}

// Option configures New.
type Option func(*Stream)

// WithLogger sets the logger of the source's warnings (a position trimmed away, a shard read by
// more than two readers). Default: none.
func WithLogger(l *slog.Logger) Option { return func(s *Stream) { s.log = l } }

// New returns the DynamoDB stream streamARN read with api. An ARN Lambda would refuse (a table's,
// a Kinesis stream's) is a *source.ValidationError naming EventSourceArn; New makes no call.
func New(api API, streamARN string, opts ...Option) (*Stream, error) {
	a, err := ParseStreamARN(streamARN)
	if err != nil {
		return nil, err
	}
	if api == nil {
		return nil, &source.ValidationError{Field: "DynamoDBStreamsAPI", Message: "dynamostreams: a DynamoDB Streams client is required"}
	}
	s := &Stream{api: api, arn: a, log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: time.Now}
	for _, o := range opts {
		o(s)
	}
	s.id = source.Identity{ARN: a.String(), Name: a.Table, EventSource: EventSource,
		Partition: a.Partition, Region: a.Region, Account: a.Account}
	return s, nil
}

// Identity is the stream's ARN, its table's name, region and account, and the events'
// eventSource; a DynamoDB event has no invokeIdentityArn.
func (s *Stream) Identity() source.Identity { return s.id }

// ARN is the parsed stream ARN.
func (s *Stream) ARN() StreamARN { return s.arn }

// Limits are DynamoDB Streams' and Lambda's: 1,000 records a read, four reads a second per shard.
func (s *Stream) Limits() source.Limits {
	return source.Limits{MaxRecordsPerRead: MaxRecordsPerRead, MinPollSpacing: PollInterval, PollInterval: PollInterval}
}

// Shards lists every shard of the stream, open and closed, each with its parent.
func (s *Stream) Shards(ctx context.Context) ([]source.Shard, error) {
	return ListShards(ctx, s.api, s.id.ARN)
}

// Retention is DynamoDB Streams' fixed 24 hours.
func (s *Stream) Retention(context.Context) (time.Duration, error) { return Retention, nil }

// Open returns an iterator of the shard at at. A position behind the 24-hour trim point
// (TrimmedDataAccessException) opens at TRIM_HORIZON, with a warning: the records between are
// gone, as they are for Lambda. A closed shard trimmed away whole (the stream no longer has it:
// ResourceNotFoundException, or TRIM_HORIZON itself trimmed) opens at its end: the first Read
// ends it, with its children.
func (s *Stream) Open(ctx context.Context, shardID string, at source.Position) (string, error) {
	shardReaders.touch(s.log, s, s.id.ARN, shardID, s.now())
	it, err := s.open(ctx, shardID, at)
	if errors.Is(err, errTrimmed) && at.Type != source.TrimHorizon {
		s.log.Warn("position trimmed from the DynamoDB stream (older than 24 hours): reading from the oldest record kept; the records between are lost",
			"shard_id", shardID, "position", describePosition(at), "error", err)
		it, err = s.open(ctx, shardID, source.Position{Type: source.TrimHorizon})
	}
	var gone *types.ResourceNotFoundException
	if errors.Is(err, errTrimmed) || errors.As(err, &gone) {
		s.log.Info("shard trimmed away whole: it ends here", "shard_id", shardID, "error", err)
		return trimmedAway, nil
	}
	return it, err
}

// trimmedAway is the iterator of a shard that has no record left: Read ends the shard at once.
// DynamoDB Streams' iterators are opaque ARN-prefixed tokens; none is this text.
const trimmedAway = "esm:trimmed-away"

func (s *Stream) open(ctx context.Context, shardID string, at source.Position) (string, error) {
	out, err := s.api.GetShardIterator(ctx, iteratorInput(s.id.ARN, shardID, at))
	if err != nil {
		return "", classify(err)
	}
	return aws.ToString(out.ShardIterator), nil
}

// Read reads up to limit records (at most 1,000; the service also stops at 1 MB) at iterator. At
// a closed shard's end (a null NextShardIterator: DynamoDB Streams gives no ChildShards) it
// lists the shard's children with ShardFilter CHILD_SHARDS; none listed yet leaves them to the
// engine's next listing. An expired iterator (after 15 minutes) and one whose position was
// trimmed meanwhile are both source.ErrExpired: the engine opens the shard again.
func (s *Stream) Read(ctx context.Context, shardID, iterator string, limit int) (source.Page, error) {
	shardReaders.touch(s.log, s, s.id.ARN, shardID, s.now())
	if iterator == trimmedAway {
		return s.end(ctx, shardID, source.Page{})
	}
	limit = min(max(limit, 1), MaxRecordsPerRead)
	out, err := s.api.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String(iterator), Limit: aws.Int32(int32(limit))})
	if err != nil {
		err = classify(err)
		if errors.Is(err, errTrimmed) {
			err = classified{source.ErrExpired, err}
		}
		return source.Page{}, err
	}
	page := source.Page{Records: make([]source.Record, 0, len(out.Records)), Next: aws.ToString(out.NextShardIterator)}
	for i := range out.Records {
		rec, err := s.record(&out.Records[i])
		if err != nil {
			return source.Page{}, err
		}
		page.Records = append(page.Records, rec)
	}
	if out.NextShardIterator == nil {
		return s.end(ctx, shardID, page)
	}
	return page, nil
}

// end is page as the last of the shard: no next iterator, and the shard's children, listed with
// CHILD_SHARDS (none when that fails: the engine's next listing finds them).
func (s *Stream) end(ctx context.Context, shardID string, page source.Page) (source.Page, error) {
	shardReaders.done(s, s.id.ARN, shardID)
	page.Next = ""
	children, err := Children(ctx, s.api, s.id.ARN, shardID)
	if err != nil {
		s.log.Debug("listing a closed shard's children failed; the next listing finds them", "shard_id", shardID, "error", err)
		return page, nil
	}
	page.Children = children
	return page, nil
}

// record is a stream record as the engine sees it: ordered by its SequenceNumber, aged by its
// ApproximateCreationDateTime, kept in order with the records of the same item (its keys are its
// partition key), its Data the record's object in the event.
func (s *Stream) record(r *types.Record) (source.Record, error) {
	data, err := appendRecord(nil, r, s.id.ARN)
	if err != nil {
		return source.Record{}, err
	}
	rec := source.Record{SequenceNumber: sequenceNumber(r), Data: data}
	if d := r.Dynamodb; d != nil {
		if d.ApproximateCreationDateTime != nil {
			rec.ArrivalTime = *d.ApproximateCreationDateTime
		}
		keys, err := appendAttributeMap(nil, d.Keys)
		if err != nil {
			return source.Record{}, err
		}
		rec.PartitionKey = string(keys)
	}
	return rec, nil
}
