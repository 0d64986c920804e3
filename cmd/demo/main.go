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

	"github.com/kinesis-esm/esm/example"
	"github.com/kinesis-esm/esm/internal/verify"
	"github.com/kinesis-esm/esm/local"
)

func main() {
	esmBin := flag.String("esm", "bin/esm", "path of the esm binary")
	records := flag.Int("records", 1200, "records to write")
	keys := flag.Int("keys", 40, "partition keys")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *esmBin, *records, *keys); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func say(format string, a ...any) { fmt.Printf("==> "+format+"\n", a...) }

const (
	stream = "demo-stream"
	queue  = "demo-failures"
	poison = "poison"
)

// demoTemplate is the SAM template the demo's esm reads: the example function with a Kinesis
// event that bisects failing batches, retries twice and sends what fails to an SQS queue.
const demoTemplate = `AWSTemplateFormatVersion: '2010-09-09'
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
          Type: Kinesis
          Properties:
            Stream: arn:aws:kinesis:us-east-1:000000000000:stream/` + stream + `
            StartingPosition: TRIM_HORIZON
            BatchSize: 10
            BisectBatchOnFunctionError: true
            MaximumRetryAttempts: 2
            DestinationConfig:
              OnFailure:
                Type: SQS
                Destination: arn:aws:sqs:us-east-1:000000000000:` + queue + `
`

