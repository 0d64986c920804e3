// Command demo shows esm end to end on local emulators, in under two minutes: a 2-shard stream
// and a producer writing over many partition keys; the example function run by the esm binary;
// live progress (records/s, iterator age per shard); a split and a merge while records flow, with
// the lineage order visible; a poison record isolated by bisection into an SQS on-failure queue;
// and a summary whose checks must all pass. It exits 0 when they do.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/kinesis-esm/esm/example"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/verify"
)

func main() {
	esmBin := flag.String("esm", "bin/esm", "path of the esm binary")
	records := flag.Int("records", 1200, "records to write")
	keys := flag.Int("keys", 40, "partition keys")
	efo := flag.Bool("efo", false, "read through an enhanced fan-out consumer (SubscribeToShard) instead of polling")
	ddb := flag.Bool("ddb", false, "tell the story on a DynamoDB table's stream (ddb-local) instead of a Kinesis stream")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	story := func() error { return run(ctx, *esmBin, *records, *keys, *efo) }
	if *ddb {
		story = func() error { return runDDB(ctx, *esmBin, *records, *keys) }
	}
	if err := story(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func say(format string, a ...any) { fmt.Printf("==> "+format+"\n", a...) }

const (
	stream   = "demo-stream"
	queue    = "demo-failures"
	poison   = "poison"
	consumer = "demo-esm" // the enhanced fan-out consumer of -efo
	// pollInterval is esm's --poll-interval: a caught-up shard is read this often when polling.
	pollInterval = 250 * time.Millisecond
	// latencyKey is the partition key of the records whose put→invoke latency is measured.
	latencyKey     = "latency"
	latencyRecords = 20
)

// demoTemplate is the SAM template a demo's esm reads: the example function with an event of
// eventType (Kinesis, DynamoDB) on streamARN that bisects failing batches, retries twice and
// sends what fails to an SQS queue.
func demoTemplate(eventType, streamARN string) string {
	return `AWSTemplateFormatVersion: '2010-09-09'
Transform: AWS::Serverless-2016-10-31
Resources:
  Example:
    Type: AWS::Serverless::Function
    Properties:
      Runtime: provided.al2023
      Handler: bootstrap
      CodeUri: bin/
      Timeout: 3
      Events:
        Stream:
          Type: ` + eventType + `
          Properties:
            Stream: ` + streamARN + `
            StartingPosition: TRIM_HORIZON
            BatchSize: 10
            BisectBatchOnFunctionError: true
            MaximumRetryAttempts: 2
            DestinationConfig:
              OnFailure:
                Type: SQS
                Destination: arn:aws:sqs:us-east-1:000000000000:` + queue + `
`
}

// demo is one run of the story: the emulators and clients it set up, the esm process it
// started, and what the producer has written so far.
type demo struct {
	begin       time.Time
	total, keys int
	efo         bool   // read through a registered consumer
	work        string // temporary folder: template, state, log, deliveries
	kin         *kinesis.Client
	sqs         *sqs.Client
	queueURL    string
	out         string // the example function's deliveries (JSON lines)
	logPath     string
	metricsAddr string

	esm    *exec.Cmd
	exited chan error // esm.Wait's result

	written   atomic.Int64
	poisonSeq atomic.Value   // the poison record's sequence number
	perKey    map[string]int // records written per key, set when the producer is done

	prev   int // deliveries at the last progress line, and when
	prevAt time.Time
}

// run tells the whole story and returns an error unless every check passed.
func run(ctx context.Context, esmBin string, total, keys int, efo bool) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	d := &demo{begin: time.Now(), total: total, keys: keys, efo: efo}
	work, err := os.MkdirTemp("", "esm-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	d.work = work

	emu, err := local.StartKinesis(ctx, local.KinesisOptions{})
	if err != nil {
		return err
	}
	defer emu.Stop()
	sqsSrv, err := local.StartSQS()
	if err != nil {
		return err
	}
	defer sqsSrv.Close()
	say("kinesis-local at %s, SQS (goaws, in-process) at %s — 127.0.0.1 only", emu.Endpoint(), sqsSrv.Endpoint())
	if err := d.createResources(ctx, emu.Endpoint(), sqsSrv.Endpoint()); err != nil {
		return err
	}
	stopESM, err := d.startESM(esmBin, emu.Endpoint(), sqsSrv.Endpoint())
	if err != nil {
		return err
	}
	defer stopESM()

	prodDone := make(chan error, 1)
	go func() { prodDone <- d.produce(ctx) }()
	say("producer writing %d records over %d partition keys, plus one poison record", total, keys)
	d.prevAt = time.Now()
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	if err := d.reshardWhileProducing(ctx, prodDone, ticker.C); err != nil {
		return err
	}
	say("producer done; waiting for esm to deliver everything and report the poison record")
	got, failures, err := d.awaitDeliveries(ctx, ticker.C)
	if err != nil {
		return err
	}
	d.progress()
	if got, err = d.measureLatency(ctx); err != nil {
		return err
	}
	_ = d.esm.Process.Signal(syscall.SIGTERM)
	if err := <-d.exited; err != nil {
		return fmt.Errorf("esm did not stop cleanly: %w", err)
	}
	say("esm stopped on SIGTERM (exit 0)")
	return d.report(ctx, got, failures)
}

// createResources makes the clients, the 2-shard stream and the on-failure queue.
func (d *demo) createResources(ctx context.Context, kinesisURL, sqsURL string) error {
	cfg, err := local.AWSConfig(ctx, "us-east-1")
	if err != nil {
		return err
	}
	d.kin = local.NewKinesisClient(cfg, kinesisURL)
	d.sqs = local.NewSQSClient(cfg, sqsURL)
	if _, err := local.CreateStream(ctx, d.kin, stream, 2); err != nil {
		return err
	}
	if d.queueURL, _, err = local.CreateQueue(ctx, d.sqs, queue); err != nil {
		return err
	}
	say("created stream %s (2 shards) and on-failure queue %s", stream, queue)
	return nil
}

// startESM writes the template and starts the esm binary on it, with the example function
// failing the poison record. The returned function kills esm if it is still running.
func (d *demo) startESM(esmBin, kinesisURL, sqsURL string) (stop func(), err error) {
	tmpl := filepath.Join(d.work, "template.yaml")
	if err := os.WriteFile(tmpl, []byte(demoTemplate("Kinesis", "arn:aws:kinesis:us-east-1:000000000000:stream/"+stream)), 0o644); err != nil {
		return nil, err
	}
	if d.metricsAddr, err = freeAddr(); err != nil {
		return nil, err
	}
	d.out = filepath.Join(d.work, "deliveries.jsonl")
	d.logPath = filepath.Join(d.work, "esm.log")
	logFile, err := os.Create(d.logPath)
	if err != nil {
		return nil, err
	}
	args := []string{"run", "--invoke", "example", "--template", tmpl, "--sqs-protocol", "query", "--poll-interval", pollInterval.String(),
		"--state-dir", filepath.Join(d.work, "state"), "--metrics-addr", d.metricsAddr}
	how := "polling every " + pollInterval.String()
	if d.efo {
		// kinesis-local never ends a closed shard's subscription: esm reads the rest of a closed
		// shard with GetRecords once ListShards shows it closed, so list often.
		args = append(args, "--register-consumer", consumer, "--shard-sync-interval", "3s")
		how = "through the enhanced fan-out consumer " + consumer + " (SubscribeToShard)"
	}
	d.esm = exec.Command(esmBin, args...)
	d.esm.Env = append(os.Environ(),
		"AWS_ENDPOINT_URL_KINESIS="+kinesisURL, "AWS_ENDPOINT_URL_SQS="+sqsURL,
		"AWS_ACCESS_KEY_ID=AKIDLOCAL", "AWS_SECRET_ACCESS_KEY=local", "AWS_REGION=us-east-1",
		"EXAMPLE_OUTPUT="+d.out, "EXAMPLE_DELAY=15ms", "EXAMPLE_FAIL=error", "EXAMPLE_FAIL_MATCH="+poison)
	d.esm.Stdout, d.esm.Stderr = logFile, logFile
	if err := d.esm.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s (make demo builds it): %w", esmBin, err)
	}
	d.exited = make(chan error, 1)
	go func() { d.exited <- d.esm.Wait() }()
	say("esm running (pid %d): reading %s; example handler in-process, BisectBatchOnFunctionError, MaximumRetryAttempts 2, SQS on-failure queue", d.esm.Process.Pid, how)
	say("esm log: %s; metrics: http://%s/metrics", d.logPath, d.metricsAddr)
	return func() {
		if d.esm.ProcessState == nil {
			_ = d.esm.Process.Kill()
			<-d.exited
		}
		logFile.Close()
	}, nil
}

// produce writes d.total records over d.keys keys, about 200 a second, with one poison record
// under its own key half-way through.
func (d *demo) produce(ctx context.Context) error {
	counters := make([]int, d.keys)
	for n := 0; n < d.total; {
		var batch []local.Record
		for len(batch) < 20 && n+len(batch) < d.total {
			k := (n + len(batch)) % d.keys
			batch = append(batch, local.Record{PartitionKey: fmt.Sprintf("key-%02d", k), Data: fmt.Appendf(nil, "key-%02d:%d", k, counters[k])})
			counters[k]++
		}
		normal := len(batch)
		if n <= d.total/2 && d.total/2 < n+normal {
			batch = append(batch, local.Record{PartitionKey: "poison-key", Data: []byte(poison)})
		}
		res, err := local.PutRecords(ctx, d.kin, stream, batch)
		if err != nil {
			return err
		}
		for i, r := range batch {
			if string(r.Data) == poison {
				d.poisonSeq.Store(aws.ToString(res[i].SequenceNumber))
			}
		}
		n += normal
		d.written.Store(int64(n))
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	d.perKey = map[string]int{}
	for k, c := range counters {
		d.perKey[fmt.Sprintf("key-%02d", k)] = c
	}
	return nil
}

// reshardWhileProducing prints progress every tick until the producer is done, splitting a
// shard a third of the way through and merging two at two thirds.
func (d *demo) reshardWhileProducing(ctx context.Context, prodDone <-chan error, tick <-chan time.Time) error {
	split, merged := false, false
	for {
		select {
		case err := <-prodDone:
			if err != nil {
				return fmt.Errorf("producer: %w", err)
			}
			return nil
		case <-tick:
			d.progress()
		case err := <-d.exited:
			tail, _ := os.ReadFile(d.logPath)
			return fmt.Errorf("esm exited early (%v); its log:\n%s", err, tail)
		case <-ctx.Done():
			return ctx.Err()
		}
		switch n := d.written.Load(); {
		case !split && n >= int64(d.total/3):
			open, err := local.OpenShards(ctx, d.kin, stream)
			if err != nil {
				return err
			}
			id := aws.ToString(open[0].ShardId)
			if err := local.SplitInHalf(ctx, d.kin, stream, id); err != nil {
				return err
			}
			say("split %s in two while records flow: its children wait until it is drained", id)
			split = true
		case split && !merged && n >= int64(2*d.total/3):
			a, b, err := local.MergeFirstAdjacent(ctx, d.kin, stream)
			if err != nil {
				return err
			}
			say("merged %s and %s: their child waits for both", a, b)
			merged = true
		}
	}
}

// awaitDeliveries waits until every record was delivered and the on-failure queue holds its
// message, printing progress every tick.
func (d *demo) awaitDeliveries(ctx context.Context, tick <-chan time.Time) (got []example.Delivery, failures []string, err error) {
	for {
		if got, err = verify.ReadDeliveries(d.out); err != nil {
			return nil, nil, err
		}
		if distinct(got) >= d.total && len(failures) > 0 {
			return got, failures, nil
		}
		if len(failures) == 0 {
			if failures, err = local.ReceiveAll(ctx, d.sqs, d.queueURL); err != nil {
				return nil, nil, err
			}
		}
		select {
		case <-tick:
			d.progress()
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("only %d of %d records delivered (%d failure messages) before the time limit", distinct(got), d.total, len(failures))
		}
	}
}

// measureLatency puts latencyRecords records one at a time, each once the previous one was
// invoked and a pause of a third of the poll interval later (so that puts land at every phase of
// the poll cycle), and prints the put→invoke latency: from PutRecords' return to the function's
// start (the delivery's receivedAt, in milliseconds). It returns every delivery so far.
func (d *demo) measureLatency(ctx context.Context) ([]example.Delivery, error) {
	var lat []time.Duration
	var got []example.Delivery
	for i := range latencyRecords {
		data := fmt.Sprintf("%s:%d", latencyKey, i)
		if _, err := local.PutRecords(ctx, d.kin, stream, []local.Record{{PartitionKey: latencyKey, Data: []byte(data)}}); err != nil {
			return nil, err
		}
		put := time.Now()
		for {
			var err error
			if got, err = verify.ReadDeliveries(d.out); err != nil {
				return nil, err
			}
			if at, ok := receivedAt(got, data); ok {
				lat = append(lat, max(time.UnixMilli(at).Sub(put), 0))
				break
			}
			select {
			case <-time.After(5 * time.Millisecond):
			case <-ctx.Done():
				return nil, fmt.Errorf("latency record %d not delivered: %w", i, ctx.Err())
			}
		}
		select {
		case <-time.After(pollInterval / 3):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	d.perKey[latencyKey] = latencyRecords
	slices.Sort(lat)
	how := "polling every " + pollInterval.String()
	if d.efo {
		how = "enhanced fan-out"
	}
	pct := func(p float64) time.Duration {
		return lat[min(int(p*float64(len(lat))), len(lat)-1)].Round(time.Millisecond)
	}
	say("put→invoke latency, %s, %d records one at a time: p50 %s, p95 %s, max %s", how, len(lat), pct(0.5), pct(0.95), lat[len(lat)-1].Round(time.Millisecond))
	if d.efo {
		say("(kinesis-local pushes a subscription's events about once a second; Kinesis pushes them as records arrive, ~70 ms)")
	}
	return got, nil
}

// receivedAt is when the function received the record data, in Unix milliseconds.
func receivedAt(got []example.Delivery, data string) (int64, bool) {
	for _, g := range got {
		if g.Data == data {
			return g.ReceivedAt, true
		}
	}
	return 0, false
}

// progress prints one line: written, delivered, the rate since the last line, and per shard the
// deliveries and esm's iterator age.
func (d *demo) progress() {
	ds, _ := verify.ReadDeliveries(d.out)
	per := map[string]int{}
	for _, dl := range ds {
		per[dl.ShardID]++
	}
	ages := scrapeIteratorAges(d.metricsAddr)
	var parts []string
	for _, id := range slices.Sorted(maps.Keys(per)) {
		part := fmt.Sprintf("%s=%d", strings.TrimPrefix(id, "shardId-0000000000"), per[id])
		if age, ok := ages[id]; ok {
			part += fmt.Sprintf("(age %s)", age)
		}
		parts = append(parts, part)
	}
	now := time.Now()
	rate := float64(len(ds)-d.prev) / now.Sub(d.prevAt).Seconds()
	d.prev, d.prevAt = len(ds), now
	fmt.Printf("    written %4d  delivered %4d  %5.0f rec/s  shards: %s\n", d.written.Load(), len(ds), rate, strings.Join(parts, " "))
}

// report prints the lineage with each shard's deliveries, the on-failure messages and the
// checks, and fails unless every check passed.
func (d *demo) report(ctx context.Context, got []example.Delivery, failures []string) error {
	lineage, err := local.Lineage(ctx, d.kin, stream)
	if err != nil {
		return err
	}
	fmt.Println("\nshard lineage (records delivered; first and last delivery, seconds into the run):")
	per := map[string]int{}
	first, last := map[string]int64{}, map[string]int64{}
	for _, dl := range got {
		per[dl.ShardID]++
		if _, ok := first[dl.ShardID]; !ok {
			first[dl.ShardID] = dl.ReceivedAt
		}
		last[dl.ShardID] = dl.ReceivedAt
	}
	at := func(ms int64) string { return fmt.Sprintf("%5.1f", float64(ms-d.begin.UnixMilli())/1000) }
	for _, id := range slices.Sorted(maps.Keys(lineage)) {
		from := ""
		if ps := lineage[id]; len(ps) > 0 {
			from = " ← " + strings.Join(ps, " + ")
		}
		span := ""
		if per[id] > 0 {
			span = fmt.Sprintf("  [%s s … %s s]", at(first[id]), at(last[id]))
		}
		fmt.Printf("  %s%s: %d%s\n", id, from, per[id], span)
	}
	fmt.Println("\non-failure queue:")
	for _, f := range failures {
		fmt.Printf("  %s\n", f)
	}

	fmt.Println("\nchecks:")
	checks := verify.Deliveries(got, d.perKey, lineage)
	checks = append(checks, checkPoison(failures, got, d.poisonSeq.Load()))
	if err := printChecks(checks, d.begin); err != nil {
		return err
	}
	if !d.efo {
		fmt.Println("(make demo-efo tells the same story through an enhanced fan-out consumer, with its latency)")
	}
	return nil
}

// printChecks prints each check and fails unless every one passed.
func printChecks(checks []verify.Check, begin time.Time) error {
	for _, c := range checks {
		mark := "PASS"
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Printf("  %s  %s: %s\n", mark, c.Name, c.Detail)
	}
	if bad := verify.Failed(checks); bad != "" {
		return fmt.Errorf("checks failed: %s", bad)
	}
	fmt.Printf("\nall checks passed in %s\n", time.Since(begin).Round(time.Second))
	return nil
}

// checkPoison: the poison record was never handled, and exactly one failure message names it
// alone (bisection isolated it from its batch).
func checkPoison(failures []string, got []example.Delivery, seq any) verify.Check {
	for _, d := range got {
		if d.Data == poison {
			return verify.Check{Name: "poison record bisected into the SQS queue", Detail: "the poison record was delivered as handled"}
		}
	}
	want, _ := seq.(string)
	return checkIsolated("poison record bisected into the SQS queue", failures, want)
}

// checkIsolated: failures is one message whose batch (KinesisBatchInfo or DDBStreamBatchInfo)
// is the record seq alone, sent once its retries were exhausted.
func checkIsolated(name string, failures []string, seq string) verify.Check {
	c := verify.Check{Name: name}
	if len(failures) != 1 {
		c.Detail = fmt.Sprintf("%d failure messages, want 1", len(failures))
		return c
	}
	type batchInfo struct {
		Start     string `json:"startSequenceNumber"`
		End       string `json:"endSequenceNumber"`
		BatchSize int    `json:"batchSize"`
	}
	var m struct {
		RequestContext struct {
			Condition              string `json:"condition"`
			ApproximateInvokeCount int    `json:"approximateInvokeCount"`
		} `json:"requestContext"`
		Kinesis *batchInfo `json:"KinesisBatchInfo"`
		DDB     *batchInfo `json:"DDBStreamBatchInfo"`
	}
	if err := json.Unmarshal([]byte(failures[0]), &m); err != nil {
		c.Detail = err.Error()
		return c
	}
	info := m.Kinesis
	if info == nil {
		info = m.DDB
	}
	if info == nil {
		c.Detail = "the message has no batch info"
		return c
	}
	c.OK = info.BatchSize == 1 && info.Start == seq && info.End == seq && m.RequestContext.Condition == "RetryAttemptsExhausted"
	c.Detail = fmt.Sprintf("batchSize %d, %s after %d invocations", info.BatchSize, m.RequestContext.Condition, m.RequestContext.ApproximateInvokeCount)
	return c
}

// scrapeIteratorAges reads esm's IteratorAge gauge (milliseconds) per shard from /metrics.
func scrapeIteratorAges(addr string) map[string]time.Duration {
	ages := map[string]time.Duration{}
	client := http.Client{Timeout: 500 * time.Millisecond}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return ages
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "IteratorAge{") {
			continue
		}
		_, rest, _ := strings.Cut(line, `shard="`)
		shard, rest, _ := strings.Cut(rest, `"`)
		_, val, _ := strings.Cut(rest, "} ")
		if ms, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			ages[shard] = time.Duration(ms * float64(time.Millisecond)).Round(time.Millisecond)
		}
	}
	return ages
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func distinct(ds []example.Delivery) int {
	seen := map[string]bool{}
	for _, d := range ds {
		if d.Data != poison {
			seen[d.Data] = true
		}
	}
	return len(seen)
}
