package poller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// The pump: the goroutine that holds a reader's enhanced fan-out subscription (subscribe.go).

// pump holds one shard's subscription and hands its events over.
type pump struct {
	e       *efo
	shardID string
	log     *slog.Logger
	events  chan<- subEvent
	pos     *types.StartingPosition
	// fallback replaces pos after the first attempt while no continuation has come.
	fallback *types.StartingPosition
	last     string // the last record handed over
	bo       backoff
	now      func() time.Time
	obs      SubscriptionObserver
	made     int // subscriptions made: the later ones are renewals
}

// run subscribes until the shard ends or ctx ends: it resubscribes at once after a subscription
// that handed events over, and backs off after a failed subscribe or one that yielded nothing.
func (m *pump) run(ctx context.Context) {
	_ = retry(ctx, &m.bo, func(int) (step, error) { return m.subscribe(ctx) }, func(err error, d time.Duration) {
		var inUse *types.ResourceInUseException
		if errors.As(err, &inUse) {
			m.obs.SubscriptionInUse(m.shardID)
			m.log.Info("shard subscription in use; backing off", "backoff", d)
		} else {
			m.log.Warn("subscribe to shard failed; backing off", "err", err, "backoff", d)
		}
	})
}

// subscribe makes one subscription and consumes it. A failure to subscribe is retried (its error
// goes to run's log line), but one at the position itself is fatal, handed to the reader.
func (m *pump) subscribe(ctx context.Context) (step, error) {
	in := &kinesis.SubscribeToShardInput{ConsumerARN: &m.e.consumer, ShardId: &m.shardID, StartingPosition: m.pos}
	out, err := m.e.api.SubscribeToShard(ctx, in, m.e.opts...)
	if m.fallback != nil {
		m.pos, m.fallback = m.fallback, nil // a continuation, once one comes, replaces it
	}
	if err != nil {
		if ctx.Err() != nil {
			return stepDone, nil
		}
		var invalid *types.InvalidArgumentException
		if errors.As(err, &invalid) {
			m.send(ctx, subEvent{err: fmt.Errorf("subscribe to shard %s at %s %s: %w",
				m.shardID, m.pos.Type, aws.ToString(m.pos.SequenceNumber), err)})
			return stepDone, nil
		}
		return stepRetry, err
	}
	m.obs.Subscribed(m.shardID, m.now(), m.made > 0)
	m.made++
	got, ended, err := m.consume(ctx, out.GetStream())
	switch {
	case ended || ctx.Err() != nil:
		return stepDone, nil
	case err != nil:
		m.log.Warn("shard subscription dropped; resubscribing", "err", err, "at", aws.ToString(m.pos.SequenceNumber))
	default:
		m.log.Debug("shard subscription renewed", "shard_id", m.shardID, "at", aws.ToString(m.pos.SequenceNumber))
	}
	if got {
		return stepAgain, nil
	}
	return stepRetry, nil // a subscription that yields nothing: do not spin (nothing to log)
}

// consume hands the stream's events over until the shard ends (ended), the stream ends or fails,
// or the renewal time comes. got says whether any event arrived.
func (m *pump) consume(ctx context.Context, es *kinesis.SubscribeToShardEventStream) (got, ended bool, err error) {
	defer es.Close()
	renew := time.NewTimer(m.e.renew)
	defer renew.Stop()
	for {
		select {
		case ev, ok := <-es.Events():
			if !ok {
				return got, false, es.Err()
			}
			e, ok := ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent)
			if !ok {
				continue
			}
			got = true
			m.obs.SubscriptionEvent(m.shardID, m.now())
			v := &e.Value
			recs := v.Records
			for len(recs) > 0 && m.last != "" && compareSeq(deref(recs[0].SequenceNumber), m.last) <= 0 {
				recs = recs[1:] // handed over before a renewal
			}
			if len(recs) > 0 {
				m.last = deref(recs[len(recs)-1].SequenceNumber)
			}
			if v.ContinuationSequenceNumber != nil {
				m.pos = &types.StartingPosition{Type: types.ShardIteratorTypeAtSequenceNumber, SequenceNumber: v.ContinuationSequenceNumber}
			}
			end := v.ContinuationSequenceNumber == nil || len(v.ChildShards) > 0
			se := subEvent{records: recs, behind: aws.ToInt64(v.MillisBehindLatest), at: m.now(), end: end, children: v.ChildShards}
			if !m.send(ctx, se) { // events without records too: they say the reader is caught up
				return got, false, nil
			}
			if end {
				return got, true, nil
			}
		case <-renew.C:
			return got, false, nil
		case <-ctx.Done():
			return got, false, nil
		}
	}
}

func (m *pump) send(ctx context.Context, ev subEvent) bool {
	select {
	case m.events <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// compareSeq orders two Kinesis sequence numbers (decimal strings of up to 128 digits).
func compareSeq(a, b string) int {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}
