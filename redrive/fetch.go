package redrive

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kinesis-esm/esm/internal/ctxwait"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/source"
)

// TrimmedError reports a range that retention has trimmed, wholly or in part: its records can no
// longer be read, so the message is kept.
type TrimmedError struct {
	ShardID, Start, End string
	// FirstAvailable is the first record still in the shard at or after Start ("" when the shard
	// itself is gone, or none is).
	FirstAvailable string
}

func (e *TrimmedError) Error() string {
	switch {
	case e.FirstAvailable == "":
		return fmt.Sprintf("records %s-%s of %s are trimmed by retention: the shard holds none of them any more", e.Start, e.End, e.ShardID)
	case compareSeq(e.FirstAvailable, e.End) > 0:
		return fmt.Sprintf("records %s-%s of %s are trimmed by retention: the shard's oldest record is now %s", e.Start, e.End, e.ShardID, e.FirstAvailable)
	}
	return fmt.Sprintf("records %s-%s of %s are partly trimmed by retention: the oldest left is %s", e.Start, e.End, e.ShardID, e.FirstAvailable)
}

// Limits of one fetch.
const (
	// readSpacing is the least time between two reads of one shard where the source names none
	// (source.Limits.MinPollSpacing; Kinesis allows five reads a second).
	readSpacing = 200 * time.Millisecond
	// readAttempts bounds how often a throttled read is tried.
	readAttempts = 6
	// emptyReads bounds how many empty pages in a row a fetch accepts while the shard reports
	// records behind them.
	emptyReads = 50
)

// fetch reads exactly the records of shardID from start to end (inclusive) through the mapping's
// source: the shard opened AT_SEQUENCE_NUMBER start, then read until a record past end. A range
// whose first record is no longer there is a *TrimmedError.
func fetch(ctx context.Context, src poller.Source, shardID, start, end string) ([]source.Record, error) {
	trimmed := &TrimmedError{ShardID: shardID, Start: start, End: end}
	iter, err := open(ctx, src, shardID, source.Position{Type: source.AtSequenceNumber, SequenceNumber: start})
	if errors.Is(err, source.ErrNotFound) {
		return nil, trimmed
	} else if err != nil {
		return nil, err
	}
	lim := src.Limits()
	var recs []source.Record
	empty := 0
	for call := 0; ; call++ {
		if call > 0 && !ctxwait.Sleep(ctx, cmp.Or(lim.MinPollSpacing, readSpacing)) {
			return nil, ctx.Err()
		}
		page, err := read(ctx, src, shardID, iter, cmp.Or(lim.MaxRecordsPerRead, poller.MaxBatchSize))
		switch {
		case errors.Is(err, source.ErrExpired): // a slow function between reads: reopen where we were
			at := source.Position{Type: source.AtSequenceNumber, SequenceNumber: start}
			if len(recs) > 0 {
				at = source.Position{Type: source.AfterSequenceNumber, SequenceNumber: recs[len(recs)-1].SequenceNumber}
			}
			if iter, err = open(ctx, src, shardID, at); err != nil {
				return nil, err
			}
			continue
		case errors.Is(err, source.ErrNotFound):
			return nil, trimmed
		case err != nil:
			return nil, err
		}
		var done bool
		if recs, done, err = takeRange(recs, page.Records, shardID, start, end); done || err != nil {
			return recs, err
		}
		switch {
		case page.Next == "":
			return nil, fmt.Errorf("shard %s ended before %s (the last of %s-%s)", shardID, end, start, end)
		case len(page.Records) > 0:
			empty = 0
		case page.MillisBehind == 0 || empty >= emptyReads:
			if len(recs) == 0 {
				return nil, fmt.Errorf("shard %s has no record %s", shardID, start)
			}
			return nil, fmt.Errorf("shard %s holds no record %s (the last of %s-%s) yet", shardID, end, start, end)
		default:
			empty++
		}
		iter = page.Next
	}
}

// takeRange adds to recs the records of page within start-end; done once a record reaches end or
// passes it. The range's first record must be start itself: a later one means start was trimmed.
func takeRange(recs, page []source.Record, shardID, start, end string) (_ []source.Record, done bool, err error) {
	for _, r := range page {
		seq := r.SequenceNumber
		if len(recs) == 0 && seq != start {
			if compareSeq(seq, start) > 0 {
				return nil, true, &TrimmedError{ShardID: shardID, Start: start, End: end, FirstAvailable: seq}
			}
			return nil, true, fmt.Errorf("shard %s returned record %s before the range's first, %s", shardID, seq, start)
		}
		if compareSeq(seq, end) > 0 {
			return recs, true, nil
		}
		recs = append(recs, r)
		if seq == end {
			return recs, true, nil
		}
	}
	return recs, false, nil
}

// open opens the shard at at, retrying throttling.
func open(ctx context.Context, src poller.Source, shardID string, at source.Position) (string, error) {
	var iter string
	err := retry(ctx, func() (err error) { iter, err = src.Open(ctx, shardID, at); return err })
	if err != nil {
		return "", fmt.Errorf("open shard %s at %s %s: %w", shardID, at.Type, at.SequenceNumber, err)
	}
	return iter, nil
}

// read reads a page of the shard, retrying throttling.
func read(ctx context.Context, src poller.Source, shardID, iter string, limit int) (source.Page, error) {
	var page source.Page
	err := retry(ctx, func() (err error) { page, err = src.Read(ctx, shardID, iter, limit); return err })
	if err != nil {
		return page, fmt.Errorf("get records: %w", err)
	}
	return page, nil
}

// retry runs call until it succeeds, fails with anything but throttling (source.ErrThrottled), or
// readAttempts are used.
func retry(ctx context.Context, call func() error) error {
	wait := readSpacing
	for attempt := 1; ; attempt++ {
		err := call()
		if err == nil || attempt == readAttempts || !errors.Is(err, source.ErrThrottled) {
			return err
		}
		if !ctxwait.Sleep(ctx, wait) {
			return ctx.Err()
		}
		wait *= 2
	}
}
