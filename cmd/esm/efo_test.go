package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/internal/testbed/verify"
)

// Enhanced fan-out end to end, on kinesis-local, with the binary "make build" builds: kinesis-local
// starts its subscriptions without the initial-response message Kinesis sends, and esm decides
// from each stream's first message (source/kinesis/initialresponse.go).

// source is how an end-to-end esm reads its stream: polling (the zero value) or through a consumer.
type source struct {
	args func(t *testing.T, stream string) []string // more "esm run" arguments, after --stream
	// check judges esm's log once every record arrived.
	check func(t *testing.T, stream, output string)
}

func (s source) start(t *testing.T, env []string, args ...string) *esmProc {
	t.Helper()
	return startBin(t, esmBin, env, args...)
}

// consumerSource reads through the consumer named consumer, registered by esm itself; check
// asserts that it was registered and that at least subscribed shards were read through
// subscriptions.
func consumerSource(consumer string, subscribed int) source {
	return source{args: func(*testing.T, string) []string { return []string{"--register-consumer", consumer} },
		check: consumerCheck(consumer, subscribed)}
}

// consumerARNSource registers the consumer itself and gives esm its ARN as the stream, as a
// template's Stream: !GetAtt Consumer.ConsumerARN does.
func consumerARNSource(consumer string, subscribed int) source {
	return source{args: func(t *testing.T, stream string) []string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		reg, err := kin.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{
			StreamARN: aws.String(streamARNOf(t, stream)), ConsumerName: &consumer})
		if err != nil {
			t.Fatalf("register consumer %s: %v", consumer, err)
		}
		testkit.WaitFor(t, "consumer ACTIVE", 30*time.Second, func() bool {
			return describeConsumer(t, stream, consumer).ConsumerStatus == types.ConsumerStatusActive
		})
		return []string{"--stream", aws.ToString(reg.Consumer.ConsumerARN)}
	}, check: consumerCheck(consumer, subscribed)}
}

// consumerCheck asserts that the consumer is registered and named in esm's log, and that at least
// subscribed shards were read through subscriptions.
func consumerCheck(consumer string, subscribed int) func(t *testing.T, stream, out string) {
	return func(t *testing.T, stream, out string) {
		t.Helper()
		c := describeConsumer(t, stream, consumer)
		if c.ConsumerStatus != types.ConsumerStatusActive || !strings.Contains(out, "consumer="+aws.ToString(c.ConsumerARN)) {
			t.Fatalf("consumer %s is %s; esm's log does not name it:\n%s", consumer, c.ConsumerStatus, tail(out, 20))
		}
		n := strings.Count(out, "shard subscribed")
		if n < subscribed {
			t.Fatalf("%d shards subscribed, want at least %d: the records did not come through the consumer\n%s", n, subscribed, tail(out, 30))
		}
		t.Logf("%d shards subscribed, %d subscriptions refused as in use, %d closed shards drained by polling", n,
			strings.Count(out, "shard subscription in use"), strings.Count(out, "reading the rest by polling"))
	}
}

func describeConsumer(t *testing.T, stream, consumer string) *types.ConsumerDescription {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := kin.DescribeStreamConsumer(ctx, &kinesis.DescribeStreamConsumerInput{
		StreamARN: aws.String(streamARNOf(t, stream)), ConsumerName: &consumer})
	if err != nil {
		t.Fatalf("describe consumer %s of %s: %v", consumer, stream, err)
	}
	return out.ConsumerDescription
}

// TestEFOReshardingLosesNothing is TestReshardingLosesNothing through a registered consumer, with
// the esm binary users build: a 4-shard stream split, merged and re-sized under load, read with
// SubscribeToShard (closed shards, which kinesis-local's subscriptions never end, drained with
// GetRecords); once with a consumer esm registers itself, once with a consumer's ARN as the stream,
// killed with SIGKILL and restarted (resubscribing while the killed process' subscriptions may
// still be in use).
func TestEFOReshardingLosesNothing(t *testing.T) {
	t.Run("continuous", func(t *testing.T) {
		testResharding(t, false, consumerSource(fmt.Sprintf("esm-e2e-%d", streamSeq.Add(1)), 8))
	})
	t.Run("consumer-arn-sigkill-restart", func(t *testing.T) {
		testResharding(t, true, consumerARNSource(fmt.Sprintf("esm-e2e-%d", streamSeq.Add(1)), 8))
	})
}

// TestTemplateStreamConsumer: a template whose mapping reads an AWS::Kinesis::StreamConsumer's
// ConsumerARN validates, and runs on kinesis-local: --provision creates the stream and registers
// the consumer, and every record arrives through it.
func TestTemplateStreamConsumer(t *testing.T) {
	const tpl, total, keys = "../../sam/testdata/consumer.yaml", 40, 4
	stream := fmt.Sprintf("e2e-%d-%d", os.Getpid(), streamSeq.Add(1))
	code, out, stderr := runESMOutput(t, "", "validate", "--template", tpl, "--parameter-overrides", "StreamName="+stream)
	if code != 0 || !strings.Contains(out, "stream/"+stream+"/consumer/"+stream+"-esm") {
		t.Fatalf("esm validate: exit code %d\n%s%s", code, out, stderr)
	}
	deliveries := filepath.Join(t.TempDir(), "deliveries.jsonl")
	metricsAddr := freeAddr(t)
	proc := source{}.start(t, []string{"EXAMPLE_OUTPUT=" + deliveries}, "--template", tpl, "--metrics-addr", metricsAddr,
		"--parameter-overrides", "StreamName="+stream, "--provision", "--state-dir", filepath.Join(t.TempDir(), "state"))
	testkit.WaitFor(t, "esm to provision and start", 30*time.Second, func() bool { return strings.Contains(proc.stderr.String(), "mapping started") })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	perKey, err := produce(ctx, stream, keys, total, func(int) {})
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "all records delivered", time.Minute, func() bool { return uniqueCount(readDeliveries(t, deliveries)) >= total })
	// esm status shows each shard read by subscription, with the subscription's figures.
	code, status, stderr := runESMOutput(t, "", "status", "--all", "--metrics-addr", metricsAddr, "--endpoint-url", kinesisEndpoint)
	if code != 0 || strings.Count(status, "read by subscription (age ") != 2 || !strings.Contains(status, "refused in use, last event ") {
		t.Fatalf("esm status --all: exit %d, want both shards read by subscription:\n%s%s", code, status, stderr)
	}
	t.Logf("esm status --all:\n%s", status)
	if code := proc.stop(t); code != 0 {
		t.Fatalf("esm exited %d after SIGTERM, want 0", code)
	}
	got := readDeliveries(t, deliveries)
	lineage, err := local.Lineage(ctx, kin, stream)
	if err != nil {
		t.Fatal(err)
	}
	if bad := verify.Failed(verify.Deliveries(got, perKey, lineage)); bad != "" {
		t.Fatal(bad)
	}
	consumerCheck(stream+"-esm", 2)(t, stream, proc.stderr.String())
}

// streamARNOf is the stream's ARN.
func streamARNOf(t *testing.T, stream string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sum, err := kin.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: &stream})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(sum.StreamDescriptionSummary.StreamARN)
}
