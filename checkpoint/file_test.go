package checkpoint

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/poller"
)

func TestFileStoreRoundTripAndIsolation(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, err := OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, b := s.Mapping(MappingKey("arn:s", "f1")), s.Mapping(MappingKey("arn:s", "f2"))
	at := time.Unix(1700000000, 0).UTC()
	if err := a.Save(ctx, map[string]poller.ShardProgress{
		"shardId-0": {Checkpoint: "42", Start: poller.TrimHorizon, UpdatedAt: at, Discarded: []poller.DiscardedRun{{First: "50", Last: "60", Slot: 1, Of: 3}}},
		"shardId-1": {Checkpoint: "7", Finished: true, UpdatedAt: at},
	}); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Load(ctx); len(got) != 0 {
		t.Fatalf("another mapping sees %v", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopened, the progress is still there.
	s, err = OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Mapping(MappingKey("arn:s", "f1")).Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]poller.ShardProgress{
		"shardId-0": {Checkpoint: "42", Start: poller.TrimHorizon, UpdatedAt: at, Discarded: []poller.DiscardedRun{{First: "50", Last: "60", Slot: 1, Of: 3}}},
		"shardId-1": {Checkpoint: "7", Finished: true, UpdatedAt: at},
	}
	if len(got) != 2 || !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded %+v, want %+v", got, want)
	}
	keys, _ := s.Mappings()
	if len(keys) != 1 || keys[0] != MappingKey("arn:s", "f1") {
		t.Fatalf("mappings %v", keys)
	}
}

// TestFileStoreLockedByAnotherProcess holds the store in a child process (this test binary,
// re-executed) and checks that opening it here fails at once, naming the holder.
func TestFileStoreLockedByAnotherProcess(t *testing.T) {
	if dir := os.Getenv("CHECKPOINT_TEST_HOLD"); dir != "" {
		s, err := OpenFile(dir)
		if err != nil {
			os.Exit(3)
		}
		defer s.Close()
		os.Stdout.WriteString("held\n")
		_, _ = os.Stdin.Read(make([]byte, 1)) // until the parent closes stdin
		return
	}
	dir := filepath.Join(t.TempDir(), "state")
	cmd := exec.Command(os.Args[0], "-test.run", "^TestFileStoreLockedByAnotherProcess$")
	cmd.Env = append(os.Environ(), "CHECKPOINT_TEST_HOLD="+dir)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	buf := make([]byte, 5)
	if _, err := stdout.Read(buf); err != nil || string(buf) != "held\n" {
		t.Fatalf("child did not take the store: %q %v", buf, err)
	}
	_, err := OpenFile(dir)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("err = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "pid") {
		t.Fatalf("error does not name the directory and holder: %v", err)
	}
}
