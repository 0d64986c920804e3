package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/kinesis-esm/esm/metrics"
	"github.com/kinesis-esm/esm/metrics/emf"
	"github.com/kinesis-esm/esm/metrics/health"
	"github.com/kinesis-esm/esm/metrics/prom"
	"github.com/kinesis-esm/esm/poller"
)

// A program exposes the mapping's metrics on 127.0.0.1:9090 and writes EMF lines to stdout,
// through one observer handed to the poller with poller.WithObserver.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	reg := prom.NewRegistry()
	lines := emf.New(os.Stdout, "ESM", "my-function", "orders", emf.WithInterval(time.Minute))
	obs := metrics.Tee(prom.New(reg, "my-function", "orders"), lines)
	_ = poller.WithObserver(obs) // with the poller's other options

	var leasesHeld bool // kept up to date by the program
	srv := health.New("127.0.0.1:9090", health.WithGatherer(reg), health.WithReadiness(func() error {
		if !leasesHeld {
			return errors.New("no lease held yet")
		}
		return nil
	}))
	if _, err := srv.Listen(); err != nil { // an address in use fails before any work starts
		log.Fatal(err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Run(gctx) })
	g.Go(func() error { return lines.Run(gctx) })
	// ... run the poller with obs until ctx ends ...
	if err := g.Wait(); err != nil {
		log.Fatal(err)
	}
}

type printer struct{ poller.NopObserver }

func (printer) RecordsPolled(shardID string, n int) { fmt.Println("polled", shardID, n) }

// Tee passes every measurement to each observer.
func ExampleTee() {
	obs := metrics.Tee(printer{}, prom.New(nil, "my-function", "orders"), printer{})
	obs.RecordsPolled("shardId-000000000000", 3)
	// Output:
	// polled shardId-000000000000 3
	// polled shardId-000000000000 3
}
