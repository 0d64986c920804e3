package runner

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
)

// TestLocalRewindOfAStateFile: a mapping on a state directory (no lease table) applies a rewind
// itself: a request at fault is refused while the mapping goes on; a valid one stops the
// poller, is written into the store and the poller starts again from it, so the records from
// the rewind's sequence number are invoked again, in order, once each. Without the runner
// taking the request up, Rewind is refused when its context ends.
func TestLocalRewindOfAStateFile(t *testing.T) {
	kin := fakekinesis.New()
	kin.CreateStream("s", 1)
	var seqs []string
	for _, d := range []string{"r0", "r1", "r2", "r3"} {
		_, seq := kin.Put("s", "k", []byte(d))
		seqs = append(seqs, seq)
	}
	var mu sync.Mutex
	var got []string
	handle := func(_ context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range e.Records {
			got = append(got, string(r.Kinesis.Data))
		}
		return events.KinesisEventResponse{}, nil
	}
	delivered := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
	r, _ := fakeRunner(t, kin, nil)
	rewinds := NewLocalRewinds()
	stop := runUntil(r, Mapping{
		Source:   Source{Stream: "s"},
		Function: Function{Handler: handle},
		Config:   poller.Config{StartingPosition: poller.TrimHorizon, PollInterval: 10 * time.Millisecond},
		Store:    Store{StateDir: filepath.Join(t.TempDir(), "state")},
		Hooks:    Hooks{Rewinds: rewinds},
	})
	testkit.WaitFor(t, "every record invoked", 10*time.Second, func() bool { return len(delivered()) == 4 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var ve *poller.ValidationError
	if _, err := rewinds.Rewind(ctx, poller.RewindRequest{Sequences: map[string]string{"shardId-000000000007": seqs[1]}}, "t"); !errors.As(err, &ve) {
		t.Fatalf("a rewind of an unknown shard: %v, want a ValidationError", err)
	}
	out, err := rewinds.Rewind(ctx, poller.RewindRequest{Sequences: map[string]string{"shardId-000000000000": seqs[2]}}, "t")
	if err != nil || out.Revision != 1 || !slices.Equal(out.Rewound, []string{"shardId-000000000000"}) {
		t.Fatalf("rewind: %+v, %v; want revision 1 of shardId-000000000000", out, err)
	}
	testkit.WaitFor(t, "the records from the rewind's on invoked again", 10*time.Second, func() bool { return len(delivered()) == 6 })
	kin.Put("s", "k", []byte("r4"))
	testkit.WaitFor(t, "the next record", 10*time.Second, func() bool { return len(delivered()) == 7 })
	if want := []string{"r0", "r1", "r2", "r3", "r2", "r3", "r4"}; !slices.Equal(delivered(), want) {
		t.Fatalf("deliveries %v, want %v", delivered(), want)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancelShort()
	if _, err := rewinds.Rewind(short, poller.RewindRequest{Sequences: map[string]string{"shardId-000000000000": seqs[0]}}, "t"); !errors.Is(err, lease.ErrRewindRefused) {
		t.Fatalf("a rewind of a stopped mapping: %v, want refused", err)
	}
}
