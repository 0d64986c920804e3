package esmapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/kinesis-esm/esm/esmapi"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/runner"
)

// TestRewindRouteAnswers: the rewind route hands the request to the engine's RewindFunc and
// answers what it says, past the server's write timeout (a rewind waits for the fleet to stop):
// a refusal is 409, the request's fault 400 InvalidParameterValueException with the check's
// text; a server without rewinds refuses with 409 and says why.
func TestRewindRouteAnswers(t *testing.T) {
	ctx := context.Background()
	_, arn := newStream(t)
	answer := make(chan error, 1)
	var asked poller.RewindRequest
	rewind := func(_ context.Context, _, streamARN string, q poller.RewindRequest, _ string) (runner.RewindOutcome, error) {
		asked = q
		time.Sleep(600 * time.Millisecond) // longer than the write timeout below: a fleet slow to stop
		if streamARN != arn {
			return runner.RewindOutcome{}, fmt.Errorf("stream %s", streamARN)
		}
		return runner.RewindOutcome{}, <-answer
	}
	dir := t.TempDir()
	s := startOpen(t, esmapi.FileCatalog{Dir: dir}, esmapi.ProgressFuncs{
		StoreFunc:  func(context.Context, string) (poller.Store, error) { return poller.NewMemoryStore(), nil },
		DeleteFunc: func(context.Context, string) error { return nil },
	}, esmapi.WithFunctions(esmapi.Function{Name: "f", Invoker: inprocess.New((&recorder{}).handle)}), esmapi.WithRewinds(rewind))
	out, err := s.client.CreateEventSourceMapping(ctx, &lambda.CreateEventSourceMappingInput{
		FunctionName: aws.String("f"), EventSourceArn: aws.String(arn), StartingPosition: types.EventSourcePositionTrimHorizon, Enabled: aws.Bool(false),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(s.m.Handler())
	srv.Config.WriteTimeout = 200 * time.Millisecond
	srv.Start()
	defer srv.Close()
	url := srv.URL + esmapi.RewindPath(aws.ToString(out.UUID))
	from := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	body := `{"From":"` + from.Format(time.RFC3339) + `","Until":"` + from.Add(time.Minute).Format(time.RFC3339) + `"}`

	answer <- fmt.Errorf("%w: workers w1 still running after 2m0s", lease.ErrRewindRefused)
	if status, errType, got := postSkip(t, url, "application/json", body); status != http.StatusConflict || errType != esmapi.ResourceConflict || !strings.Contains(got, "still running") {
		t.Fatalf("refused rewind: %d %s %s", status, errType, got)
	}
	if !asked.Timestamp.Equal(from) || !asked.Until.Equal(from.Add(time.Minute)) {
		t.Fatalf("the engine was asked %+v", asked)
	}
	answer <- &poller.ValidationError{Field: "Until", Message: "window end is not after its start"}
	if status, errType, got := postSkip(t, url, "application/json", body); status != http.StatusBadRequest || errType != esmapi.InvalidParameterValue || !strings.Contains(got, `"window end is not after its start"`) {
		t.Fatalf("bad rewind: %d %s %s", status, errType, got)
	}

	plain := startServer(t, t.TempDir(), map[string]*recorder{"f": {}})
	out, err = plain.client.CreateEventSourceMapping(ctx, &lambda.CreateEventSourceMappingInput{
		FunctionName: aws.String("f"), EventSourceArn: aws.String(arn), StartingPosition: types.EventSourcePositionTrimHorizon, Enabled: aws.Bool(false),
	})
	if err != nil {
		t.Fatal(err)
	}
	if status, errType, got := postSkip(t, plain.http.URL+esmapi.RewindPath(aws.ToString(out.UUID)), "application/json", body); status != http.StatusConflict || errType != esmapi.ResourceConflict || !strings.Contains(got, "not running here") {
		t.Fatalf("rewind of a disabled mapping without lease tables: %d %s %s", status, errType, got)
	}
}

// TestRewindRouteOnAStateDir: without lease tables (the state directory) a running mapping
// applies a rewind asked through the route itself, as esm run on a state directory does: bad
// input is 400 with esm rewind's text and the mapping goes on; a valid rewind stops its poller,
// is written into the mapping's progress, and the records from its time are invoked again.
func TestRewindRouteOnAStateDir(t *testing.T) {
	ctx := context.Background()
	name, arn := newStream(t)
	rec := &recorder{}
	s := startServer(t, t.TempDir(), map[string]*recorder{"f": rec})
	out, err := s.client.CreateEventSourceMapping(ctx, &lambda.CreateEventSourceMappingInput{
		FunctionName: aws.String("f"), EventSourceArn: aws.String(arn), StartingPosition: types.EventSourcePositionTrimHorizon,
	})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.UUID)
	s.waitState(t, id, esmapi.StateEnabled)
	before := time.Now().Add(-time.Second).UTC()
	put(t, name, "r1", "r2", "r3")
	testkit.WaitFor(t, "the records invoked", 30*time.Second, rec.has("r1", "r2", "r3"))
	url := s.http.URL + esmapi.RewindPath(id)
	bad := `{"ToTimestamp":"` + before.Format(time.RFC3339Nano) + `","Shards":["shardId-000000000042"]}`
	if status, errType, got := postSkip(t, url, "application/json", bad); status != http.StatusBadRequest || errType != esmapi.InvalidParameterValue ||
		!strings.Contains(got, "shard shardId-000000000042 is not a shard of the stream") {
		t.Fatalf("rewind of an unknown shard: %d %s %s", status, errType, got)
	}
	status, errType, got := postSkip(t, url, "application/json", `{"ToTimestamp":"`+before.Format(time.RFC3339Nano)+`"}`)
	if status != http.StatusOK || !strings.Contains(got, `"Revision":1`) || !strings.Contains(got, `"Rewound":["shardId-000000000000"]`) {
		t.Fatalf("rewind: %d %s %s", status, errType, got)
	}
	testkit.WaitFor(t, "the records invoked again", 30*time.Second, func() bool { return len(rec.records()) >= 6 })
	if got, want := rec.records(), []string{"r1", "r2", "r3", "r1", "r2", "r3"}; !slices.Equal(got, want) {
		t.Fatalf("invoked %v, want %v", got, want)
	}
}
