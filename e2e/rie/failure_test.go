package rie

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/internal/testbed/verify"
	"github.com/kinesis-esm/esm/invoke"
)

// checkDelivered fails unless every written record was delivered exactly once, in put order per
// key.
func checkDelivered(t *testing.T, out string, written map[string]int) {
	t.Helper()
	got := deliveries(t, out)
	if msg := verify.Failed(verify.Deliveries(got, written, nil)); msg != "" {
		t.Fatal(msg)
	}
	total := 0
	for _, n := range written {
		total += n
	}
	if len(got) != total {
		t.Fatalf("%d deliveries of %d records: a failed invocation must not have delivered any", len(got), total)
	}
}

// TestRIEHandlerErrorIsRetriedUntilItSucceeds: a handler that returns an error answers 200 with
// an error document and no X-Amz-Function-Error under aws-lambda-rie; esm classifies it as a
// function error and retries the same batch, which succeeds once the handler stops failing.
func TestRIEHandlerErrorIsRetriedUntilItSucceeds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, counter := filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "counter")
	r := startRIE(t, 3*time.Second, "EXAMPLE_OUTPUT="+out,
		"EXAMPLE_FAIL=error", "EXAMPLE_FAIL_TIMES=2", "EXAMPLE_FAIL_COUNTER="+counter)
	stream := newStream(t, 1)
	written := put(t, stream, []string{"a", "b"}, 3)

	w := newWire()
	rec := &recorder{inv: httpInvoker(t, w, 3*time.Second, r.Endpoint())}
	m := runMapping(t, stream, mappingConfig(100), rec, nil)
	testkit.WaitFor(t, "6 deliveries", 30*time.Second, func() bool { return len(deliveries(t, out)) >= 6 })
	m.stop(t)

	checkDelivered(t, out, written)
	calls := rec.snapshot()
	if len(calls) != 3 {
		t.Fatalf("%d invocations, want 2 failures and 1 success", len(calls))
	}
	for i, c := range calls {
		if c.err != nil {
			t.Fatalf("invocation %d: %v", i, c.err)
		}
		if !bytes.Equal(c.payload, calls[0].payload) {
			t.Fatalf("invocation %d sent another batch: a failed batch is retried as it was", i)
		}
	}
	for _, c := range calls[:2] {
		doc := errorDocument(t, c.resp.Payload)
		if c.resp.FunctionError != invoke.FunctionErrorUnhandled || doc.ErrorType != "errorString" || doc.ErrorMessage != "example: failing as EXAMPLE_FAIL=error asks" {
			t.Fatalf("failed invocation: %+v, document %+v", c.resp, doc)
		}
	}
	if calls[2].resp.Failed() {
		t.Fatalf("third invocation failed: %s", calls[2].resp.Payload)
	}
	if got := w.answers(); len(got) != 3 || got[0] != 200 || got[1] != 200 || got[2] != 200 {
		t.Fatalf("statuses on the wire %v: aws-lambda-rie answers handler errors with 200", got)
	}
	alive(t, r)
}

// TestRIEHandlerErrorThenTheFailurePath: a batch that always fails is retried
// MaximumRetryAttempts times, then discarded; the shard moves on to later records.
func TestRIEHandlerErrorThenTheFailurePath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	r := startRIE(t, 3*time.Second, "EXAMPLE_OUTPUT="+out, "EXAMPLE_FAIL=error", "EXAMPLE_FAIL_MATCH=poison")
	stream := newStream(t, 1)
	if _, err := local.PutRecords(testContext(t, 10*time.Second), kin, stream, []local.Record{{PartitionKey: "p", Data: []byte("poison")}}); err != nil {
		t.Fatal(err)
	}

	rec := &recorder{inv: httpInvoker(t, newWire(), 3*time.Second, r.Endpoint())}
	cfg := mappingConfig(100)
	retries := 1
	cfg.MaximumRetryAttempts = &retries
	m := runMapping(t, stream, cfg, rec, nil)
	testkit.WaitFor(t, "the poison batch to be tried twice", 30*time.Second, func() bool { return len(rec.snapshot()) >= 2 })
	written := put(t, stream, []string{"after"}, 2)
	testkit.WaitFor(t, "the records after it", 30*time.Second, func() bool { return len(deliveries(t, out)) >= 2 })
	m.stop(t)

	checkDelivered(t, out, written)
	calls := rec.snapshot()
	poisoned := 0
	for _, c := range calls {
		if !bytes.Contains(c.payload, []byte(`"cG9pc29u"`)) { // "poison" in base64
			continue
		}
		poisoned++
		if c.err != nil || c.resp.FunctionError != invoke.FunctionErrorUnhandled {
			t.Fatalf("poison invocation: %+v, %v", c.resp, c.err)
		}
	}
	if poisoned != 2 {
		t.Fatalf("the poison batch was invoked %d times, want 2 (MaximumRetryAttempts 1)", poisoned)
	}
	if !strings.Contains(m.logs.String(), "RetryAttemptsExhausted") {
		t.Fatalf("no discard logged")
	}
}

