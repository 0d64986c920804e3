package poller

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

func TestFilterCriteria(t *testing.T) {
	for _, pf := range []int{1, 4} {
		t.Run(fmt.Sprintf("pf=%d", pf), func(t *testing.T) {
			f := fakekinesis.New()
			arn := f.CreateStream("s", 1)
			data := []string{`{"type":"buy","n":1}`, `{"type":"sell","n":2}`, `not json`, `{"type":"buy","n":3}`, `{"type":"sell","n":4}`, `{"type":"sell","n":5}`}
			seqs := putN(f, len(data), func(i int) string { return data[i] })
			h := &scripted{decide: func(int, events.KinesisEvent) (json.RawMessage, error) { return nil, nil }}
			fh := startFailureHarness(t, Config{BatchSize: 10, ParallelizationFactor: pf, FilterPatterns: []string{`{"data":{"type":["buy"]}}`}}, f, arn, h)
			testkit.WaitFor(t, "checkpoint past the filtered tail", 5*time.Second, func() bool {
				p, _ := fh.store.Load(context.Background())
				return p["shardId-000000000000"].Checkpoint == seqs[5]
			})
			var got []string
			for _, call := range h.invocations() {
				got = append(got, call...)
			}
			if fmt.Sprint(got) != fmt.Sprint([]string{data[0], data[3]}) {
				t.Fatalf("invoked with %q, want only the two buys", got)
			}
			// An all-filtered batch invokes nothing but still moves the checkpoint.
			before := len(h.invocations())
			more := putN(f, 3, func(int) string { return `{"type":"sell"}` })
			testkit.WaitFor(t, "checkpoint past an all-filtered batch", 5*time.Second, func() bool {
				p, _ := fh.store.Load(context.Background())
				return p["shardId-000000000000"].Checkpoint == more[2]
			})
			if len(h.invocations()) != before {
				t.Fatal("an all-filtered batch invoked the function")
			}
		})
	}
}

func TestInvalidFilterPatternRejected(t *testing.T) {
	_, err := New(kinesisSource(fakekinesis.New(), "arn:aws:kinesis:us-east-1:1:stream/s"), Config{StartingPosition: TrimHorizon,
		FilterPatterns: []string{`{"data":{"type":"buy"}}`}}, NewMemoryStore(), nil)
	var ve *ValidationError
	if !asValidation(err, &ve) || ve.Field != "FilterCriteria" || ve.Message[:len("Invalid filter pattern definition.")] != "Invalid filter pattern definition." {
		t.Fatalf("err = %v", err)
	}
}

func asValidation(err error, ve **ValidationError) bool {
	v, ok := err.(*ValidationError)
	*ve = v
	return ok
}
