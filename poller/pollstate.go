package poller

import (
	"time"

	"github.com/kinesis-esm/esm/source"
)

// pollState is the part of a reader's state its loop decides on: what was read and not yet
// delivered, and how the polling goes. Its decisions (invokeNow, pollWait, windowIdle) are pure
// functions of it, the configuration and the time.
type pollState struct {
	pending      []source.Record // read, not yet delivered
	pendingSince time.Time       // when the first of them was read
	flush        bool            // the previous batch was cut by the payload limit: send the rest now
	lastPoll     time.Time       // when the last read started
	behind       bool            // the last read said the shard has more (MillisBehindLatest, a full read)
	caughtUpAt   time.Time       // when the last read that left the reader caught up started
	ended        bool            // the shard's last records were read: children follow
	children     []source.Shard
	retry        backoff // the pacing of failed reads
}

// newPollState is a reader's state before its first read: behind until a read says otherwise.
func newPollState(retry backoff) pollState { return pollState{behind: true, retry: retry} }

// invokeNow reports whether the pending records are invoked before the next read: when any are
// pending and the shard ended, the last batch was cut by the payload limit, there is no batching
// window, the batch is full, or the window has passed.
func (s *pollState) invokeNow(cfg *Config, now time.Time) bool {
	return len(s.pending) > 0 && (s.ended || s.flush || cfg.MaximumBatchingWindow == 0 ||
		len(s.pending) >= cfg.BatchSize || now.Sub(s.pendingSince) >= cfg.MaximumBatchingWindow)
}

// pollWait is how long to wait before the next read: when caught up, until the next poll
// (nextPoll, on PollGrid), when behind MinPollSpacing after the last read. forWindow says the
// batching window of what is pending ends before that: then wait is until the window ends, and
// the pending records are invoked then. A subscribed reader waits off the grid, and a poll
// interval even when behind: its wait ends as soon as the pump hands something over (or has
// something in hand), so a shorter one fetches nothing and only wakes the reader (several times
// an event, Kinesis sending an idle subscription one every few seconds).
func (s *pollState) pollWait(cfg *Config, now time.Time, subscribed bool) (wait time.Duration, forWindow bool) {
	wait = cfg.MinPollSpacing - now.Sub(s.lastPoll)
	if !s.behind || subscribed {
		wait = nextPoll(cfg, s.lastPoll, !subscribed).Sub(now)
	}
	if len(s.pending) > 0 {
		if untilWindow := cfg.MaximumBatchingWindow - now.Sub(s.pendingSince); untilWindow < wait {
			return untilWindow, true
		}
	}
	return wait, false
}

// nextPoll is when a caught-up shard polls next: PollInterval after the last poll, onGrid moved
// to the nearest multiple of PollGrid since the Unix epoch (half-way: the later), so that the
// polls of idle shards coincide and a shard whose polls start on the grid keeps PollInterval
// between them. The move never brings the poll closer to the last than MinPollSpacing (nor, with
// a PollInterval below MinPollSpacing, closer than PollInterval): it adds no read per second.
func nextPoll(cfg *Config, last time.Time, onGrid bool) time.Time {
	due := last.Add(cfg.PollInterval)
	grid := cfg.PollGrid
	if !onGrid || grid <= 0 {
		return due
	}
	off := time.Duration(due.UnixNano() % int64(grid))
	if off < 0 { // before 1970
		off += grid
	}
	aligned := due.Add(-off)
	if off >= grid-off {
		aligned = aligned.Add(grid)
	}
	if earliest := last.Add(min(cfg.PollInterval, cfg.MinPollSpacing)); aligned.Before(earliest) {
		return earliest
	}
	return aligned
}

// windowIdle reports whether the open tumbling window w (nil: none) closes now, with nothing
// pending: the reader was caught up by a read that started after the window ended, and the window
// ended a poll ago. A read from before the window's end (a long invocation since) or a read that
// failed (an expired iterator) may have missed records that still belong to the window.
func (s *pollState) windowIdle(w *WindowState, cfg *Config, now time.Time) bool {
	if w == nil || len(s.pending) > 0 || s.behind {
		return false
	}
	end := w.Start.Add(cfg.TumblingWindow)
	return !s.caughtUpAt.Before(end) && !now.Before(end.Add(cfg.PollInterval))
}

// delivered drops the first n pending records, delivered: what is left was cut from the batch by
// the payload limit (or a window's end) and goes next.
func (s *pollState) delivered(n int) {
	clear(s.pending[:n]) // drop references to delivered data
	s.pending = s.pending[n:]
	s.flush = len(s.pending) > 0
	if len(s.pending) == 0 {
		s.pending = s.pending[:0:0]
	}
}
