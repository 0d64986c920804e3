// Package redrive brings the records a mapping gave up on back from its on-failure destination:
// for each on-failure message it fetches exactly the records the message names from the stream
// (or takes the payload an S3 object carries), invokes the function with the batch Lambda would
// have built, byte for byte, and deletes the message only after every record of it succeeded.
package redrive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/kinesis-esm/esm/filter"
	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/source"
)

// Outcome is what a redrive did with one message.
type Outcome string

// Outcomes, as reports name them.
const (
	// Redriven: every record was handled by the function; the message was deleted.
	Redriven Outcome = "redriven"
	// Exported: the records were written to the export (--to); the message was kept.
	Exported Outcome = "exported"
	// WouldRedrive: a dry run found every record; nothing was invoked or deleted.
	WouldRedrive Outcome = "would redrive"
	// Failing: the function failed again, or the records could not be read; the message was kept.
	Failing Outcome = "failing"
	// Expired: retention trimmed the records away; the message was kept.
	Expired Outcome = "expired"
	// Skipped: the message belongs to another stream or function; it was kept.
	Skipped Outcome = "skipped"
	// Invalid: not an on-failure message of a Kinesis mapping; it was kept.
	Invalid Outcome = "invalid"
)

// Result is the outcome of one message.
type Result struct {
	// Item names the message (Item.ID).
	Item    string
	Outcome Outcome
	// Message is the parsed message (zero when Invalid).
	Message Message
	// Records is how many records the message's range holds; Invocations how many batches they
	// made (or would make).
	Records, Invocations int
	// Detail says why, for every outcome but Redriven, Exported and WouldRedrive.
	Detail string
}

// Summary counts the outcomes of a redrive.
type Summary struct {
	Messages                                                             int
	Redriven, Exported, WouldRedrive, Failing, Expired, Skipped, Invalid int
}

func (s *Summary) add(o Outcome) {
	s.Messages++
	switch o {
	case Redriven:
		s.Redriven++
	case Exported:
		s.Exported++
	case WouldRedrive:
		s.WouldRedrive++
	case Failing:
		s.Failing++
	case Expired:
		s.Expired++
	case Skipped:
		s.Skipped++
	case Invalid:
		s.Invalid++
	}
}

// OK reports whether every message of the mapping was redriven (or exported, or in a dry run
// would be): nothing is still failing, expired or invalid. Messages of other mappings (skipped)
// are not this redrive's to judge.
func (s Summary) OK() bool { return s.Failing == 0 && s.Expired == 0 && s.Invalid == 0 }

// Err is the error a redrive that ended with err (Run's) and summary s ends with: an
// interruption (err wraps context.Canceled) says how many messages were read, the messages left
// being kept; any other err is returned; without one, a summary that is not OK is an error
// counting what was kept. nil when everything was redriven.
func (s Summary) Err(err error) error {
	switch {
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("interrupted after %d messages: the rest are kept for the next redrive", s.Messages)
	case err != nil:
		return err
	case !s.OK():
		return fmt.Errorf("not everything was redriven: %d still failing, %d expired, %d invalid (their messages were kept)", s.Failing, s.Expired, s.Invalid)
	}
	return nil
}

// String is the summary line of a report.
func (s Summary) String() string {
	noun := "messages"
	if s.Messages == 1 {
		noun = "message"
	}
	out := fmt.Sprintf("%d %s: %d redriven, %d exported, %d still failing, %d expired", s.Messages, noun, s.Redriven, s.Exported, s.Failing, s.Expired)
	for _, c := range []struct {
		n    int
		what string
	}{{s.WouldRedrive, "would be redriven"}, {s.Skipped, "skipped (another mapping's)"}, {s.Invalid, "invalid"}} {
		if c.n > 0 {
			out += fmt.Sprintf(", %d %s", c.n, c.what)
		}
	}
	return out
}

