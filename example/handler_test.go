package example

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

func event(data ...string) events.KinesisEvent {
	var e events.KinesisEvent
	for i, d := range data {
		e.Records = append(e.Records, events.KinesisEventRecord{
			EventID: "shardId-000000000001:" + string(rune('0'+i)),
			Kinesis: events.KinesisRecord{Data: []byte(d), PartitionKey: "k", SequenceNumber: string(rune('0' + i))},
		})
	}
	return e
}

func TestHandleRecordsEveryRecord(t *testing.T) {
	dir := t.TempDir()
	c := Config{Output: filepath.Join(dir, "out"), EventDump: filepath.Join(dir, "dump"), Trace: filepath.Join(dir, "trace")}
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "r1", InvokedFunctionArn: "arn:f"})
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	e := event("a", "b")
	if _, err := c.Handle(ctx, e); err != nil {
		t.Fatal(err)
	}
	out := readLines(t, c.Output)
	var d Delivery
	if len(out) != 2 || json.Unmarshal([]byte(out[1]), &d) != nil || d.Data != "b" || d.ShardID != "shardId-000000000001" || d.RequestID != "r1" || d.BatchSize != 2 {
		t.Fatalf("deliveries %q", out)
	}
	want, _ := json.Marshal(e)
	if dump := readLines(t, c.EventDump); len(dump) != 1 || dump[0] != string(want) {
		t.Fatalf("event dump %q, want %s", dump, want)
	}
	var tr Trace
	if ls := readLines(t, c.Trace); len(ls) != 1 || json.Unmarshal([]byte(ls[0]), &tr) != nil {
		t.Fatalf("trace %q", ls)
	}
	if tr.RequestID != "r1" || tr.FunctionARN != "arn:f" || tr.Outcome != "ok" || tr.Records != 2 || tr.PID != os.Getpid() ||
		tr.End < tr.Start || tr.Deadline <= tr.Start {
		t.Fatalf("trace %+v", tr)
	}
}

func TestHandleFailures(t *testing.T) {
	t.Run("error only for matching batches", func(t *testing.T) {
		c := Config{Fail: FailError, FailMatch: "poison"}
		if _, err := c.Handle(context.Background(), event("fine")); err != nil {
			t.Fatalf("a batch without the match failed: %v", err)
		}
		if _, err := c.Handle(context.Background(), event("fine", "a poison pill")); err == nil {
			t.Fatal("the matching batch did not fail")
		}
	})
	t.Run("the first N times", func(t *testing.T) {
		dir := t.TempDir()
		c := Config{Fail: FailError, FailTimes: 2, FailCounter: filepath.Join(dir, "n"), Trace: filepath.Join(dir, "trace")}
		var got []bool
		for range 4 {
			_, err := c.Handle(context.Background(), event("x"))
			got = append(got, err != nil)
		}
		if want := []bool{true, true, false, false}; !slices.Equal(got, want) {
			t.Fatalf("failed %v, want %v", got, want)
		}
		if ls := readLines(t, c.Trace); len(ls) != 4 || !strings.Contains(ls[0], `"outcome":"error"`) || !strings.Contains(ls[3], `"outcome":"ok"`) {
			t.Fatalf("traces %q", ls)
		}
	})
	t.Run("panic is traced and rethrown", func(t *testing.T) {
		c := Config{Fail: FailPanic, Trace: filepath.Join(t.TempDir(), "trace")}
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			_, _ = c.Handle(context.Background(), event("x"))
		}()
		if ls := readLines(t, c.Trace); len(ls) != 1 || !strings.Contains(ls[0], `"outcome":"panic"`) {
			t.Fatalf("traces %q", ls)
		}
	})
	t.Run("timeout overruns the deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, _ = Config{Fail: FailTimeout}.Handle(ctx, event("x"))
		if took := time.Since(start); took < 500*time.Millisecond {
			t.Fatalf("returned after %v: a handler meant to time out must overrun its deadline", took)
		}
	})
	t.Run("bad settings are function errors", func(t *testing.T) {
		for _, c := range []Config{{Fail: "sometimes"}, {Fail: FailError, FailTimes: 1}} {
			if _, err := c.Handle(context.Background(), event("x")); err == nil || !strings.Contains(err.Error(), "EXAMPLE_FAIL") {
				t.Fatalf("%+v: err %v", c, err)
			}
		}
	})
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("EXAMPLE_OUTPUT", "o")
	t.Setenv("EXAMPLE_DELAY", "20ms")
	t.Setenv("EXAMPLE_FAIL", "panic")
	t.Setenv("EXAMPLE_FAIL_MATCH", "m")
	t.Setenv("EXAMPLE_FAIL_TIMES", "3")
	t.Setenv("EXAMPLE_FAIL_COUNTER", "c")
	t.Setenv("EXAMPLE_EVENT_DUMP", "d")
	t.Setenv("EXAMPLE_TRACE", "t")
	want := Config{Output: "o", Delay: 20 * time.Millisecond, Fail: "panic", FailMatch: "m", FailTimes: 3, FailCounter: "c", EventDump: "d", Trace: "t"}
	if got := ConfigFromEnv(); got != want {
		t.Fatalf("ConfigFromEnv() = %+v, want %+v", got, want)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}
