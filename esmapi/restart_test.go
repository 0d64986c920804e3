package esmapi_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// TestTwoMappingsSurviveRestart runs two mappings, on two streams to two functions, in one
// server; a restart on the same state directory keeps both, and each resumes from its checkpoint:
// the records put while it was down arrive, none from before arrives again.
func TestTwoMappingsSurviveRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	name1, arn1 := newStream(t)
	name2, arn2 := newStream(t)
	f1, f2 := &recorder{}, &recorder{}
	s := startServer(t, dir, map[string]*recorder{"f1": f1, "f2": f2})
	var ids []string
	for _, c := range []struct{ fn, arn string }{{"f1", arn1}, {"f2", arn2}} {
		out, err := s.client.CreateEventSourceMapping(ctx, &lambda.CreateEventSourceMappingInput{
			FunctionName: aws.String(c.fn), EventSourceArn: aws.String(c.arn), StartingPosition: types.EventSourcePositionTrimHorizon, BatchSize: aws.Int32(3),
		})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, aws.ToString(out.UUID))
	}
	put(t, name1, uniq("s1-before", 4)...)
	put(t, name2, uniq("s2-before", 5)...)
	testkit.WaitFor(t, "f1's first records", 20*time.Second, f1.has(uniq("s1-before", 4)...))
	testkit.WaitFor(t, "f2's first records", 20*time.Second, f2.has(uniq("s2-before", 5)...))
	s.close()

	put(t, name1, uniq("s1-after", 3)...)
	put(t, name2, uniq("s2-after", 2)...)
	g1, g2 := &recorder{}, &recorder{}
	s = startServer(t, dir, map[string]*recorder{"f1": g1, "f2": g2})
	l, err := s.client.ListEventSourceMappings(ctx, &lambda.ListEventSourceMappingsInput{})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, m := range l.EventSourceMappings {
		listed = append(listed, aws.ToString(m.UUID))
		if aws.ToInt32(m.BatchSize) != 3 {
			t.Errorf("mapping %s lost its BatchSize: %d", aws.ToString(m.UUID), aws.ToInt32(m.BatchSize))
		}
	}
	if !slices.Equal(listed, ids) {
		t.Fatalf("after restart: %v, want %v", listed, ids)
	}
	for _, id := range ids {
		s.waitState(t, id, "Enabled")
	}
	testkit.WaitFor(t, "f1's records put while down", 20*time.Second, g1.has(uniq("s1-after", 3)...))
	testkit.WaitFor(t, "f2's records put while down", 20*time.Second, g2.has(uniq("s2-after", 2)...))
	if got := g1.records(); !slices.Equal(got, uniq("s1-after", 3)) {
		t.Errorf("f1 after restart got %v, want only the new records", got)
	}
	if got := g2.records(); !slices.Equal(got, uniq("s2-after", 2)) {
		t.Errorf("f2 after restart got %v, want only the new records", got)
	}
}
