package poller

import (
	"cmp"
	"time"

	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/source"
)

// BatchEncoder renders records as the events a mapping's poller invokes its function with, for
// tools that rebuild a batch outside the poller (esm redrive): the same JSON bytes, cut at the
// same limits.
type BatchEncoder struct {
	enc       *eventEncoder
	batchSize int
	slots     int // ParallelizationFactor
}

// NewBatchEncoder returns the encoder of the mapping that reads src with cfg's settings: src's
// ARN, region and invokeIdentityArn in every record, and cfg's BatchSize as the batch limit, each
// defaulted as New defaults them. The starting position is not needed and defaults to
// TRIM_HORIZON here.
func NewBatchEncoder(src Source, cfg Config) (*BatchEncoder, error) {
	cfg.StartingPosition = cmp.Or(cfg.StartingPosition, TrimHorizon)
	c, filters, err := settle(src, cfg, time.Now())
	if err != nil {
		return nil, err
	}
	return &BatchEncoder{enc: newEventEncoder(src, filters), batchSize: c.BatchSize, slots: c.ParallelizationFactor}, nil
}

// Next renders the batch the poller would invoke first for recs (records of one shard, in
// sequence order): the longest prefix of at most BatchSize records whose event fits
// MaxPayloadBytes, and how many records it took. A single record whose event alone is larger
// comes back alone; the caller must check len(payload).
func (e *BatchEncoder) Next(shardID string, recs []source.Record) (payload []byte, n int) {
	return e.enc.encodeBatch(nil, shardID, recs, e.batchSize, MaxPayloadBytes)
}

// Slot is the slot, 0 to ParallelizationFactor-1, whose batches hold the records of partitionKey:
// with ParallelizationFactor > 1 a batch holds only records of one slot.
func (e *BatchEncoder) Slot(partitionKey string) int { return slotOf(partitionKey, e.slots) }

// Match applies the mapping's FilterCriteria to one record as the poller does (to each user record
// of an aggregate when the mapping reads through a consumer); true without filters.
func (e *BatchEncoder) Match(r *source.Record) bool { return e.enc.match(r) }

// Record renders one record as it appears in an event's Records array.
func (e *BatchEncoder) Record(shardID string, r *source.Record) []byte {
	return e.enc.appendRecord(nil, shardID, r)
}

// Handled applies Lambda's rules to a response the function gave for recs and returns how many
// records, from the first, it handled: len(recs) for a success, the records before the lowest
// failed one for a valid partial batch response (with reportItemFailures), 0 for a function
// error or an invalid response.
func Handled(resp invoke.Response, recs []source.Record, reportItemFailures bool) int {
	switch o, failedAt := classifyResponse(resp, recs, reportItemFailures); o {
	case outcomeSuccess:
		return len(recs)
	case outcomePartial:
		return failedAt
	}
	return 0
}