// Redriver redrives one mapping's failed records. Create it with New.
type Redriver struct {
	cfg         poller.Config
	streamARN   string // the mapping's stream
	functionARN string // the mapping's function (WithFunctionARN), or ""
	batchSize   int
	src         poller.Source // the records are read through it
	enc         *poller.BatchEncoder
	filters     *filter.Filters
	inv         poller.Invoker
	export      io.Writer
	dryRun      bool
	log         *slog.Logger
	rep         Reporter
}

// Option configures New. A nil Option is ignored.
type Option func(*Redriver)

// WithInvoker sets the function to redrive to.
func WithInvoker(inv poller.Invoker) Option { return func(r *Redriver) { r.inv = inv } }

// WithExport writes the records to w, one JSON line per record as the function would receive
// it in an event's Records, instead of invoking; messages are kept.
func WithExport(w io.Writer) Option { return func(r *Redriver) { r.export = w } }

// WithFunctionARN names the mapping's function by its ARN: a message for another function is
// skipped, and the function is invoked as it (its InvokedFunctionArn), as the poller invokes it.
func WithFunctionARN(arn string) Option { return func(r *Redriver) { r.functionARN = arn } }

// WithDryRun reads every message and its records, and reports what a redrive would do, without
// invoking, exporting or deleting anything.
func WithDryRun() Option { return func(r *Redriver) { r.dryRun = true } }

// WithLogger sets the logger (default, or nil: discard).
func WithLogger(l *slog.Logger) Option {
	return func(r *Redriver) {
		if l != nil {
			r.log = l
		}
	}
}

// WithReporter sets where each message's outcome and the summary go (default, or nil: nowhere).
func WithReporter(rep Reporter) Option {
	return func(r *Redriver) {
		if rep != nil {
			r.rep = rep
		}
	}
}

// New returns the redriver of the mapping that reads stream with cfg's settings (the stream's ARN
// and the function's, WithFunctionARN, name the messages it takes; cfg's BatchSize, FilterCriteria and
// ReportBatchItemFailures, and the stream's invokeIdentityArn, shape and judge the batches, as
// the poller's do); the records are read through stream (a Kinesis stream's or a DynamoDB
// stream's). It needs an invoker, an export or a dry run.
func New(stream poller.Source, cfg poller.Config, opts ...Option) (*Redriver, error) {
	r := &Redriver{cfg: cfg, src: stream, log: slog.New(slog.DiscardHandler), rep: nopReporter{}}
	if stream != nil {
		r.streamARN = stream.Identity().ARN
	}
	for _, o := range opts {
		if o != nil {
			o(r)
		}
	}
	var err error
	if r.enc, err = poller.NewBatchEncoder(stream, cfg); err != nil {
		return nil, err
	}
	if len(cfg.FilterPatterns) > 0 {
		if r.filters, err = filter.Compile(cfg.FilterPatterns); err != nil {
			return nil, err
		}
	}
	r.batchSize = cfg.BatchSize
	if r.batchSize == 0 {
		r.batchSize = poller.DefaultBatchSize
	}
	switch {
	case r.inv == nil && r.export == nil && !r.dryRun:
		return nil, errors.New("redrive: an invoker, an export or a dry run is required")
	case r.inv != nil && !r.dryRun && r.export == nil && cfg.TumblingWindow > 0:
		return nil, &poller.ValidationError{Field: "TumblingWindowInSeconds", Message: "a mapping with tumbling windows cannot be redriven: " +
			"the window's state of the failed invocation is gone; export the records (--to) instead"}
	}
	return r, nil
}

// Run redrives every message of src, in order, then closes src (leaving the messages it kept for
// the next redrive). It returns an error only when reading src fails or ctx ends; the outcome of
// each message is in the summary and the reporter.
func (r *Redriver) Run(ctx context.Context, src Source) (Summary, error) {
	var sum Summary
	total := -1
	if s, ok := src.(sized); ok {
		total = s.Len()
	}
	r.rep.Begin(total)
	var runErr error
	for {
		it, err := src.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			runErr = err
			break
		}
		res := r.one(ctx, src, it)
		if ctx.Err() != nil && res.Outcome == Failing { // interrupted, not failed
			runErr = ctx.Err()
			break
		}
		sum.add(res.Outcome)
		r.rep.Result(res)
	}
	if err := src.Close(context.WithoutCancel(ctx)); err != nil && runErr == nil {
		runErr = err
	}
	r.rep.End(sum)
	return sum, runErr
}