func run(ctx context.Context, esmBin string, total, keys int) error {
	begin := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	work, err := os.MkdirTemp("", "esm-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

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
	cfg, err := local.AWSConfig(ctx, "us-east-1")
	if err != nil {
		return err
	}
	kin := local.NewKinesisClient(cfg, emu.Endpoint())
	sqsC := local.NewSQSClient(cfg, sqsSrv.Endpoint())
	if _, err := local.CreateStream(ctx, kin, stream, 2); err != nil {
		return err
	}
	queueURL, _, err := local.CreateQueue(ctx, sqsC, queue)
	if err != nil {
		return err
	}
	say("created stream %s (2 shards) and on-failure queue %s", stream, queue)

	tmpl := filepath.Join(work, "template.yaml")
	if err := os.WriteFile(tmpl, []byte(demoTemplate), 0o644); err != nil {
		return err
	}
	metricsAddr, err := freeAddr()
	if err != nil {
		return err
	}
	out := filepath.Join(work, "deliveries.jsonl")
	logPath := filepath.Join(work, "esm.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	esm := exec.Command(esmBin, "run", "--invoke", "example", "--template", tmpl, "--sqs-protocol", "query", "--poll-interval", "250ms",
		"--state-dir", filepath.Join(work, "state"), "--metrics-addr", metricsAddr)
	esm.Env = append(os.Environ(),
		"AWS_ENDPOINT_URL_KINESIS="+emu.Endpoint(), "AWS_ENDPOINT_URL_SQS="+sqsSrv.Endpoint(),
		"AWS_ACCESS_KEY_ID=AKIDLOCAL", "AWS_SECRET_ACCESS_KEY=local", "AWS_REGION=us-east-1",
		"EXAMPLE_OUTPUT="+out, "EXAMPLE_DELAY=15ms", "EXAMPLE_FAIL=error", "EXAMPLE_FAIL_MATCH="+poison)
	esm.Stdout, esm.Stderr = logFile, logFile
	if err := esm.Start(); err != nil {
		return fmt.Errorf("start %s (make demo builds it): %w", esmBin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- esm.Wait() }()
	defer func() {
		if esm.ProcessState == nil {
			_ = esm.Process.Kill()
			<-exited
		}
	}()
	say("esm running (pid %d): example handler in-process, BisectBatchOnFunctionError, MaximumRetryAttempts 2, SQS on-failure queue", esm.Process.Pid)
	say("esm log: %s; metrics: http://%s/metrics", logPath, metricsAddr)

	var written atomic.Int64
	prodDone := make(chan error, 1)
	perKey := map[string]int{}
	var poisonSeq atomic.Value
	go func() {
		counters := make([]int, keys)
		for n := 0; n < total; {
			var batch []local.Record
			for len(batch) < 20 && n+len(batch) < total {
				k := (n + len(batch)) % keys
				batch = append(batch, local.Record{PartitionKey: fmt.Sprintf("key-%02d", k), Data: fmt.Appendf(nil, "key-%02d:%d", k, counters[k])})
				counters[k]++
			}
			normal := len(batch)
			if n <= total/2 && total/2 < n+normal { // one poison record, mid-run, under its own key
				batch = append(batch, local.Record{PartitionKey: "poison-key", Data: []byte(poison)})
			}
			res, err := local.PutRecords(ctx, kin, stream, batch)
			if err != nil {
				prodDone <- err
				return
			}
			for i, r := range batch {
				if string(r.Data) == poison {
					poisonSeq.Store(aws.ToString(res[i].SequenceNumber))
				}
			}
			n += normal
			written.Store(int64(n))
			select { // a steady producer: about 200 records/s
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
				prodDone <- ctx.Err()
				return
			}
		}
		for k, c := range counters {
			perKey[fmt.Sprintf("key-%02d", k)] = c
		}
		prodDone <- nil
	}()
	say("producer writing %d records over %d partition keys, plus one poison record", total, keys)

	prev, prevAt := 0, time.Now()
	progress := func() []example.Delivery {
		ds, _ := verify.ReadDeliveries(out)
		per := map[string]int{}
		for _, d := range ds {
			per[d.ShardID]++
		}
		ages := scrapeIteratorAges(metricsAddr)
		var parts []string
		for _, id := range slices.Sorted(mapKeys(per)) {
			part := fmt.Sprintf("%s=%d", strings.TrimPrefix(id, "shardId-0000000000"), per[id])
			if age, ok := ages[id]; ok {
				part += fmt.Sprintf("(age %s)", age)
			}
			parts = append(parts, part)
		}
		now := time.Now()
		rate := float64(len(ds)-prev) / now.Sub(prevAt).Seconds()
		prev, prevAt = len(ds), now
		fmt.Printf("    written %4d  delivered %4d  %5.0f rec/s  shards: %s\n", written.Load(), len(ds), rate, strings.Join(parts, " "))
		return ds
	}
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	split, merged, prodFinished := false, false, false
	for !prodFinished {
		select {
		case err := <-prodDone:
			if err != nil {
				return fmt.Errorf("producer: %w", err)
			}
			prodFinished = true
		case <-ticker.C:
			progress()
		case err := <-exited:
			tail, _ := os.ReadFile(logPath)
			return fmt.Errorf("esm exited early (%v); its log:\n%s", err, tail)
		case <-ctx.Done():
			return ctx.Err()
		}
		switch n := written.Load(); {
		case !split && n >= int64(total/3):
			open, err := local.OpenShards(ctx, kin, stream)
			if err != nil {
				return err
			}
			id := aws.ToString(open[0].ShardId)
			if err := local.SplitInHalf(ctx, kin, stream, id); err != nil {
				return err
			}
			say("split %s in two while records flow: its children wait until it is drained", id)
			split = true
		case split && !merged && n >= int64(2*total/3):
			a, b, err := local.MergeFirstAdjacent(ctx, kin, stream)
			if err != nil {
				return err
			}
			say("merged %s and %s: their child waits for both", a, b)
			merged = true
		}
	}
	say("producer done; waiting for esm to deliver everything and report the poison record")
	var got []example.Delivery
	var failures []string
	for {
		if got, err = verify.ReadDeliveries(out); err != nil {
			return err
		}
		if distinct(got) >= total && len(failures) > 0 {
			break
		}
		if len(failures) == 0 {
			if failures, err = local.ReceiveAll(ctx, sqsC, queueURL); err != nil {
				return err
			}
		}
		select {
		case <-ticker.C:
			progress()
		case <-ctx.Done():
			return fmt.Errorf("only %d of %d records delivered (%d failure messages) before the time limit", distinct(got), total, len(failures))
		}
	}
	progress()
	_ = esm.Process.Signal(syscall.SIGTERM)
	if err := <-exited; err != nil {
		return fmt.Errorf("esm did not stop cleanly: %w", err)
	}
	say("esm stopped on SIGTERM (exit 0)")

	lineage, err := local.Lineage(ctx, kin, stream)
	if err != nil {
		return err
	}
	fmt.Println("\nshard lineage (records delivered; first and last delivery, seconds into the run):")
	per := map[string]int{}
	first, last := map[string]int64{}, map[string]int64{}
	for _, d := range got {
		per[d.ShardID]++
		if _, ok := first[d.ShardID]; !ok {
			first[d.ShardID] = d.ReceivedAt
		}
		last[d.ShardID] = d.ReceivedAt
	}
	at := func(ms int64) string { return fmt.Sprintf("%5.1f", float64(ms-begin.UnixMilli())/1000) }
	for _, id := range slices.Sorted(mapKeys(lineage)) {
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
	checks := verify.Deliveries(got, perKey, lineage)
	checks = append(checks, checkPoison(failures, got, poisonSeq.Load()))
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
	c := verify.Check{Name: "poison record bisected into the SQS queue"}
	for _, d := range got {
		if d.Data == poison {
			c.Detail = "the poison record was delivered as handled"
			return c
		}
	}
	if len(failures) != 1 {
		c.Detail = fmt.Sprintf("%d failure messages, want 1", len(failures))
		return c
	}
	var m struct {
		RequestContext struct {
			Condition              string `json:"condition"`
			ApproximateInvokeCount int    `json:"approximateInvokeCount"`
		} `json:"requestContext"`
		Info struct {
			Start     string `json:"startSequenceNumber"`
			End       string `json:"endSequenceNumber"`
			BatchSize int    `json:"batchSize"`
		} `json:"KinesisBatchInfo"`
	}
	if err := json.Unmarshal([]byte(failures[0]), &m); err != nil {
		c.Detail = err.Error()
		return c
	}
	want, _ := seq.(string)
	c.OK = m.Info.BatchSize == 1 && m.Info.Start == want && m.Info.End == want && m.RequestContext.Condition == "RetryAttemptsExhausted"
	c.Detail = fmt.Sprintf("batchSize %d, %s after %d invocations", m.Info.BatchSize, m.RequestContext.Condition, m.RequestContext.ApproximateInvokeCount)
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

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
