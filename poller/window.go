package poller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/source"
)

// WindowState is a shard's open tumbling window: stored with the checkpoint, so that a restart
// continues the window with the state the last successful invocation returned.
// A WindowState is never changed once stored: the reader replaces it.
type WindowState struct {
	Start time.Time         `json:"start"`
	State map[string]string `json:"state"`
}

// MaxWindowStateBytes is the most state a window may carry (1 MB per shard, as Lambda); a larger
// state ends the window early.
const MaxWindowStateBytes = 1 << 20

// windowOf is the start of the tumbling window a record belongs to: windows of the configured
// length aligned to the Unix epoch, by the record's arrival time.
func (r *reader) windowOf(rec *source.Record) time.Time {
	return rec.ArrivalTime.Truncate(r.p.cfg.TumblingWindow).UTC()
}

// windowed reports whether the mapping uses tumbling windows.
func (r *reader) windowed() bool { return r.p.cfg.TumblingWindow > 0 }

// windowTail renders the window properties that follow "Records" in a KinesisTimeWindowEvent.
func (r *reader) windowTail(final, early bool) []byte {
	w := r.progress.Window
	state := w.State
	if state == nil {
		state = map[string]string{}
	}
	stateJSON, _ := json.Marshal(state) // strings only: cannot fail
	var b []byte
	b = append(b, `,"window":{"start":"`...)
	b = w.Start.UTC().AppendFormat(b, time.RFC3339)
	b = append(b, `","end":"`...)
	b = w.Start.Add(r.p.cfg.TumblingWindow).UTC().AppendFormat(b, time.RFC3339)
	b = append(b, `"},"state":`...)
	b = append(b, stateJSON...)
	b = append(b, `,"shardId":`...)
	b = appendJSONString(b, r.shardID)
	b = append(b, `,"eventSourceARN":`...)
	b = appendJSONString(b, r.p.id.ARN)
	b = fmt.Appendf(b, `,"isFinalInvokeForWindow":%t,"isWindowTerminatedEarly":%t}`, final, early)
	return b
}

// encode renders the event for the longest prefix of recs that fits (at most maxRecords): a
// KinesisEvent, or with tumbling windows a KinesisTimeWindowEvent for the open window.
func (r *reader) encode(buf []byte, recs []source.Record, maxRecords, maxBytes int) ([]byte, int) {
	if !r.windowed() {
		return r.p.enc.encodeBatch(buf, r.shardID, recs, maxRecords, maxBytes)
	}
	tail := r.windowTail(false, false)
	payload, n := r.p.enc.encodeBatch(buf, r.shardID, recs, maxRecords, maxBytes-len(tail)+1)
	return append(payload[:len(payload)-1], tail...), n
}

// windowPrefix is how many records at the head of pending belong to the window of the first.
func (r *reader) windowPrefix(pending []source.Record) int {
	w := r.windowOf(&pending[0])
	n := 1
	for n < len(pending) && r.windowOf(&pending[n]).Equal(w) {
		n++
	}
	return n
}

// windowResponse extracts the state a windowed invocation returned. A response without a "state"
// object fails the invocation, as Lambda requires.
func windowResponse(payload []byte) (map[string]string, bool) {
	var v struct {
		State *map[string]string `json:"state"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(payload), &v); err != nil || v.State == nil {
		return nil, false
	}
	if *v.State == nil {
		return map[string]string{}, true
	}
	return *v.State, true
}

// openWindow makes sure the window the next batch belongs to is the open one: it closes an older
// open window with its final invocation first.
func (r *reader) openWindow(runCtx, workCtx context.Context, start time.Time) error {
	if w := r.progress.Window; w != nil && !w.Start.Equal(start) {
		if err := r.closeWindow(runCtx, workCtx, false); err != nil {
			return err
		}
	}
	if r.progress.Window == nil {
		r.progress.Window = &WindowState{Start: start, State: map[string]string{}}
	}
	return nil
}

// closeWindow makes the final invocation of the open window (no records, its state,
// isFinalInvokeForWindow) and retries it until it succeeds: Lambda holds the shard until then.
// With early set the window was cut short by its state size: the same window then goes on with a
// fresh state. The result is stored before the reader moves on.
func (r *reader) closeWindow(runCtx, workCtx context.Context, early bool) error {
	w := r.progress.Window
	payload := append([]byte(`{"Records":[]`), r.windowTail(true, early)...)
	log := r.p.log.With("shard_id", r.shardID, "window_start", w.Start)
	bo := r.p.retryPace(r.shardID + " window " + w.Start.String())
	err := retry(runCtx, &bo, func(int) (step, error) {
		s := r.send(invocation{lane: &r.lane, run: runCtx, ctx: workCtx, call: func(ctx context.Context) (invoke.Response, error) {
			return r.p.inv.Invoke(ctx, payload)
		}})
		resp, err := s.resp, s.err
		if errors.Is(err, errLost) || errors.Is(err, errStopped) {
			return stepDone, err // not sent
		}
		_, hasState := windowResponse(resp.Payload)
		r.observeInvoke(0, s.took, err, resp.Failed() || !hasState, resp.Failed())
		switch {
		case err == nil && !resp.Failed() && hasState:
			return stepDone, nil
		case err == nil && !resp.Failed():
			log.Warn("final window invocation returned no state; retrying", "response", string(resp.Payload))
		default:
			log.Warn("final window invocation failed; retrying, the shard waits", "err", err, "error", string(resp.Payload))
		}
		return stepRetry, err
	}, nil)
	if err != nil {
		return err
	}
	if early {
		r.progress.Window = &WindowState{Start: w.Start, State: map[string]string{}}
	} else {
		r.progress.Window = nil
	}
	log.Debug("window closed", "early", early)
	return r.saveProgress(workCtx)
}

// saveProgress writes the reader's progress as it is (window changes without a new checkpoint).
func (r *reader) saveProgress(ctx context.Context) error {
	return r.store(ctx, r.progress, func(err error) error { return fmt.Errorf("save window of shard %s: %w", r.shardID, err) })
}

// ackWindow stores the state a windowed batch returned together with the batch's checkpoint, and
// ends the window early when the state has grown past MaxWindowStateBytes.
func (r *reader) ackWindow(runCtx, workCtx context.Context, recs []source.Record, state map[string]string) error {
	r.progress.Window = &WindowState{Start: r.progress.Window.Start, State: state}
	if err := r.ack(workCtx, recs); err != nil {
		return err
	}
	size := 0
	for k, v := range state {
		size += len(k) + len(v)
	}
	if size > MaxWindowStateBytes {
		r.p.log.Warn("window state over 1 MB: ending the window early", "shard_id", r.shardID, "bytes", size)
		return r.closeWindow(runCtx, workCtx, true)
	}
	return nil
}

// openWindowState is the open window, or nil; only windowed mappings (one batch in flight) have
// one, so reading it needs no lock.
func (r *reader) openWindowState() *WindowState {
	if !r.windowed() {
		return nil
	}
	return r.progress.Window
}
