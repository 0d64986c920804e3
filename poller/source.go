package poller

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesis-esm/esm/source"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// Source is the stream a mapping reads: what the engine needs of it, and all it knows of it. The
// reader, batching, the failure rules, leases and checkpoints are the same whatever the source;
// what differs between sources (the shards' lineage, positions, the errors of a read, limits and
// pace, identity) is behind this interface, in the values of package source. The Kinesis source
// is source/kinesis. See "The source seam" in DESIGN.md.
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

// kinesisReads is what the engine still takes from a Kinesis source beyond Source while its
// reads move behind the seam: the client it reads shards with, the enhanced fan-out consumer it
// reads through, and the options of its subscriptions (source/kinesis.Stream has them).
type kinesisReads interface {
	Client() kinesissrc.API
	ConsumerARN() string
	SubscribeOptions() []func(*kinesis.Options)
}

// useSource sets the poller up to read its source.
func (p *Poller) useSource() error {
	k, ok := p.src.(kinesisReads)
	if !ok {
		return &ValidationError{Field: "EventSourceArn", Message: fmt.Sprintf("poller: cannot read %s (%s): no reader for its source yet", p.id.ARN, p.id.EventSource)}
	}
	if p.kin = k.Client(); p.kin == nil {
		return &ValidationError{Field: "kinesissrc.API", Message: "poller: the Kinesis source has no client"}
	}
	p.starter, _ = p.kin.(getRecordsStarter)
	if c := k.ConsumerARN(); c != "" {
		p.useSubscriptions(c, k.SubscribeOptions())
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
