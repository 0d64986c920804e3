// Command demo shows esm end to end on a local Kinesis emulator: a 2-shard stream, a producer
// writing over many partition keys, the example function run by the esm binary, a split and a
// merge while records flow, and a check that every record arrived, in order per key, with parent
// shards drained before their children. It exits 0 when every check passes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/kinesis-esm/esm/example"
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

func run(ctx context.Context, esmBin string, total, keys int) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	work, err := os.MkdirTemp("", "esm-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	say("starting kinesis-local on 127.0.0.1")
	emu, err := local.StartKinesis(ctx, local.KinesisOptions{})
	if err != nil {
		return err
	}
	defer emu.Stop()
	cfg, err := local.AWSConfig(ctx, "us-east-1")
	if err != nil {
		return err
	}
	kin := local.NewKinesisClient(cfg, emu.Endpoint())
	const stream = "demo-stream"
	if _, err := local.CreateStream(ctx, kin, stream, 2); err != nil {
		return err
	}
	say("created stream %s with 2 shards at %s", stream, emu.Endpoint())

	out := filepath.Join(work, "deliveries.jsonl")
	logPath := filepath.Join(work, "esm.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	esm := exec.Command(esmBin, "run", "--stream", stream, "--endpoint-url", emu.Endpoint(),
		"--state-dir", filepath.Join(work, "state"), "--batch-size", "10", "--poll-interval", "250ms")
	esm.Env = append(os.Environ(), "EXAMPLE_OUTPUT="+out, "EXAMPLE_DELAY=15ms")
	esm.Stdout, esm.Stderr = logFile, logFile
	if err := esm.Start(); err != nil {
		return fmt.Errorf("start %s (run make demo, which builds it): %w", esmBin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- esm.Wait() }()
	defer func() {
		if esm.ProcessState == nil {
			_ = esm.Process.Kill()
			<-exited
		}
	}()
	say("esm running (pid %d), example handler in-process; its log: %s", esm.Process.Pid, logPath)

	var written atomic.Int64
	prodDone := make(chan error, 1)
	perKey := map[string]int{}
	go func() {
		counters := make([]int, keys)
		for n := 0; n < total; {
			var batch []local.Record
			for len(batch) < 20 && n+len(batch) < total {
				k := (n + len(batch)) % keys
				batch = append(batch, local.Record{PartitionKey: fmt.Sprintf("key-%02d", k), Data: fmt.Appendf(nil, "key-%02d:%d", k, counters[k])})
				counters[k]++
			}
			if _, err := local.PutRecords(ctx, kin, stream, batch); err != nil {
				prodDone <- err
				return
			}
			n += len(batch)
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
	say("producer writing %d records over %d partition keys", total, keys)

	progress := func() {
		ds, _ := local.ReadDeliveries(out)
		per := map[string]int{}
		for _, d := range ds {
			per[d.ShardID]++
		}
		var parts []string
		for _, id := range slices.Sorted(mapKeys(per)) {
			parts = append(parts, fmt.Sprintf("%s=%d", strings.TrimPrefix(id, "shardId-"), per[id]))
		}
		fmt.Printf("    written %4d  delivered %4d  by shard: %s\n", written.Load(), len(ds), strings.Join(parts, " "))
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
			return fmt.Errorf("esm exited early (%v); see %s", err, logPath)
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
			say("split %s in two while records flow", id)
			split = true
		case split && !merged && n >= int64(2*total/3):
			a, b, err := local.MergeFirstAdjacent(ctx, kin, stream)
			if err != nil {
				return err
			}
			say("merged %s and %s while records flow", a, b)
			merged = true
		}
	}
	say("producer done; waiting for esm to deliver everything")
	var got []example.Delivery
	for {
		got, err = local.ReadDeliveries(out)
		if err != nil {
			return err
		}
		if distinct(got) >= total {
			break
		}
		select {
		case <-ticker.C:
			progress()
		case <-ctx.Done():
			return fmt.Errorf("only %d of %d records delivered before the time limit", distinct(got), total)
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
	fmt.Println("\nshard lineage (records delivered):")
	per := map[string]int{}
	for _, d := range got {
		per[d.ShardID]++
	}
	for _, id := range slices.Sorted(mapKeys(lineage)) {
		from := ""
		if ps := lineage[id]; len(ps) > 0 {
			from = " ← " + strings.Join(ps, " + ")
		}
		fmt.Printf("  %s%s: %d\n", id, from, per[id])
	}
	fmt.Println("\nchecks:")
	checks := local.VerifyDeliveries(got, perKey, lineage)
	for _, c := range checks {
		mark := "PASS"
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Printf("  %s  %s: %s\n", mark, c.Name, c.Detail)
	}
	if bad := local.FailedChecks(checks); bad != "" {
		return fmt.Errorf("checks failed: %s", bad)
	}
	fmt.Println("\nall checks passed")
	return nil
}

func distinct(ds []example.Delivery) int {
	seen := map[string]bool{}
	for _, d := range ds {
		seen[d.Data] = true
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
