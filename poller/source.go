package poller

import (
	"cmp"
	"context"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/source"
)

// Source is the stream a mapping reads: what the engine needs of it, and all it knows of it. The
// reader, batching, the failure rules, leases and checkpoints are the same whatever the source;
// what differs between sources (the shards' lineage, positions, the errors of a read, limits and
// pace, identity) is behind this interface, in the values of package source, and its optional
// capabilities below. The sources are source/kinesis and source/dynamostreams. See "The source
// seam" in DESIGN.md.
type Source interface {
	// Identity is who the source is in events and messages: its ARN (which also keys the
	// checkpoints), eventSource, region and account, and the events' invokeIdentityArn.
	Identity() source.Identity
	// Limits are the source's limits and pace.
	Limits() source.Limits
	// Shards lists every shard of the stream, open and closed, each with its parents. A stream
	// that does not exist is an error wrapping source.ErrNotFound. Run lists at start, at every
	// ShardSyncInterval and whenever a child names a parent it does not know.
	Shards(ctx context.Context) ([]source.Shard, error)
	// Retention is how long the stream keeps a record (0: unknown). A record retried past it has
	// left the stream and is discarded.
	Retention(ctx context.Context) (time.Duration, error)
	// Open returns an iterator of the shard at a position; Read reads up to limit records of the
	// shard at an iterator, and the iterator of the next read, or the shard's end with its
	// children (Read is given the shard's id: a source whose reads do not name a shard's children,
	// DynamoDB Streams, lists them at the end by it). Their errors wrap the class source defines
	// they are of (source.ErrThrottled, ErrExpired, ErrInvalidPosition); any other error is
	// transient.
	Open(ctx context.Context, shardID string, at source.Position) (iterator string, err error)
	Read(ctx context.Context, shardID, iterator string, limit int) (source.Page, error)
}

// ErrStreamNotFound is returned by Run when the stream does not exist: source.ErrNotFound.
var ErrStreamNotFound = source.ErrNotFound

// The optional capabilities of a source: what the engine uses where a source has it, beyond
// Source. The Kinesis source has both.

// ReadStarter is a source that starts a read without a goroutine waiting for its answer (the
// Kinesis source's lean GetRecords path): the idle poller (idle.go) starts the polls of caught-up
// shards with it, those of one due time in batches. Without it, each idle poll is a Read on a
// goroutine the idle poller keeps for such calls.
type ReadStarter interface {
	// StartRead starts Read(ctx, shardID, iterator, limit): done gets the page, or finish to run
	// on a goroutine of the caller's for the page or the error. Reporting false, it did nothing:
	// the read is to be made with Read.
	StartRead(ctx context.Context, shardID, iterator string, limit int, done func(page source.Page, finish func() (source.Page, error))) bool
	// Batch starts a batch: the reads started until send is called leave together.
	Batch() (send func())
}

// Subscriber is a source whose shards can be read by subscription, the source pushing the records
// (Kinesis' enhanced fan-out): a reader then takes its shard's records from one subscription at a
// time instead of reading (subscribe.go, pump.go).
type Subscriber interface {
	// ConsumerARN is what the subscriptions are made through; "" when the source is polled.
	ConsumerARN() string
	// Subscribe subscribes to the shard at a position, for as long as ctx lasts. Its errors are
	// classified as Read's; source.ErrInUse: another subscriber holds the shard.
	Subscribe(ctx context.Context, shardID string, at source.Position) (source.Subscription, error)
}

// Events is a source that says how its records appear in the function's event (the Kinesis
// source: events.KinesisEvent's records). A source without it has each record's Data as its object
// in the event's Records array, as it is (DynamoDB Streams: events.DynamoDBEvent's records), and
// FilterCriteria match that object as a document (filter.Filters.MatchDocument).
type Events interface {
	// AppendEventRecord appends rec's object in the event's Records array, for the shard shardID.
	// With data false it leaves rec's payload out and returns the length it would have taken
	// (omitted), so that an event is sized without being written.
	AppendEventRecord(b []byte, shardID string, rec *source.Record, data bool) (out []byte, omitted int)
	// EventRecords are the records rec stands for in the event when that is not rec itself (ok):
	// the user records of a KPL aggregate the Kinesis source de-aggregates when it reads through
	// a consumer, as Lambda does. FilterCriteria apply to each of them.
	EventRecords(rec *source.Record) (records []source.Record, ok bool)
}

// KinesisEvents is a source whose batches a RecordsInvoker can take as the events.KinesisEvent a
// Go handler receives, without JSON (the Kinesis source): KinesisEvent builds it for the records
// of the event (Events.EventRecords' where a record stands for others), deep-equal to what
// aws-lambda-go decodes from the JSON the source's Events write. Without it, every batch goes to
// the function as JSON.
type KinesisEvents interface {
	KinesisEvent(shardID string, recs []source.Record) *events.KinesisEvent
}

// readable is a source that can be made without the means to read (source/kinesis.Stream without
// a client, which only names a mapping's events): New refuses it with Readable's error.
type readable interface {
	Readable() error
}

// useSource sets the poller up to read its source: by subscription where it has a consumer.
func (p *Poller) useSource() error {
	if r, ok := p.src.(readable); ok {
		if err := r.Readable(); err != nil {
			return err
		}
	}
	p.maxRead = min(cmp.Or(p.src.Limits().MaxRecordsPerRead, MaxBatchSize), MaxBatchSize)
	if s, ok := p.src.(Subscriber); ok && s.ConsumerARN() != "" {
		p.useSubscriptions(s)
	} else {
		p.efo = nil // timings a test set, for a source that polls
	}
	return nil
}

// listShards lists the source's shards; with enhanced fan-out it notes those that are closed (a
// closed shard is read to its end by polling, subscribe.go).
func (p *Poller) listShards(ctx context.Context) ([]source.Shard, error) {
	shards, err := p.src.Shards(ctx)
	if err == nil && p.efo != nil {
		p.efo.noteClosed(shards)
	}
	return shards, err
}
