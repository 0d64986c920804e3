// Command ddb-local serves an in-memory DynamoDB with DynamoDB Streams (fake/fakedynamo) on
// 127.0.0.1: the DynamoDB API and the DynamoDB Streams API on one port, with DynamoDB's JSON 1.0
// protocol, for emulator tests, the demo and local development. No emulator that can be
// installed here serves DynamoDB Streams (dynalite has none), so esm brings its own, as
// LocalStack does.
//
//	ddb-local -port 14571 -rotate 4h
//
// Every write (PutItem, UpdateItem, DeleteItem, BatchWriteItem, TransactWriteItems) to a table
// with a stream writes a stream record in the stream's view type; shards close and their
// children open every -rotate, records are trimmed after -retention and iterators expire after
// -iterator-ttl. State is in memory only: a restart forgets every table.
//
// It listens only on a loopback address. With -port 0 it picks a free port; it prints
// "listening on 127.0.0.1:PORT" on stderr once it accepts connections, and writes the address
// to -addr-file if given. SIGTERM or SIGINT stops it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/kinesis-esm/esm/fake/fakedynamo"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "ddb-local:", err)
		os.Exit(1)
	}
}

type config struct {
	host, addrFile string
	port           int
	opts           []fakedynamo.Option
}

func parse(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("ddb-local", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	fs.StringVar(&c.host, "host", "127.0.0.1", "loopback address to listen on")
	fs.IntVar(&c.port, "port", 14571, "port to listen on (0: any free port)")
	fs.StringVar(&c.addrFile, "addr-file", "", "write the address listened on to this file")
	rotate := fs.Duration("rotate", fakedynamo.DefaultShardRotation, "how long a stream shard stays open before its child takes over (0: never)")
	retention := fs.Duration("retention", fakedynamo.DefaultStreamRetention, "how long stream records stay readable")
	ttl := fs.Duration("iterator-ttl", fakedynamo.DefaultIteratorTTL, "how long a shard iterator stays valid")
	shards := fs.Int("shards", 1, "open shards per stream")
	reads := fs.Float64("shard-reads", 0, "GetRecords calls per shard per second before LimitExceededException (0: no limit)")
	region := fs.String("region", "us-east-1", "region of ARNs and records")
	account := fs.String("account", "000000000000", "account of ARNs")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if ip := net.ParseIP(c.host); ip == nil || !ip.IsLoopback() {
		return c, fmt.Errorf("-host %q: only a loopback address is allowed", c.host)
	}
	if c.port < 0 || c.port > 65535 {
		return c, fmt.Errorf("-port %d: out of range", c.port)
	}
	if *rotate < 0 || *retention <= 0 || *ttl <= 0 || *shards < 1 || *shards > 100 || *reads < 0 {
		return c, errors.New("-rotate must be ≥ 0, -retention and -iterator-ttl > 0, -shards 1–100, -shard-reads ≥ 0")
	}
	c.opts = []fakedynamo.Option{
		fakedynamo.WithShardRotation(*rotate), fakedynamo.WithStreamRetention(*retention), fakedynamo.WithIteratorTTL(*ttl),
		fakedynamo.WithStreamShards(*shards), fakedynamo.WithShardReadRate(*reads),
		fakedynamo.WithRegion(*region), fakedynamo.WithAccount(*account),
	}
	return c, nil
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	c, err := parse(args, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	ln, err := net.Listen("tcp", net.JoinHostPort(c.host, strconv.Itoa(c.port)))
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	if c.addrFile != "" {
		tmp := c.addrFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(addr+"\n"), 0o644); err != nil {
			ln.Close()
			return err
		}
		if err := os.Rename(tmp, c.addrFile); err != nil {
			ln.Close()
			return err
		}
	}
	srv := &http.Server{Handler: fakedynamo.New(c.opts...).Handler(), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	fmt.Fprintf(stderr, "listening on %s\n", addr)
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	log.Info("stopping")
	shutdown, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		srv.Close()
	}
	<-done
	return nil
}