// batch is one invocation's worth of records.
type batch struct {
	payload []byte
	recs    []source.Record // sequence numbers at least: what a partial batch response names
	lines   [][]byte        // each record as an event's Records element, for the export
}

// one handles one message.
func (r *Redriver) one(ctx context.Context, src Source, it *Item) Result {
	res := Result{Item: it.ID}
	m, err := ParseMessage(it.Body)
	if err != nil {
		res.Outcome, res.Detail = Invalid, err.Error()
		return res
	}
	res.Message = m
	switch {
	case m.StreamARN != r.streamARN:
		res.Outcome, res.Detail = Skipped, fmt.Sprintf("for stream %s, not this mapping's %s", m.StreamARN, r.streamARN)
		return res
	case m.FunctionARN != "" && r.functionARN != "" && m.FunctionARN != r.functionARN:
		res.Outcome, res.Detail = Skipped, fmt.Sprintf("for function %s, not this mapping's %s", m.FunctionARN, r.functionARN)
		return res
	}
	var batches []batch
	if m.Payload != nil {
		batches, err = r.payloadBatches(m)
	} else {
		batches, err = r.streamBatches(ctx, m)
	}
	for _, b := range batches {
		res.Records += len(b.recs)
		res.Invocations++
	}
	if err != nil {
		var te *TrimmedError
		if errors.As(err, &te) {
			res.Outcome, res.Detail = Expired, err.Error()
		} else {
			res.Outcome, res.Detail = Failing, err.Error()
		}
		return res
	}
	switch {
	case r.dryRun:
		res.Outcome = WouldRedrive
		return res
	case r.export != nil:
		for _, b := range batches {
			for _, l := range b.lines {
				if _, err := r.export.Write(append(l, '\n')); err != nil {
					res.Outcome, res.Detail = Failing, fmt.Sprintf("export: %v", err)
					return res
				}
			}
		}
		res.Outcome = Exported
		return res
	}
	for i, b := range batches {
		if err := r.invoke(ctx, b); err != nil {
			res.Outcome, res.Detail = Failing, err.Error()
			if len(batches) > 1 {
				res.Detail = fmt.Sprintf("invocation %d of %d: %s", i+1, len(batches), res.Detail)
			}
			return res
		}
	}
	if err := src.Delete(ctx, it); err != nil {
		res.Outcome, res.Detail = Failing, fmt.Sprintf("redriven, but the message stays (the next redrive repeats it): %v", err)
		return res
	}
	r.log.Debug("message redriven", "item", it.ID, "shard_id", m.ShardID, "start", m.StartSequenceNumber, "end", m.EndSequenceNumber, "records", res.Records)
	res.Outcome = Redriven
	return res
}

// streamBatches fetches the message's records from the stream and cuts them into batches as the
// poller does: the mapping's filters and slots, at most BatchSize records, at most 6 MiB.
func (r *Redriver) streamBatches(ctx context.Context, m Message) ([]batch, error) {
	recs, err := fetch(ctx, r.src, m.ShardID, m.StartSequenceNumber, m.EndSequenceNumber)
	if err != nil {
		return nil, err
	}
	// The records the failed batch held: those the filters pass and, with ParallelizationFactor > 1,
	// those of the first record's slot (its batch held no other).
	slot := r.enc.Slot(recs[0].PartitionKey)
	matched := recs[:0:0]
	for i := range recs {
		if (r.filters == nil || r.match(&recs[i])) && r.enc.Slot(recs[i].PartitionKey) == slot {
			matched = append(matched, recs[i])
		}
	}
	recs = matched
	if len(recs) != m.BatchSize {
		return nil, fmt.Errorf("the range %s-%s holds %d records the mapping would invoke, the message names %d: the stream, shard or filters are not the ones that failed",
			m.StartSequenceNumber, m.EndSequenceNumber, len(recs), m.BatchSize)
	}
	var out []batch
	for len(recs) > 0 {
		payload, n := r.enc.Next(m.ShardID, recs)
		if len(payload) > poller.MaxPayloadBytes {
			return out, fmt.Errorf("record %s: its event is %d bytes, more than one invocation takes (%d)", recs[0].SequenceNumber, len(payload), poller.MaxPayloadBytes)
		}
		b := batch{payload: payload, recs: recs[:n]}
		if r.export != nil {
			for i := range b.recs {
				b.lines = append(b.lines, r.enc.Record(m.ShardID, &b.recs[i]))
			}
		}
		out = append(out, b)
		recs = recs[n:]
	}
	return out, nil
}