// TestRIEPanicRestartsTheRuntime: a panic answers 502 with the Go runtime's error document; the
// runtime process exits, and the next invoke starts a new one that succeeds.
func TestRIEPanicRestartsTheRuntime(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, trace := filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "trace.jsonl")
	r := startRIE(t, 3*time.Second, "EXAMPLE_OUTPUT="+out, "EXAMPLE_TRACE="+trace,
		"EXAMPLE_FAIL=panic", "EXAMPLE_FAIL_TIMES=1", "EXAMPLE_FAIL_COUNTER="+filepath.Join(dir, "counter"))
	stream := newStream(t, 1)
	written := put(t, stream, []string{"k"}, 4)

	w := newWire()
	rec := &recorder{inv: httpInvoker(t, w, 3*time.Second, r.Endpoint())}
	m := runMapping(t, stream, mappingConfig(100), rec, nil)
	testkit.WaitFor(t, "4 deliveries", 30*time.Second, func() bool { return len(deliveries(t, out)) >= 4 })
	m.stop(t)

	checkDelivered(t, out, written)
	calls := rec.snapshot()
	if len(calls) != 2 {
		t.Fatalf("%d invocations, want a panic and a success", len(calls))
	}
	doc := errorDocument(t, calls[0].resp.Payload)
	if calls[0].err != nil || calls[0].resp.FunctionError != invoke.FunctionErrorUnhandled || calls[0].resp.StatusCode != 200 ||
		doc.ErrorType != "string" || doc.ErrorMessage != "example: panicking as EXAMPLE_FAIL=panic asks" || len(doc.StackTrace) == 0 {
		t.Fatalf("panic: %+v, %v, document %+v", calls[0].resp, calls[0].err, doc)
	}
	if calls[1].err != nil || calls[1].resp.Failed() {
		t.Fatalf("after the panic: %+v, %v", calls[1].resp, calls[1].err)
	}
	if got := w.answers(); len(got) != 2 || got[0] != 502 || got[1] != 200 {
		t.Fatalf("statuses on the wire %v, want [502 200]", got)
	}
	tr := traces(t, trace)
	if len(tr) != 2 || tr[0].Outcome != "panic" || tr[1].Outcome != "ok" || tr[0].PID == tr[1].PID {
		t.Fatalf("traces %+v: want a panic in one runtime process, then success in a new one", tr)
	}
	alive(t, r)
}

// TestRIETimeout: a handler that overruns AWS_LAMBDA_FUNCTION_TIMEOUT gets aws-lambda-rie's
// plain-text "Task timed out after 1.00 seconds", reported as Lambda reports it (Sandbox.Timedout);
// the runtime is replaced and the retried batch succeeds. The handler's lambdacontext carries the
// request ID esm sent and the deadline of the timeout.
func TestRIETimeout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, trace := filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "trace.jsonl")
	r := startRIE(t, time.Second, "EXAMPLE_OUTPUT="+out, "EXAMPLE_TRACE="+trace,
		"EXAMPLE_FAIL=timeout", "EXAMPLE_FAIL_TIMES=1", "EXAMPLE_FAIL_COUNTER="+filepath.Join(dir, "counter"))
	stream := newStream(t, 1)
	written := put(t, stream, []string{"k"}, 3)

	rec := &recorder{inv: httpInvoker(t, newWire(), time.Second, r.Endpoint())}
	m := runMapping(t, stream, mappingConfig(100), rec, nil)
	testkit.WaitFor(t, "3 deliveries", 30*time.Second, func() bool { return len(deliveries(t, out)) >= 3 })
	m.stop(t)

	checkDelivered(t, out, written)
	calls := rec.snapshot()
	if len(calls) != 2 {
		t.Fatalf("%d invocations, want a timeout and a success", len(calls))
	}
	first := calls[0]
	doc := errorDocument(t, first.resp.Payload)
	wantMsg := fmt.Sprintf("RequestId: %s Error: Task timed out after 1.00 seconds", first.resp.RequestID)
	if first.err != nil || first.resp.FunctionError != invoke.FunctionErrorUnhandled || doc.ErrorType != "Sandbox.Timedout" || doc.ErrorMessage != wantMsg {
		t.Fatalf("timeout: %+v, %v, document %+v; want message %q", first.resp, first.err, doc, wantMsg)
	}
	if took := first.end.Sub(first.start); took < time.Second || took > 3*time.Second {
		t.Fatalf("the timed-out invocation took %v, want about the 1 s timeout", took)
	}
	if calls[1].err != nil || calls[1].resp.Failed() {
		t.Fatalf("after the timeout: %+v, %v", calls[1].resp, calls[1].err)
	}
	// The overrunning handler was killed before it could trace; the retry ran in a new runtime.
	tr := traces(t, trace)
	if len(tr) != 1 || tr[0].Outcome != "ok" || tr[0].RequestID != calls[1].resp.RequestID {
		t.Fatalf("traces %+v: want one successful invocation with request ID %s", tr, calls[1].resp.RequestID)
	}
	if d := time.Duration(tr[0].Deadline - tr[0].Start); d <= 0 || d > time.Second {
		t.Fatalf("handler deadline %v after its start, want within the 1 s timeout", d)
	}
	if tr[0].FunctionARN != "arn:aws:lambda:us-east-1:012345678912:function:example" {
		t.Fatalf("InvokedFunctionArn %q", tr[0].FunctionARN)
	}
	alive(t, r)
}
