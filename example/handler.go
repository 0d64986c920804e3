// Package example is the function esm ships for demos and tests: a plain aws-lambda-go Kinesis
// handler that records what it receives. It is deployed unchanged to Lambda (see bootstrap/,
// built by "make bootstrap" for provided.al2023 on arm64 and amd64).
//
// Settings come from the environment, as a Lambda function's would (under aws-lambda-rie, from
// the emulator's own environment), and are read at every invocation:
//
//	EXAMPLE_OUTPUT        file to append one JSON line (a Delivery) per record to
//	                      (default: a summary line on stdout)
//	EXAMPLE_DELAY         time to spend on each invocation, e.g. 20ms (default 0)
//
// Switches for tests of the failure paths and of the runtime itself (all off by default):
//
//	EXAMPLE_FAIL          how an invocation fails: "error" (returns an error), "panic" (panics),
//	                      "timeout" (sleeps, ignoring its context, until half a second past its
//	                      deadline, so that the platform reports a timeout)
//	EXAMPLE_FAIL_MATCH    fail only batches holding a record whose data contains this text
//	                      (default: every batch)
//	EXAMPLE_FAIL_TIMES    fail only the first N batches that match, then succeed; needs
//	                      EXAMPLE_FAIL_COUNTER (default 0: fail every time)
//	EXAMPLE_FAIL_COUNTER  file that counts the matching invocations, one byte each; it survives
//	                      the runtime restarts a panic or a timeout causes. One counter per
//	                      function instance: concurrent invocations may miscount.
//	EXAMPLE_EVENT_DUMP    file to append the event as the handler decoded it to, re-marshalled
//	                      as one JSON line per invocation (before any failure)
//	EXAMPLE_TRACE         file to append one JSON line (a Trace) per invocation that returns or
//	                      panics: process, request ID, start and end times
//
// Every file is appended to with a single write per invocation, so concurrent shards never
// interleave within a line.
package example

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

// Failure modes of EXAMPLE_FAIL.
const (
	FailError   = "error"
	FailPanic   = "panic"
	FailTimeout = "timeout"
)

// Delivery is one line of EXAMPLE_OUTPUT: one record as the function saw it.
type Delivery struct {
	RequestID    string `json:"requestId"`
	ShardID      string `json:"shardId"`
	Sequence     string `json:"sequenceNumber"`
	PartitionKey string `json:"partitionKey"`
	Data         string `json:"data"`
	BatchSize    int    `json:"batchSize"`
	// ReceivedAt is when the invocation started, in Unix milliseconds.
	ReceivedAt int64 `json:"receivedAt"`
	// InvokedAt and DoneAt are when the invocation started and when it had handled its records
	// (just before its lines were written), in Unix nanoseconds: lineage is judged on them.
	InvokedAt int64 `json:"invokedAt,omitempty"`
	DoneAt    int64 `json:"doneAt,omitempty"`
}

// Trace is one line of EXAMPLE_TRACE: one invocation.
type Trace struct {
	PID         int    `json:"pid"`
	RequestID   string `json:"requestId"`
	FunctionARN string `json:"functionArn"`
	// Deadline is the invocation's deadline, Start and End when the handler began and returned,
	// all in Unix nanoseconds. Deadline is 0 without one.
	Deadline int64 `json:"deadline"`
	Start    int64 `json:"start"`
	End      int64 `json:"end"`
	Records  int   `json:"records"`
	// Outcome is "ok", "error" or "panic".
	Outcome string `json:"outcome"`
	// TraceHeader is the invocation's X-Ray trace header, where aws-lambda-go puts it.
	TraceHeader string `json:"traceHeader,omitempty"`
}

// Config is the function's settings; the zero value records nothing and never fails.
type Config struct {
	Output      string        // EXAMPLE_OUTPUT
	Delay       time.Duration // EXAMPLE_DELAY
	Fail        string        // EXAMPLE_FAIL: "", FailError, FailPanic or FailTimeout
	FailMatch   string        // EXAMPLE_FAIL_MATCH
	FailTimes   int           // EXAMPLE_FAIL_TIMES
	FailCounter string        // EXAMPLE_FAIL_COUNTER
	EventDump   string        // EXAMPLE_EVENT_DUMP
	Trace       string        // EXAMPLE_TRACE
	// Stdout receives the summary line of each batch when Output is "" (default: os.Stdout).
	Stdout io.Writer
}

// ConfigFromEnv reads the settings from the environment. Values that do not parse are ignored,
// except EXAMPLE_FAIL, which Handle rejects (a function error) when it names no mode.
func ConfigFromEnv() Config {
	c := Config{
		Output:      os.Getenv("EXAMPLE_OUTPUT"),
		Fail:        os.Getenv("EXAMPLE_FAIL"),
		FailMatch:   os.Getenv("EXAMPLE_FAIL_MATCH"),
		FailCounter: os.Getenv("EXAMPLE_FAIL_COUNTER"),
		EventDump:   os.Getenv("EXAMPLE_EVENT_DUMP"),
		Trace:       os.Getenv("EXAMPLE_TRACE"),
	}
	if d, err := time.ParseDuration(os.Getenv("EXAMPLE_DELAY")); err == nil && d > 0 {
		c.Delay = d
	}
	if n, err := strconv.Atoi(os.Getenv("EXAMPLE_FAIL_TIMES")); err == nil && n > 0 {
		c.FailTimes = n
	}
	return c
}

// Handle runs the function with the settings in the environment (ConfigFromEnv).
func Handle(ctx context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
	return ConfigFromEnv().Handle(ctx, e)
}

