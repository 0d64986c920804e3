package poller

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/source"
)

func pendingRecords(n int) []source.Record { return make([]source.Record, n) }

func TestInvokeNow(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	window := Config{BatchSize: 10, MaximumBatchingWindow: 5 * time.Second}
	noWindow := Config{BatchSize: 10}
	tests := []struct {
		name string
		cfg  Config
		s    pollState
		now  time.Time
		want bool
	}{
		{"nothing pending", noWindow, pollState{}, t0, false},
		{"nothing pending, shard ended", noWindow, pollState{ended: true}, t0, false},
		{"nothing pending, flush", window, pollState{flush: true}, t0, false},
		{"no batching window", noWindow, pollState{pending: pendingRecords(1), pendingSince: t0}, t0, true},
		{"window open", window, pollState{pending: pendingRecords(1), pendingSince: t0}, t0.Add(4 * time.Second), false},
		{"window passed", window, pollState{pending: pendingRecords(1), pendingSince: t0}, t0.Add(5 * time.Second), true},
		{"batch full", window, pollState{pending: pendingRecords(10), pendingSince: t0}, t0, true},
		{"more than a batch", window, pollState{pending: pendingRecords(11), pendingSince: t0}, t0, true},
		{"shard ended", window, pollState{pending: pendingRecords(1), pendingSince: t0, ended: true}, t0, true},
		{"rest of a batch cut by the payload limit", window, pollState{pending: pendingRecords(1), pendingSince: t0, flush: true}, t0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.invokeNow(&tt.cfg, tt.now); got != tt.want {
				t.Fatalf("invokeNow = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPollWait(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	cfg := Config{PollInterval: time.Second, MinPollSpacing: 200 * time.Millisecond, MaximumBatchingWindow: 3 * time.Second}
	tests := []struct {
		name          string
		s             pollState
		now           time.Time
		want          time.Duration
		wantForWindow bool
	}{
		{"caught up: a poll interval after the last read", pollState{lastPoll: t0}, t0.Add(300 * time.Millisecond), 700 * time.Millisecond, false},
		{"behind: the poll spacing after the last read", pollState{lastPoll: t0, behind: true}, t0.Add(50 * time.Millisecond), 150 * time.Millisecond, false},
		{"behind, the spacing passed: at once", pollState{lastPoll: t0, behind: true}, t0.Add(time.Second), -800 * time.Millisecond, false},
		{"the batching window ends first", pollState{lastPoll: t0, pending: pendingRecords(1), pendingSince: t0.Add(-2800 * time.Millisecond)}, t0, 200 * time.Millisecond, true},
		{"the poll comes first", pollState{lastPoll: t0, pending: pendingRecords(1), pendingSince: t0}, t0.Add(100 * time.Millisecond), 900 * time.Millisecond, false},
		{"window and poll at once: the poll", pollState{lastPoll: t0, pending: pendingRecords(1), pendingSince: t0.Add(-2 * time.Second)}, t0, time.Second, false},
		{"nothing pending: no window", pollState{lastPoll: t0, pendingSince: t0.Add(-time.Hour)}, t0, time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, forWindow := tt.s.pollWait(&cfg, tt.now, false)
			if got != tt.want || forWindow != tt.wantForWindow {
				t.Fatalf("pollWait = %v, %v; want %v, %v", got, forWindow, tt.want, tt.wantForWindow)
			}
		})
	}
	// A reader's first read (no read before, behind) is at once.
	first := newPollState(backoff{})
	if got, forWindow := first.pollWait(&cfg, t0, false); got > 0 || forWindow {
		t.Fatalf("first read: pollWait = %v, %v; want at once", got, forWindow)
	}
}

func TestWindowIdle(t *testing.T) {
	start := time.Unix(1700000040, 0)
	cfg := Config{TumblingWindow: time.Minute, PollInterval: time.Second}
	end := start.Add(time.Minute)
	w := &WindowState{Start: start}
	caughtUp := pollState{caughtUpAt: end}
	tests := []struct {
		name string
		w    *WindowState
		s    pollState
		now  time.Time
		want bool
	}{
		{"no open window", nil, caughtUp, end.Add(time.Hour), false},
		{"caught up after the end, a poll later", w, caughtUp, end.Add(time.Second), true},
		{"caught up after the end, less than a poll later", w, caughtUp, end.Add(999 * time.Millisecond), false},
		{"caught up by a read from before the end", w, pollState{caughtUpAt: end.Add(-time.Millisecond)}, end.Add(time.Hour), false},
		{"behind", w, pollState{caughtUpAt: end, behind: true}, end.Add(time.Hour), false},
		{"records pending", w, pollState{caughtUpAt: end, pending: pendingRecords(1)}, end.Add(time.Hour), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.windowIdle(tt.w, &cfg, tt.now); got != tt.want {
				t.Fatalf("windowIdle = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDelivered(t *testing.T) {
	s := pollState{pending: pendingRecords(5)}
	s.delivered(3)
	if len(s.pending) != 2 || !s.flush {
		t.Fatalf("after 3 of 5: %d pending, flush %v; want 2, true", len(s.pending), s.flush)
	}
	s.delivered(2)
	if len(s.pending) != 0 || cap(s.pending) != 0 || s.flush {
		t.Fatalf("after the rest: %d pending (cap %d), flush %v; want none, released, false", len(s.pending), cap(s.pending), s.flush)
	}
}

func TestReaderResultKinds(t *testing.T) {
	fatal := fmt.Errorf("checkpoint shard s at 1: %w", errors.New("store down"))
	tests := []struct {
		err      error
		want     resultKind
		keepsErr bool
	}{
		{errStopped, resultStopped, false},
		{fmt.Errorf("open closed shard s: %w", errStopped), resultStopped, false},
		{errLost, resultLost, false},
		{fatal, resultFailed, true},
	}
	for _, tt := range tests {
		res := readerResult{shardID: "s"}.endedBy(tt.err)
		if res.kind != tt.want || (res.err != nil) != tt.keepsErr || res.shardID != "s" {
			t.Errorf("endedBy(%v) = %+v, want kind %d, error kept %v", tt.err, res, tt.want, tt.keepsErr)
		}
		if tt.keepsErr && res.err != tt.err {
			t.Errorf("endedBy(%v) keeps %v", tt.err, res.err)
		}
	}
}
