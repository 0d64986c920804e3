package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/kinesis-esm/esm/fake/fakedynamo"
	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/invoke/target"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/runner"
)

// ordersStream is the in-memory Kinesis of fake/fakekinesis with a stream "orders" of one shard
// holding three records. It stands in for Kinesis in these examples; a program passes its
// aws.Config to runner.New (runner.AWSConfig for the local emulators) and no WithKinesis.
func ordersStream() *fakekinesis.Fake {
	kin := fakekinesis.New()
	kin.CreateStream("orders", 1)
	for _, id := range []string{"o-1", "o-2", "o-3"} {
		kin.Put("orders", id, []byte(`{"id":"`+id+`"}`))
	}
	return kin
}

// ordersRunner is a Runner on ordersStream, with opts, that logs nothing.
func ordersRunner(opts ...runner.Option) *runner.Runner {
	opts = append(opts, runner.WithKinesis(ordersStream()), runner.WithLogger(slog.New(slog.DiscardHandler)))
	r, err := runner.New(aws.Config{Region: "us-east-1"}, opts...)
	if err != nil {
		panic(err)
	}
	return r
}

// stateDir is a new temporary directory, for a mapping's checkpoints.
func stateDir() string {
	dir, err := os.MkdirTemp("", "esm-example")
	if err != nil {
		panic(err)
	}
	return dir
}

// stopAfter returns a context that is cancelled once done has been called n times.
func stopAfter(n int) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	return ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if n--; n == 0 {
			cancel()
		}
	}
}

// A Go handler, with one of aws-lambda-go's signatures, run in this process on a stream's
// records, its progress checkpointed in a state directory.
func Example() {
	ctx, done := stopAfter(3)
	handle := func(_ context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
		for _, rec := range e.Records {
			fmt.Println(rec.Kinesis.PartitionKey, string(rec.Kinesis.Data))
			done()
		}
		return events.KinesisEventResponse{}, nil
	}
	r, err := runner.New(aws.Config{Region: "us-east-1"}, runner.WithKinesis(ordersStream()),
		runner.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		panic(err)
	}
	dir, err := os.MkdirTemp("", "esm-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	err = r.Run(ctx, runner.Mapping{ // until ctx ends
		Source:   runner.Source{Stream: "orders"},
		Function: runner.Function{Handler: handle, Name: "orders"},
		Config:   poller.Config{StartingPosition: poller.TrimHorizon, BatchSize: 10},
		Store:    runner.Store{StateDir: dir},
	})
	fmt.Println("stopped:", err)
	// Output:
	// o-1 {"id":"o-1"}
	// o-2 {"id":"o-2"}
	// o-3 {"id":"o-3"}
	// stopped: <nil>
}

// A function behind a Lambda-Invoke-compatible HTTP endpoint, as aws-lambda-rie serves one (here
// a test server): invoke/target builds the invoker from the target as "esm run --invoke" takes
// it.
func Example_httpTarget() {
	ctx, done := stopAfter(3)
	fn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var e events.KinesisEvent
		if err := json.NewDecoder(req.Body).Decode(&e); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rec := range e.Records {
			fmt.Println(req.URL.Path, rec.Kinesis.PartitionKey)
			done()
		}
		_, _ = io.WriteString(w, `{"batchItemFailures":[]}`)
	}))
	defer fn.Close()
	inv, closeFn, err := target.Open(fn.URL, target.WithTimeout(10*time.Second))
	if err != nil {
		panic(err)
	}
	defer closeFn()
	dir := stateDir()
	defer os.RemoveAll(dir)

	err = ordersRunner().Run(ctx, runner.Mapping{
		Source:   runner.Source{Stream: "orders"},
		Function: runner.Function{Invoker: inv, Name: "function", Timeout: 10 * time.Second},
		Config:   poller.Config{StartingPosition: poller.TrimHorizon},
		Store:    runner.Store{StateDir: dir},
	})
	fmt.Println("stopped:", err)
	// Output:
	// /2015-03-31/functions/function/invocations o-1
	// /2015-03-31/functions/function/invocations o-2
	// /2015-03-31/functions/function/invocations o-3
	// stopped: <nil>
}

// A mapping shared by the workers of a DynamoDB lease table: each worker runs the same mapping
// with its own WorkerID, and the table's leases give each shard to one of them, its checkpoint
// kept in the table. The in-memory DynamoDB of fake/fakedynamo stands in for DynamoDB here.
func Example_leaseTable() {
	ctx, done := stopAfter(3)
	handle := func(_ context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
		for _, rec := range e.Records {
			fmt.Println(rec.Kinesis.PartitionKey)
			done()
		}
		return events.KinesisEventResponse{}, nil
	}
	ddb := fakedynamo.New()
	err := ordersRunner(runner.WithDynamoDB(ddb)).Run(ctx, runner.Mapping{
		Source:   runner.Source{Stream: "orders"},
		Function: runner.Function{Handler: handle, Name: "orders"},
		Config:   poller.Config{StartingPosition: poller.TrimHorizon},
		Store: runner.Store{LeaseTable: "orders-leases", CreateLeaseTable: true, WorkerID: "worker-1",
			LeaseDuration: 2 * time.Second},
	})
	fmt.Println("stopped:", err)
	fmt.Println("lease table written:", len(ddb.Items("orders-leases")) > 0)
	// Output:
	// o-1
	// o-2
	// o-3
	// stopped: <nil>
	// lease table written: true
}
