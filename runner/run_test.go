package runner

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/poller"
)

// TestS3DestinationKeyCarriesMappingUUID: the UUID the runner resolved for the mapping names it
// in the S3 destination's object keys (aws/lambda/<UUID>/<shard>/...), as Lambda's ESM UUID does.
func TestS3DestinationKeyCarriesMappingUUID(t *testing.T) {
	var path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.Path
		w.Header().Set("ETag", `"e"`)
	}))
	defer srv.Close()
	ctx := context.Background()
	cfg, err := AWSConfig(ctx, "us-east-1", srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(cfg, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	var told string
	m := r.withDefaults(Mapping{Hooks: Hooks{OnUUID: func(id string) { told = id }}})
	st := &opened{uuid: func(context.Context) (string, error) { return "5e0f2a6b-8c1d-4e7f-9a3b-6d2c1e0f9a8b", nil }, where: []any{}}
	id, err := r.mappingUUID(ctx, m, st)
	if err != nil || told != id {
		t.Fatalf("mappingUUID = %q (%v), told %q", id, err, told)
	}
	d, err := r.destination(poller.Config{OnFailureDestination: "arn:aws:s3:::failures"}, id)
	if err != nil {
		t.Fatal(err)
	}
	f := poller.FailureRecord{ShardID: "shardId-000000000001", Timestamp: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), BatchSize: 1}
	if err := d.Deliver(ctx, f); err != nil {
		t.Fatal(err)
	}
	if want := "/failures/aws/lambda/" + id + "/shardId-000000000001/2026/12/01/"; !strings.HasPrefix(path, want) {
		t.Fatalf("object path %q, want it under %s", path, want)
	}
	m.UUID = "not-a-uuid"
	if _, err := r.mappingUUID(ctx, m, st); err == nil {
		t.Fatal("a given mapping UUID that is not a UUID was accepted")
	}
}

// TestDestinationErrorKept: the on-failure destination's own error is behind the
// DestinationConfig ValidationError.
func TestDestinationErrorKept(t *testing.T) {
	cfg, err := AWSConfig(context.Background(), "us-east-1", "http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(cfg, WithSQSProtocol("xml"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.destination(poller.Config{OnFailureDestination: "arn:aws:sqs:us-east-1:000000000000:q"}, "")
	var ve *poller.ValidationError
	if !errors.As(err, &ve) || ve.Field != "DestinationConfig" || ve.Err == nil || !errors.Is(err, ve.Err) || !errors.Is(err, poller.ErrInvalidConfig) {
		t.Fatalf("err = %#v, want a DestinationConfig ValidationError keeping dlq's error", err)
	}
	if ve.Err.Error() != ve.Message {
		t.Fatalf("message %q is not the destination's error %q", ve.Message, ve.Err)
	}
}
