package esmapi_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

func status(md middleware.Metadata) int {
	if r, ok := awsmiddleware.GetRawResponse(md).(*smithyhttp.Response); ok {
		return r.StatusCode
	}
	return 0
}

// TestSDKMappingLifecycle drives one mapping through its life with aws-sdk-go-v2's Lambda client:
// create, get, list (paged and filtered), update BatchSize, disable (nothing delivered), enable
// (delivery resumes at the checkpoint), delete.
func TestSDKMappingLifecycle(t *testing.T) {
	ctx := context.Background()
	name, arn := newStream(t)
	fn, witness := &recorder{}, &recorder{}
	s := startServer(t, t.TempDir(), map[string]*recorder{"fn": fn, "witness": witness})

	// Create: 202, Creating, every default as AWS returns it.
	out, err := s.client.CreateEventSourceMapping(ctx, &lambda.CreateEventSourceMappingInput{
		FunctionName: aws.String("fn"), EventSourceArn: aws.String(arn), StartingPosition: types.EventSourcePositionTrimHorizon,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := status(out.ResultMetadata); got != 202 {
		t.Errorf("create status %d, want 202", got)
	}
	id := aws.ToString(out.UUID)
	if aws.ToString(out.State) != "Creating" || aws.ToInt32(out.BatchSize) != 100 || aws.ToInt32(out.MaximumRetryAttempts) != -1 ||
		aws.ToInt32(out.MaximumRecordAgeInSeconds) != -1 || aws.ToInt32(out.ParallelizationFactor) != 1 ||
		out.DestinationConfig == nil || out.DestinationConfig.OnFailure == nil || out.FunctionResponseTypes == nil ||
		aws.ToString(out.LastProcessingResult) != "No records processed" || aws.ToString(out.StateTransitionReason) != "User action" ||
		aws.ToString(out.FunctionArn) != "arn:aws:lambda:us-east-1:000000000000:function:fn" ||
		aws.ToString(out.EventSourceMappingArn) != "arn:aws:lambda:us-east-1:000000000000:event-source-mapping:"+id {
		t.Fatalf("create response: %s", mustJSON(out))
	}

	// Get: 200; Enabled once it polls; OK after the first batch.
	s.waitState(t, id, "Enabled")
	put(t, name, uniq("a", 5)...)
	testkit.WaitFor(t, "first records", 20*time.Second, fn.has(uniq("a", 5)...))
	testkit.WaitFor(t, "LastProcessingResult OK", 5*time.Second, func() bool {
		g, err := s.client.GetEventSourceMapping(ctx, &lambda.GetEventSourceMappingInput{UUID: aws.String(id)})
		if err != nil {
			t.Fatal(err)
		}
		if status(g.ResultMetadata) != 200 {
			t.Fatalf("get status %d, want 200", status(g.ResultMetadata))
		}
		return aws.ToString(g.LastProcessingResult) == "OK"
	})

	// A second mapping (the witness) on the same stream, and a third on another stream, to page.
	w, err := s.client.CreateEventSourceMapping(ctx, &lambda.CreateEventSourceMappingInput{
		FunctionName: aws.String("witness"), EventSourceArn: aws.String(arn), StartingPosition: types.EventSourcePositionTrimHorizon,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, arn2 := newStream(t)
	third, err := s.client.CreateEventSourceMapping(ctx, &lambda.CreateEventSourceMappingInput{
		FunctionName: aws.String("fn"), EventSourceArn: aws.String(arn2), StartingPosition: types.EventSourcePositionLatest, Enabled: aws.Bool(false),
	})
	if err != nil {
		t.Fatal(err)
	}
	s.waitState(t, aws.ToString(w.UUID), "Enabled")
	s.waitState(t, aws.ToString(third.UUID), "Disabled")

	// List, one a page: all three, in creation order, then no marker.
	var listed []string
	in := &lambda.ListEventSourceMappingsInput{MaxItems: aws.Int32(1)}
	for page := 0; ; page++ {
		l, err := s.client.ListEventSourceMappings(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if status(l.ResultMetadata) != 200 || len(l.EventSourceMappings) != 1 {
			t.Fatalf("page %d: status %d, %d mappings", page, status(l.ResultMetadata), len(l.EventSourceMappings))
		}
		listed = append(listed, aws.ToString(l.EventSourceMappings[0].UUID))
		if l.NextMarker == nil {
			break
		}
		in.Marker = l.NextMarker
	}
	if want := []string{id, aws.ToString(w.UUID), aws.ToString(third.UUID)}; !slices.Equal(listed, want) {
		t.Fatalf("paged list %v, want %v", listed, want)
	}
	// The SDK's paginator walks the same pages.
	pages := lambda.NewListEventSourceMappingsPaginator(s.client, &lambda.ListEventSourceMappingsInput{MaxItems: aws.Int32(2)})
	n := 0
	for pages.HasMorePages() {
		p, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n += len(p.EventSourceMappings)
	}
	if n != 3 {
		t.Fatalf("paginator saw %d mappings, want 3", n)
	}
	for _, c := range []struct {
		in   lambda.ListEventSourceMappingsInput
		want []string
	}{
		{lambda.ListEventSourceMappingsInput{EventSourceArn: aws.String(arn)}, []string{id, aws.ToString(w.UUID)}},
		{lambda.ListEventSourceMappingsInput{FunctionName: aws.String("fn")}, []string{id, aws.ToString(third.UUID)}},
		{lambda.ListEventSourceMappingsInput{FunctionName: aws.String("arn:aws:lambda:us-east-1:000000000000:function:fn"), EventSourceArn: aws.String(arn2)}, []string{aws.ToString(third.UUID)}},
	} {
		l, err := s.client.ListEventSourceMappings(ctx, &c.in)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range l.EventSourceMappings {
			got = append(got, aws.ToString(m.UUID))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("list %s: %v, want %v", mustJSON(c.in), got, c.want)
		}
	}

	// Update BatchSize: 202 Updating, then Enabled; later batches hold at most 2 records.
	u, err := s.client.UpdateEventSourceMapping(ctx, &lambda.UpdateEventSourceMappingInput{UUID: aws.String(id), BatchSize: aws.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	if status(u.ResultMetadata) != 202 || aws.ToString(u.State) != "Updating" || aws.ToInt32(u.BatchSize) != 2 {
		t.Fatalf("update: status %d %s", status(u.ResultMetadata), mustJSON(u))
	}
	s.waitState(t, id, "Enabled")
	before := len(fn.batchSizes())
	put(t, name, uniq("b", 6)...)
	testkit.WaitFor(t, "records after the update", 20*time.Second, fn.has(uniq("b", 6)...))
	after := fn.batchSizes()[before:]
	if slices.Max(after) != 2 {
		t.Fatalf("batch sizes after BatchSize 2: %v", after)
	}

	// Disable: Disabling, then Disabled. Records put now reach the witness, never fn.
	d, err := s.client.UpdateEventSourceMapping(ctx, &lambda.UpdateEventSourceMappingInput{UUID: aws.String(id), Enabled: aws.Bool(false)})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(d.State) != "Disabling" {
		t.Fatalf("disable: state %s", aws.ToString(d.State))
	}
	s.waitState(t, id, "Disabled")
	delivered := len(fn.records())
	put(t, name, uniq("c", 4)...)
	testkit.WaitFor(t, "the witness to get the records put while fn is disabled", 20*time.Second, witness.has(uniq("c", 4)...))
	if got := fn.records()[delivered:]; len(got) != 0 {
		t.Fatalf("delivered while disabled: %v", got)
	}

	// Enable: Enabling, then Enabled; the records put while disabled arrive, nothing earlier again.
	e, err := s.client.UpdateEventSourceMapping(ctx, &lambda.UpdateEventSourceMappingInput{UUID: aws.String(id), Enabled: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(e.State) != "Enabling" {
		t.Fatalf("enable: state %s", aws.ToString(e.State))
	}
	s.waitState(t, id, "Enabled")
	testkit.WaitFor(t, "the records put while disabled", 20*time.Second, fn.has(uniq("c", 4)...))
	all := append(append(uniq("a", 5), uniq("b", 6)...), uniq("c", 4)...)
	if got := fn.records(); !slices.Equal(got, all) {
		t.Fatalf("fn got %v, want each record once, in order: %v", got, all)
	}

	// Delete: 202 Deleting; then 404, and its progress is gone.
	del, err := s.client.DeleteEventSourceMapping(ctx, &lambda.DeleteEventSourceMappingInput{UUID: aws.String(id)})
	if err != nil {
		t.Fatal(err)
	}
	if status(del.ResultMetadata) != 202 || aws.ToString(del.State) != "Deleting" {
		t.Fatalf("delete: status %d, state %s", status(del.ResultMetadata), aws.ToString(del.State))
	}
	testkit.WaitFor(t, "a Get after Delete to be 404", 20*time.Second, func() bool {
		_, err := s.client.GetEventSourceMapping(ctx, &lambda.GetEventSourceMappingInput{UUID: aws.String(id)})
		var nf *types.ResourceNotFoundException
		return errors.As(err, &nf)
	})
	keys, err := s.store.Mappings()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(keys, id) || !slices.Contains(keys, aws.ToString(w.UUID)) {
		t.Fatalf("progress after delete: %v (deleted %s, kept %s)", keys, id, aws.ToString(w.UUID))
	}
}
