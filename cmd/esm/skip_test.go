package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/kinesis-esm/esm/esmapi"
	"github.com/kinesis-esm/esm/example"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/metrics/live"
)

// TestSkipBlockedShard: a poison record blocks its shard for ever (MaximumRetryAttempts -1);
// esm skip, naming the batch the live page shows, puts it on the on-failure queue (goaws) in
// Lambda's message shape with condition OperatorSkipped; the shard moves on within a poll
// interval (the next record is invoked); the live page, state.json and the metrics show the
// skip. Bad input and a second skip are refused with exit 2 and what to fix.
func TestSkipBlockedShard(t *testing.T) {
	srv, sqsC := goaws(t)
	stream := newStream(t, 1)
	ctx := context.Background()
	url, arn, err := local.CreateQueue(ctx, sqsC, "skipped-"+stream)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tmpl := writeTemplate(t, dir, stream, "BatchSize: 1", "MaximumRetryAttempts: -1",
		"DestinationConfig:\n  OnFailure:\n    Type: SQS\n    Destination: "+arn)
	seqs := putSequenced(t, stream, "poison", "next")
	addr := freeAddr(t)
	out := filepath.Join(dir, "out.jsonl")
	env := append(endpoints(srv.Endpoint(), ""), "EXAMPLE_OUTPUT="+out, "EXAMPLE_FAIL=error", "EXAMPLE_FAIL_MATCH=poison")
	const pollInterval = time.Second
	proc := spawnESM(t, append([]string{"ESM_INVOKE=example"}, env...), "run", "--template", tmpl, "--state-dir", filepath.Join(dir, "state"),
		"--metrics-addr", addr, "--poll-interval", pollInterval.String(), "--sqs-protocol", "query", "--blocked-after", "1s")
	shard := "shardId-000000000000"
	var blocked live.ShardView
	testkit.WaitFor(t, "the shard blocked on the poison record", 60*time.Second, func() bool {
		var st live.State
		if getJSON(addr, live.PathState, &st) != nil || len(st.Mappings) != 1 {
			return false
		}
		for _, s := range st.Mappings[0].Shards {
			if s.ShardID == shard && s.State == live.StateBlocked && s.RetryingFirst != "" {
				blocked = s
				return true
			}
		}
		return false
	})
	if blocked.RetryingFirst != seqs[0] || blocked.RetryingLast != seqs[0] {
		t.Fatalf("the live page shows batch %s..%s retried, want the poison record %s", blocked.RetryingFirst, blocked.RetryingLast, seqs[0])
	}

	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--shard", "shardId-000000000009"}, "the stream has no shard shardId-000000000009"},
		{[]string{"--shard", shard, "--first", seqs[1]}, "is not retrying batch " + seqs[1]},
		{[]string{"--shard", shard, "--first", "12ab"}, "is not a sequence number"},
		{[]string{"--shard", "shard 0"}, "is not a shard id"},
		{[]string{"--shard", shard}, "say where the mapping runs"},
	} {
		args := append([]string{"skip"}, bad.args...)
		if bad.want != "say where the mapping runs" {
			args = append(args, "--metrics-addr", addr)
		}
		code, stdout, stderr := runESMEnv(t, nil, "", args...)
		if code != 2 || !strings.Contains(stderr, bad.want) {
			t.Fatalf("esm %s: exit %d, want 2 and %q\n%s%s", strings.Join(args, " "), code, bad.want, stdout, stderr)
		}
	}
	if v, _ := queueCounts(t, sqsC, url); v != "0" {
		t.Fatalf("a refused skip put %s messages on the queue", v)
	}

	code, stdout, stderr := runESMEnv(t, nil, "", "skip", "--metrics-addr", addr, "--shard", shard, "--first", blocked.RetryingFirst, "--last", blocked.RetryingLast)
	skipped := time.Now()
	if code != 0 || !strings.Contains(stdout, "skipped shard "+shard+" batch "+seqs[0]+".."+seqs[0]+" (1 records") || !strings.Contains(stdout, "sent to the on-failure destination "+arn) {
		t.Fatalf("esm skip: exit %d\n%s%s", code, stdout, stderr)
	}
	testkit.WaitFor(t, "the next record invoked", 10*time.Second, func() bool {
		return slices.ContainsFunc(readDeliveries(t, out), func(d example.Delivery) bool { return d.Data == "next" })
	})
	took := time.Since(skipped)
	t.Logf("the next record invoked %v after esm skip returned", took)
	if took > pollInterval {
		t.Errorf("the next record was invoked %v after the skip; want within the poll interval %v", took, pollInterval)
	}
	checkSkippedMessage(t, sqsC, url, shard, seqs[0])

	page := get(t, addr, live.PathPage)
	if !strings.Contains(page, `data-skipped-first="`+seqs[0]+`"`) || !strings.Contains(page, "Skipped by an operator: 1 batches.") {
		t.Fatalf("the live page does not show the skip:\n%s", page)
	}
	if m := scrape(t, addr); m["esm_batches_skipped_total"] != 1 || m["esm_records_skipped_total"] != 1 {
		t.Fatalf("esm_batches_skipped_total %v, esm_records_skipped_total %v; want 1 and 1", m["esm_batches_skipped_total"], m["esm_records_skipped_total"])
	}
	if !strings.Contains(proc.stderr.String(), "batch skipped by an operator") {
		t.Fatalf("no log line of the skip")
	}
	code, _, stderr = runESMEnv(t, nil, "", "skip", "--metrics-addr", addr, "--shard", shard)
	if code != 2 || !strings.Contains(stderr, "is not retrying a batch") {
		t.Fatalf("a second skip: exit %d, want 2 and that the shard is not blocked\n%s", code, stderr)
	}
	if code := proc.stop(t); code != 0 {
		t.Fatalf("esm run exit code %d", code)
	}
}

