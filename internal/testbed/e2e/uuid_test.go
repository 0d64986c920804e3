package e2e

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"

	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/runner"
)

// runForUUID runs the mapping until it is running, then stops it, and returns the UUID the
// service told before the mapping started.
func runForUUID(t *testing.T, stream, stateDir, given string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got, ready := make(chan string, 1), make(chan struct{})
	var once, readyOnce sync.Once
	handler := func(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error) {
		return events.KinesisEventResponse{}, nil
	}
	done := make(chan error, 1)
	r := localRunner(t)
	go func() {
		done <- r.Run(ctx, runner.Mapping{Source: runner.Source{Stream: stream}, Function: runner.Function{Handler: handler},
			Store: runner.Store{StateDir: stateDir}, UUID: given, Config: poller.Config{StartingPosition: poller.TrimHorizon},
			Hooks: runner.Hooks{OnUUID: func(id string) { once.Do(func() { got <- id }) },
				Ready: func() { readyOnce.Do(func() { close(ready) }) }}})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("mapping stopped before it ran: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("mapping not running within 30 s")
	}
	var id string
	select {
	case id = <-got:
	default:
		t.Fatal("the mapping ran without telling its UUID first")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return id
}

// TestMappingUUIDKeptWithProgress: esm run's mapping UUID is a random version 4 UUID created on
// the first run and read back from the state directory on the next; a UUID the caller gives (esm
// serve's) is used as it is; another state directory is another mapping with its own UUID.
func TestMappingUUIDKeptWithProgress(t *testing.T) {
	stream := newStream(t, 1)
	dir := t.TempDir()
	first := runForUUID(t, stream, filepath.Join(dir, "a"), "")
	if u, err := uuid.Parse(first); err != nil || u.Version() != 4 {
		t.Fatalf("mapping UUID %q is not a version 4 UUID (%v)", first, err)
	}
	if again := runForUUID(t, stream, filepath.Join(dir, "a"), ""); again != first {
		t.Fatalf("after a restart the mapping UUID is %s, want %s", again, first)
	}
	if other := runForUUID(t, stream, filepath.Join(dir, "b"), ""); other == first {
		t.Fatal("a fresh state directory reused the UUID")
	}
	const given = "0b5c3d1e-7f20-4a8b-9c6d-2e1f0a9b8c7d"
	if got := runForUUID(t, stream, filepath.Join(dir, "a"), given); got != given {
		t.Fatalf("given UUID %s, mapping used %s", given, got)
	}
}
