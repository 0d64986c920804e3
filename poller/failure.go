package poller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/source"
)

// outcome is how one invocation went, as Lambda's failure rules see it.
type outcome int

const (
	outcomeSuccess       outcome = iota // every record handled
	outcomePartial                      // a valid partial batch response: records before failedAt handled
	outcomeFunctionError                // the function failed (error, panic, timeout)
	outcomeInvalid                      // ReportBatchItemFailures response that is not valid: whole batch failed
)

// classifyResponse applies Lambda's rules to a response that reached the function. With
// ReportBatchItemFailures, a response is a success when it is empty, null, "", [], {}, or has an
// empty or null batchItemFailures; it is a partial failure when batchItemFailures lists only
// identifiers of records in the batch (failedAt is the lowest such record); anything else fails the
// whole batch. Without it, any normal return is a success.
func classifyResponse(resp invoke.Response, recs []source.Record, reportItemFailures bool) (o outcome, failedAt int) {
	if resp.Failed() {
		return outcomeFunctionError, 0
	}
	if !reportItemFailures {
		return outcomeSuccess, 0
	}
	body := bytes.TrimSpace(resp.Payload)
	if len(body) == 0 {
		return outcomeSuccess, 0
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil || dec.More() {
		return outcomeInvalid, 0
	}
	var items any
	switch t := v.(type) {
	case nil:
		return outcomeSuccess, 0
	case string:
		if t == "" {
			return outcomeSuccess, 0
		}
		return outcomeInvalid, 0
	case []any:
		if len(t) == 0 {
			return outcomeSuccess, 0
		}
		return outcomeInvalid, 0
	case map[string]any:
		items = t["batchItemFailures"]
	default:
		return outcomeInvalid, 0
	}
	if items == nil {
		return outcomeSuccess, 0
	}
	list, ok := items.([]any)
	if !ok {
		return outcomeInvalid, 0
	}
	if len(list) == 0 {
		return outcomeSuccess, 0
	}
	index := make(map[string]int, len(recs))
	for i := range recs {
		index[recs[i].SequenceNumber] = i
	}
	failedAt = len(recs)
	for _, it := range list {
		m, ok := it.(map[string]any)
		if !ok {
			return outcomeInvalid, 0
		}
		id, ok := m["itemIdentifier"].(string)
		if !ok || id == "" {
			return outcomeInvalid, 0
		}
		i, ok := index[id]
		if !ok {
			return outcomeInvalid, 0
		}
		failedAt = min(failedAt, i)
	}
	return outcomePartial, failedAt
}

// expiredPrefix counts the records at the head of recs older than maxAge at now.
func expiredPrefix(recs []source.Record, now time.Time, maxAge time.Duration) int {
	n := 0
	for n < len(recs) {
		at := recs[n].ArrivalTime
		if at.IsZero() || now.Sub(at) <= maxAge {
			break
		}
		n++
	}
	return n
}

// process handles one batch by Lambda's failure rules (written out in DESIGN.md, "Failure rules")
// and returns once every record of it was handled or discarded (and the checkpoint covers it), or
// with errStopped when the mapping stops. payload, when non-nil, is the encoded event for recs (or
// batch's stand-in, direct.go). Its invocations are sent on l: the shard's, or its slot's.
func (r *reader) process(runCtx, workCtx context.Context, l *lane, recs []source.Record, payload []byte) error {
	return r.processRun(&batchRun{r: r, runCtx: runCtx, workCtx: workCtx, lane: l, recs: recs, payload: payload})
}

// processRun runs b through the failure rules.
func (r *reader) processRun(b *batchRun) error {
	b.pace = r.p.retryPace(r.shardID + " batch " + firstSeq(b.recs))
	err := b.run()                // retry b.attempt, or skip the batch on an operator's order (skip.go)
	r.ended(&b.stall, err == nil) // the shard stops counting as blocked on b once it is done
	return err
}

// failurePaceFactor is how much longer the longest pause before retrying a batch that failed
// whole is than retryMax: 20 s by default, which gives AWS's recorded count (an always-failing
// function, MaximumRecordAgeInSeconds 60: approximateInvokeCount 8) within one.
const failurePaceFactor = 4

// batchRun is one batch going through the failure rules: the records not yet handled or
// discarded, and what the rules count.
type batchRun struct {
	r               *reader
	runCtx, workCtx context.Context
	lane            *lane // where its invocations are sent (send.go)
	recs            []source.Record
	payload         []byte // the event for recs; nil: encode it again
	invokes         int    // invocations of these records so far (approximateInvokeCount)
	failures        int    // failures counted toward MaximumRetryAttempts
	attempted       bool   // an invoke was tried: from then on the retention period applies
	last            *FailureResponse
	lastRequest     string // the request id of the last invocation, for the failure record
	pace            backoff
	stall           stall // since when these records are being handled (signals.go)
	// With a Tracer (trace.go): the current invocation's span, the batch's first one, and the
	// bisected invocation these records are half of.
	span, first, parent InvocationSpan
	tries, chained      int  // invocations of these records; of them, in first's trace
	half                bool // a bisected half: its retries are paced short
}

// log is the batch's logger, built only when something is logged: not on the hot path.
func (b *batchRun) log() *slog.Logger {
	return b.r.p.log.With("shard_id", b.r.shardID, "batch_size", len(b.recs), "seq_first", b.recs[0].SequenceNumber, "seq_last", b.recs[len(b.recs)-1].SequenceNumber)
}

// attempt is one pass of the rules: discard the expired head, invoke the rest, judge the outcome.
func (b *batchRun) attempt(int) (step, error) {
	r := b.r
	if err := b.discardExpired(); err != nil || len(b.recs) == 0 {
		return stepDone, err
	}
	if b.payload == nil { // a retry of a cut-down batch (not the hot path; slots run this concurrently)
		b.payload, _ = r.encode(nil, b.recs, len(b.recs), MaxPayloadBytes*2)
	}
	if len(b.payload) > MaxPayloadBytes {
		// One record whose event cannot fit a synchronous invoke: Lambda's behaviour is not
		// documented. It cannot ever be delivered, so it is discarded at once (a divergence).
		b.log().Error("record too large for one invocation: its event exceeds 6291456 bytes", "bytes", len(b.payload))
		resp := &FailureResponse{StatusCode: 413, ExecutedVersion: "$LATEST"}
		return stepDone, r.discard(b.runCtx, b.workCtx, b.recs, ConditionRetryAttemptsExhausted, 1, resp, "")
	}
	r.sending(&b.stall, b.recs) // the shard's age and blocked state (signals.go)
	recs, payload := b.recs, b.payload
	s := r.send(invocation{lane: b.lane, run: b.runCtx, ctx: b.workCtx, span: b.startSpan,
		call: func(ctx context.Context) (invoke.Response, error) { return r.invokeBatch(ctx, recs, payload) }})
	if errors.Is(s.err, errLost) || errors.Is(s.err, errStopped) {
		return stepDone, s.err // not sent: the lease is gone, or the mapping stops
	}
	b.attempted = true
	if s.err != nil {
		return b.notInvoked(s)
	}
	return b.judge(s.resp, s.took)
}

// notInvoked handles an invocation that did not reach the function, or whose outcome is unknown
// (s.ambiguous: it may have run, and may still run; send holds the shard's next invocation back
// until it has ended). Neither counts toward MaximumRetryAttempts nor bisects: Lambda counts an
// error "without invoking the function" in neither, and esm cannot tell an ambiguous failure from
// one. The batch is retried with backoff (after the wait, for an ambiguous one).
func (b *batchRun) notInvoked(s sent) (step, error) {
	b.endSpan(OutcomeNotInvoked, s.err.Error())
	b.r.observeInvoke(0, s.took, s.err, false, false)
	if s.ambiguous {
		b.log().Warn("invocation failed after its request was sent: it may still run; retrying without counting once the invocation bound has passed", "err", s.err, "bound", b.r.p.bound)
		b.stalled("invocation outcome unknown: " + s.err.Error())
	} else {
		b.log().Warn("function not invoked; retrying without counting", "err", s.err)
		b.stalled("function not invoked: " + s.err.Error())
	}
	return stepRetry, s.err
}

// discardExpired discards the records at the head of the batch that are too old to be invoked:
// older than MaximumRecordAgeInSeconds, or once the batch was tried than the stream's retention.
func (b *batchRun) discardExpired() error {
	r := b.r
	for len(b.recs) > 0 {
		limit, retention, ok := r.p.ageLimit(b.attempted)
		if !ok {
			return nil
		}
		n := expiredPrefix(b.recs, r.p.now(), limit)
		if n == 0 {
			return nil
		}
		var err error
		switch {
		case retention && r.p.dest == nil:
			// Gone with the stream's retention: not in DroppedEventCount, as Lambda counts it.
			r.p.log.Warn("records older than the stream's retention period have left the stream: discarded",
				"shard_id", r.shardID, "retention", limit, "records", n, "seq_first", b.recs[0].SequenceNumber)
			err = r.ackDiscarded(b.workCtx, b.recs[:n])
		case retention:
			r.p.log.Warn("records older than the stream's retention period have left the stream: discarded as RecordAgeExceeded",
				"shard_id", r.shardID, "retention", limit, "records", n, "seq_first", b.recs[0].SequenceNumber)
			fallthrough
		default:
			err = r.discard(b.runCtx, b.workCtx, b.recs[:n], ConditionRecordAgeExceeded, max(b.invokes, 1), nil, b.lastRequest)
		}
		if err != nil {
			return err
		}
		b.recs, b.payload = b.recs[n:], nil
	}
	return nil
}

// judge applies the rules to an invocation that reached the function.
func (b *batchRun) judge(resp invoke.Response, took time.Duration) (step, error) {
	r, cfg := b.r, &b.r.p.cfg
	b.invokes++
	b.lastRequest = resp.RequestID
	o, failedAt := classifyResponse(resp, b.recs, cfg.ReportBatchItemFailures)
	if !cfg.ReportBatchItemFailures && o == outcomeSuccess {
		b.ignoredItemFailures(resp.Payload)
	}
	var state map[string]string
	cause := ""
	if r.windowed() && (o == outcomeSuccess || o == outcomePartial) {
		var ok bool
		if state, ok = windowResponse(resp.Payload); !ok {
			o = outcomeInvalid // a windowed function must return its state
		}
	}
	r.observeInvoke(len(b.recs), took, nil, o != outcomeSuccess, o == outcomeFunctionError)
	b.last = &FailureResponse{StatusCode: resp.StatusCode, ExecutedVersion: resp.ExecutedVersion, FunctionError: resp.FunctionError}
	switch o {
	case outcomeSuccess:
		b.endSpan(OutcomeOK, "")
		if r.p.log.Enabled(b.workCtx, slog.LevelDebug) {
			b.log().Debug("batch handled", "invocations", b.invokes)
		}
		if state != nil {
			return stepDone, r.ackWindow(b.runCtx, b.workCtx, b.recs, state)
		}
		return stepDone, r.ack(b.workCtx, b.recs)
	case outcomePartial:
		b.log().Warn("partial batch failure; retrying from the lowest failed record", "failed_seq", b.recs[failedAt].SequenceNumber, "handled", failedAt)
		if state != nil { // the state covers the records the function handled
			r.progress.Window = &WindowState{Start: r.progress.Window.Start, State: state}
		}
		if failedAt > 0 {
			b.endSpan(OutcomePartial, "partial batch failure at record "+b.recs[failedAt].SequenceNumber)
			return b.handledUpTo(failedAt)
		}
		cause = "partial batch failure at its first record " + b.recs[0].SequenceNumber
	case outcomeFunctionError:
		b.log().Warn("function error", "invocations", b.invokes, "error", string(resp.Payload))
		if cfg.BisectBatchOnFunctionError && len(b.recs) > 1 {
			bisected := b.span
			b.endSpan(OutcomeBisected, "function error: "+clip(resp.Payload))
			return stepDone, b.bisect(bisected)
		}
		cause = "function error: " + clip(resp.Payload)
	case outcomeInvalid:
		b.log().Warn("invalid partial batch response: the whole batch failed", "response", string(resp.Payload))
		cause = "invalid partial batch response: " + clip(resp.Payload)
	}
	// A batch that failed whole waits longer each time, as Lambda's recorded counts show; the
	// retry after a partial response, and a bisected half's, stay short.
	b.pace.max = r.p.retryMax
	if o != outcomePartial && !b.half {
		b.pace.max = failurePaceFactor * r.p.retryMax
	}
	outcome := ""
	if b.span != nil {
		outcome = failureOutcome(o, resp)
	}
	return b.failed(cause, outcome)
}

// handledUpTo acknowledges the records before failedAt, handled by a partial batch response. The
// checkpoint moved: the rest is a new, shrunken batch whose retry count starts again, as AWS
// recorded it (record 6 of [4,5,6] is then invoked 1+3 more times), at once.
func (b *batchRun) handledUpTo(failedAt int) (step, error) {
	if err := b.r.ack(b.workCtx, b.recs[:failedAt]); err != nil {
		return stepDone, err
	}
	b.recs, b.payload = b.recs[failedAt:], nil
	b.invokes, b.failures = 0, 0
	b.r.ended(&b.stall, true) // the checkpoint moved: a new batch
	return stepAgain, nil
}

// stalled notes a failure of the batch with its cause (blocked.go).
func (b *batchRun) stalled(cause string) {
	b.r.stalled(&b.stall, b.recs[0].SequenceNumber, b.recs[len(b.recs)-1].SequenceNumber, cause)
}

// bisect processes the two halves of a batch that failed with a function error in order, each
// with a fresh retry count (the split itself is not counted) and failing since the batch did;
// their invocations are traced after parent, the bisected one.
func (b *batchRun) bisect(parent InvocationSpan) error {
	half := (len(b.recs) + 1) / 2
	b.log().Info("bisecting batch", "first_half", half, "second_half", len(b.recs)-half)
	b.stalled("function error") // the halves are failing since the batch first did
	for _, recs := range [][]source.Record{b.recs[:half], b.recs[half:]} {
		h := &batchRun{r: b.r, runCtx: b.runCtx, workCtx: b.workCtx, lane: b.lane, recs: recs, half: true, stall: stall{since: b.stall.since}, parent: parent}
		if err := b.r.processRun(h); err != nil {
			return err
		}
	}
	return nil
}

// failed counts a failure toward MaximumRetryAttempts: past it the records are discarded
// (RetryAttemptsExhausted); until then they are retried after a pause, but not once the mapping
// is stopping (they are read again after a restart). cause says how the invocation failed,
// outcome what its span is ended with when it is retried.
func (b *batchRun) failed(cause, outcome string) (step, error) {
	b.failures++
	if maxRetries := b.r.p.cfg.RetryAttempts(); maxRetries >= 0 && b.failures > maxRetries {
		b.stalled(cause)
		err := b.r.discard(b.runCtx, b.workCtx, b.recs, ConditionRetryAttemptsExhausted, b.invokes, b.last, b.lastRequest)
		b.endSpan(b.r.discardedOutcome(), cause)
		return stepDone, err
	}
	b.endSpan(outcome, cause)
	if b.runCtx.Err() != nil {
		return stepDone, errStopped
	}
	b.stalled(cause)
	return stepRetry, nil
}

// observeInvoke reports one invoke request as Lambda's metrics count it: a throttle when the
// request was refused as throttled (err), otherwise, when it reached the function (err nil), an
// invocation with its records, duration and whether the batch failed, and a function error.
func (r *reader) observeInvoke(records int, took time.Duration, err error, failed, functionError bool) {
	if err != nil {
		if errors.Is(err, invoke.ErrThrottled) {
			r.p.obs.Throttled(r.shardID)
		}
		return
	}
	r.p.obs.BatchInvoked(r.shardID, records, took, failed)
	if functionError {
		r.p.obs.FunctionError(r.shardID)
	}
}