// checkSkippedMessage checks that the queue holds one message, Lambda's on-failure message for
// the skipped record with condition OperatorSkipped.
func checkSkippedMessage(t *testing.T, sqsC *sqs.Client, url, shard, seq string) {
	t.Helper()
	bodies, err := local.ReceiveAll(context.Background(), sqsC, url)
	if err != nil || len(bodies) != 1 {
		t.Fatalf("queue: %d messages (%v), want the skipped batch's one", len(bodies), err)
	}
	var m struct {
		RequestContext struct {
			RequestID              string `json:"requestId"`
			FunctionArn            string `json:"functionArn"`
			Condition              string `json:"condition"`
			ApproximateInvokeCount int    `json:"approximateInvokeCount"`
		} `json:"requestContext"`
		ResponseContext *struct {
			StatusCode    int     `json:"statusCode"`
			FunctionError *string `json:"functionError"`
		} `json:"responseContext"`
		Version          string `json:"version"`
		Timestamp        string `json:"timestamp"`
		KinesisBatchInfo struct {
			ShardID             string `json:"shardId"`
			StartSequenceNumber string `json:"startSequenceNumber"`
			EndSequenceNumber   string `json:"endSequenceNumber"`
			BatchSize           int    `json:"batchSize"`
			StreamArn           string `json:"streamArn"`
		} `json:"KinesisBatchInfo"`
	}
	if err := json.Unmarshal([]byte(bodies[0]), &m); err != nil {
		t.Fatal(err)
	}
	rc, bi := m.RequestContext, m.KinesisBatchInfo
	if rc.Condition != "OperatorSkipped" || rc.RequestID == "" || !strings.HasPrefix(rc.FunctionArn, "arn:aws:lambda:") || rc.ApproximateInvokeCount < 2 ||
		m.Version != "1.0" || m.Timestamp == "" || bi.ShardID != shard || bi.StartSequenceNumber != seq || bi.EndSequenceNumber != seq || bi.BatchSize != 1 ||
		!strings.HasPrefix(bi.StreamArn, "arn:aws:kinesis:") {
		t.Fatalf("message %s", bodies[0])
	}
	if m.ResponseContext == nil || m.ResponseContext.StatusCode != http.StatusOK || m.ResponseContext.FunctionError == nil || *m.ResponseContext.FunctionError != "Unhandled" {
		t.Fatalf("responseContext of %s: want the last invocation's (200, Unhandled)", bodies[0])
	}
}

// TestSkipViaSignedAPI: esm skip --api-url signs its request with the environment's AWS
// credentials as esm serve's API requires (SigV4, service lambda): accepted with the right
// secret and answered; refused with a wrong one (exit 2, the API's message).
func TestSkipViaSignedAPI(t *testing.T) {
	const id = "5b6e7e32-3c39-4cd7-9a1e-0d4c7f3c2b11"
	var got esmapi.SkipInput
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != esmapi.SkipPath(id) || json.NewDecoder(r.Body).Decode(&got) != nil {
			http.Error(w, "unexpected request "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(esmapi.SkipOutput{ShardId: got.ShardId, FirstSequenceNumber: "7", LastSequenceNumber: "9", Records: 3, FailedAttempts: 4, SkippedAt: "2026-12-07T20:00:00.000Z"})
	})
	srv := httptest.NewServer(esmapi.RequireSigV4(h, esmapi.Credentials{AccessKeyID: "AKIDSKIP", SecretAccessKey: "skip-secret"}, "us-east-1", time.Now))
	defer srv.Close()
	args := []string{"skip", "--api-url", srv.URL, "--uuid", id, "--shard", "shardId-000000000002", "--region", "us-east-1"}
	code, stdout, stderr := runESMEnv(t, []string{"AWS_ACCESS_KEY_ID=AKIDSKIP", "AWS_SECRET_ACCESS_KEY=skip-secret"}, "", args...)
	if code != 0 || got.ShardId != "shardId-000000000002" || !strings.Contains(stdout, "skipped shard shardId-000000000002 batch 7..9 (3 records, 4 failed attempts): dropped") {
		t.Fatalf("signed skip: exit %d, request %+v\n%s%s", code, got, stdout, stderr)
	}
	code, _, stderr = runESMEnv(t, []string{"AWS_ACCESS_KEY_ID=AKIDSKIP", "AWS_SECRET_ACCESS_KEY=wrong"}, "", args...)
	if code != 2 || !strings.Contains(stderr, "skip refused by "+srv.URL) || !strings.Contains(stderr, "InvalidSignatureException") {
		t.Fatalf("a wrong secret: exit %d, want 2 and the API's refusal\n%s", code, stderr)
	}
}