// HandleTo is Handle with the summary lines written to w instead of os.Stdout.
func HandleTo(w io.Writer) func(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error) {
	return func(ctx context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
		c := ConfigFromEnv()
		c.Stdout = w
		return c.Handle(ctx, e)
	}
}

// Handle records every record of the batch and reports no failures, unless c asks it to fail.
func (c Config) Handle(ctx context.Context, e events.KinesisEvent) (resp events.KinesisEventResponse, err error) {
	start := time.Now()
	tr := Trace{PID: os.Getpid(), Start: start.UnixNano(), Records: len(e.Records), Outcome: "ok"}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		tr.RequestID, tr.FunctionARN = lc.AwsRequestID, lc.InvokedFunctionArn
	}
	if dl, ok := ctx.Deadline(); ok {
		tr.Deadline = dl.UnixNano()
	}
	tr.TraceHeader, _ = ctx.Value("x-amzn-trace-id").(string) // aws-lambda-go's key
	if c.Trace != "" {
		defer func() {
			v := recover()
			switch {
			case v != nil:
				tr.Outcome = "panic"
			case err != nil:
				tr.Outcome = "error"
			}
			tr.End = time.Now().UnixNano()
			if line, merr := json.Marshal(tr); merr == nil {
				_ = appendFile(c.Trace, append(line, '\n')) // the outcome matters more than its trace
			}
			if v != nil {
				panic(v)
			}
		}()
	}

	if err := c.dump(e); err != nil {
		return resp, err
	}
	texts := make([]string, len(e.Records))
	for i, r := range e.Records {
		texts[i] = string(r.Kinesis.Data)
	}
	if err := c.failOn(ctx, texts); err != nil {
		return resp, err
	}
	if err := c.delay(ctx); err != nil {
		return resp, err
	}
	return resp, c.record(tr.RequestID, start, e)
}

// delay spends c.Delay, or less if ctx ends first.
func (c Config) delay(ctx context.Context) error {
	if c.Delay <= 0 {
		return nil
	}
	select {
	case <-time.After(c.Delay):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// failOn fails the invocation the way c.Fail says, if this batch is one to fail: texts are its
// records as EXAMPLE_FAIL_MATCH is looked for in them.
func (c Config) failOn(ctx context.Context, texts []string) error {
	if c.Fail == "" {
		return nil
	}
	if c.Fail != FailError && c.Fail != FailPanic && c.Fail != FailTimeout {
		return fmt.Errorf("example: EXAMPLE_FAIL=%q: want %q, %q or %q", c.Fail, FailError, FailPanic, FailTimeout)
	}
	if c.FailMatch != "" && !slices.ContainsFunc(texts, func(t string) bool { return strings.Contains(t, c.FailMatch) }) {
		return nil
	}
	if c.FailTimes > 0 {
		if c.FailCounter == "" {
			return errors.New("example: EXAMPLE_FAIL_TIMES needs EXAMPLE_FAIL_COUNTER")
		}
		n, err := count(c.FailCounter)
		if err != nil {
			return err
		}
		if n > c.FailTimes {
			return nil
		}
	}
	switch c.Fail {
	case FailPanic:
		panic("example: panicking as EXAMPLE_FAIL=panic asks")
	case FailTimeout:
		wait := 10 * time.Second
		if dl, ok := ctx.Deadline(); ok {
			wait = time.Until(dl) + 500*time.Millisecond
		}
		time.Sleep(wait) // deliberately deaf to ctx: a handler that overruns its timeout
		return nil
	default:
		return errors.New("example: failing as EXAMPLE_FAIL=error asks")
	}
}

// count adds one to the counter file and returns the new count.
func count(path string) (int, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := f.Write([]byte{'.'}); err != nil {
		return 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return int(fi.Size()), nil
}

// record writes one Delivery per record to c.Output, or a summary line to c.Stdout.
func (c Config) record(reqID string, start time.Time, e events.KinesisEvent) error {
	if c.Output == "" {
		if n := len(e.Records); n > 0 {
			out := c.Stdout
			if out == nil {
				out = os.Stdout
			}
			fmt.Fprintf(out, "received %d records from %s (%s … %s)\n", n, shardOf(e.Records[0].EventID),
				e.Records[0].Kinesis.SequenceNumber, e.Records[n-1].Kinesis.SequenceNumber)
		}
		return nil
	}
	var buf []byte
	done := time.Now().UnixNano()
	for _, r := range e.Records {
		line, err := json.Marshal(Delivery{
			RequestID: reqID, ShardID: shardOf(r.EventID), Sequence: r.Kinesis.SequenceNumber,
			PartitionKey: r.Kinesis.PartitionKey, Data: string(r.Kinesis.Data), BatchSize: len(e.Records),
			ReceivedAt: start.UnixMilli(), InvokedAt: start.UnixNano(), DoneAt: done,
		})
		if err != nil {
			return err
		}
		buf = append(append(buf, line...), '\n')
	}
	return appendFile(c.Output, buf)
}

// dump appends the event as the handler decoded it to c.EventDump, if set.
func (c Config) dump(e any) error {
	if c.EventDump == "" {
		return nil
	}
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return appendFile(c.EventDump, append(line, '\n'))
}

// appendFile appends data to path in one write.
func appendFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// shardOf takes the shard id from an eventID ("shardId-000000000000:<sequence number>").
func shardOf(eventID string) string {
	for i := 0; i < len(eventID); i++ {
		if eventID[i] == ':' {
			return eventID[:i]
		}
	}
	return eventID
}
