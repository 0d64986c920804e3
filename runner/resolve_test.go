package runner

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/checkpoint"
	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/poller"
)

// TestResolve: the one naming of a mapping (what keys its checkpoints, what its function is
// invoked as): the stream found by name or ARN; the function's ARN given (Function.ARN), or as the
// function's name, or the name completed in the stream's partition, region and account. A stream
// that does not exist is ErrStreamNotFound; a source Resolve found is not looked up again.
func TestResolve(t *testing.T) {
	kin := fakekinesis.New(fakekinesis.WithAccount("111122223333"))
	arn := kin.CreateStream("orders", 1)
	r, _ := fakeRunner(t, kin, nil)
	ctx := context.Background()
	const other = "arn:aws:lambda:eu-west-1:444455556666:function:other"
	for _, c := range []struct {
		name string
		m    Mapping
		fn   string
	}{
		{"by name", Mapping{Source: Source{Stream: "orders"}, Function: Function{Name: "ship"}}, "arn:aws:lambda:us-east-1:111122223333:function:ship"},
		{"default name", Mapping{Source: Source{Stream: arn}}, "arn:aws:lambda:us-east-1:111122223333:function:" + DefaultFunctionName},
		{"function ARN as name", Mapping{Source: Source{Stream: arn}, Function: Function{Name: other}}, other},
		{"function ARN given", Mapping{Source: Source{Stream: "orders"}, Function: Function{Name: "ship", ARN: other}}, other},
	} {
		got, err := r.Resolve(ctx, c.m)
		if err != nil || got.StreamARN != arn || got.FunctionARN != c.fn || got.ConsumerARN != "" {
			t.Errorf("%s: %+v, %v; want %s, %s", c.name, got, err, arn, c.fn)
		}
		if got.Key() != checkpoint.MappingKey(arn, c.fn) {
			t.Errorf("%s: key %q", c.name, got.Key())
		}
	}
	if _, err := r.Resolve(ctx, Mapping{Source: Source{Stream: "gone"}}); !errors.Is(err, poller.ErrStreamNotFound) {
		t.Errorf("a stream that does not exist: %v", err)
	}
	found, err := r.Resolve(ctx, Mapping{Source: Source{Stream: "orders"}, Function: Function{Name: "ship"}})
	if err != nil {
		t.Fatal(err)
	}
	calls := kin.Calls("DescribeStreamSummary")
	again, err := r.Resolve(ctx, Mapping{Source: found.Source(), Function: Function{Name: "ship"}})
	if err != nil || again != found || kin.Calls("DescribeStreamSummary") != calls {
		t.Errorf("a found source: %+v, %v, %d lookups; want %+v without a lookup", again, err, kin.Calls("DescribeStreamSummary")-calls, found)
	}
}

// TestRunInvokesAsTheFunctionIsNamed: the function's identity is Mapping.Function's alone, and
// Run gives it to the poller (poller.WithFunctionARN): an invoker sees Function.ARN on each
// invocation (invoke.FunctionARN), not its own default.
func TestRunInvokesAsTheFunctionIsNamed(t *testing.T) {
	kin := fakekinesis.New()
	kin.CreateStream("orders", 1)
	kin.Put("orders", "k", []byte("x"))
	r, _ := fakeRunner(t, kin, nil)
	const fn = "arn:aws:lambda:us-east-1:000000000000:function:other"
	seen := make(chan string, 1)
	inv := invokerFunc(func(ctx context.Context, _ []byte) (invoke.Response, error) {
		select {
		case seen <- invoke.FunctionARN(ctx, "none"):
		default:
		}
		return invoke.Response{StatusCode: 200}, nil
	})
	stop := runUntil(r, Mapping{Source: Source{Stream: "orders"}, Function: Function{Name: "ship", ARN: fn, Invoker: inv},
		Config: poller.Config{StartingPosition: poller.TrimHorizon, PollInterval: 10 * time.Millisecond}, Store: Store{StateDir: t.TempDir()}})
	select {
	case got := <-seen:
		if got != fn {
			t.Errorf("the function was invoked as %q, want Function.ARN %s", got, fn)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("timed out waiting for the invocation")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// invokerFunc is a poller.Invoker of a function.
type invokerFunc func(ctx context.Context, payload []byte) (invoke.Response, error)

func (f invokerFunc) Invoke(ctx context.Context, payload []byte) (invoke.Response, error) {
	return f(ctx, payload)
}