// match applies the mapping's filters as the poller does.
func (r *Redriver) match(rec *source.Record) bool { return r.enc.Match(rec) }

// payloadBatches takes the event an S3 object carries: as it is when it fits one invocation (the
// bytes the function received), else cut into batches of its records at the same limits.
func (r *Redriver) payloadBatches(m Message) ([]batch, error) {
	prs, err := payloadRecords(m.Payload)
	if err != nil {
		return nil, err
	}
	if len(prs) != m.BatchSize {
		return nil, fmt.Errorf("the payload holds %d records, the message names %d", len(prs), m.BatchSize)
	}
	newBatch := func(prs []payloadRecord) batch {
		var b batch
		for _, p := range prs {
			b.recs = append(b.recs, source.Record{SequenceNumber: p.seq})
			b.lines = append(b.lines, p.raw)
		}
		return b
	}
	if len(prs) <= r.batchSize && len(m.Payload) <= poller.MaxPayloadBytes {
		b := newBatch(prs)
		b.payload = m.Payload
		return []batch{b}, nil
	}
	const head, end = `{"Records":[`, `]}`
	var out []batch
	for len(prs) > 0 {
		payload := []byte(head)
		n := 0
		for n < len(prs) && n < r.batchSize {
			size := len(payload) + len(prs[n].raw) + len(end)
			if n > 0 {
				size++
			}
			if n > 0 && size > poller.MaxPayloadBytes {
				break
			}
			if n > 0 {
				payload = append(payload, ',')
			}
			payload = append(payload, prs[n].raw...)
			n++
		}
		payload = append(payload, end...)
		if len(payload) > poller.MaxPayloadBytes {
			return out, fmt.Errorf("record %s: its event is %d bytes, more than one invocation takes (%d)", prs[0].seq, len(payload), poller.MaxPayloadBytes)
		}
		b := newBatch(prs[:n])
		b.payload = payload
		out = append(out, b)
		prs = prs[n:]
	}
	return out, nil
}

// maxDetail bounds how much of a function's error document a report quotes.
const maxDetail = 300

// invoke runs one batch; nil means the function handled every record. The function is invoked
// as the mapping's (WithFunctionARN), as the poller invokes it.
func (r *Redriver) invoke(ctx context.Context, b batch) error {
	if arn := r.functionARN; arn != "" {
		ctx = invoke.WithFunctionARN(ctx, arn)
	}
	resp, err := r.inv.Invoke(ctx, b.payload)
	if err != nil {
		return fmt.Errorf("function not invoked: %w", err)
	}
	handled := poller.Handled(resp, b.recs, r.cfg.ReportBatchItemFailures)
	switch {
	case handled == len(b.recs):
		return nil
	case resp.Failed():
		return fmt.Errorf("function error (%s): %s", resp.FunctionError, clip(string(resp.Payload)))
	case handled > 0:
		return fmt.Errorf("partial batch response: %d of %d records handled, from %s on they failed", handled, len(b.recs), b.recs[handled].SequenceNumber)
	}
	return fmt.Errorf("the batch failed: the response names its first record as failed, or is not a valid partial batch response: %s", clip(string(resp.Payload)))
}

func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxDetail {
		return s[:maxDetail] + "…"
	}
	return s
}
