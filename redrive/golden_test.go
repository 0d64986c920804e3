package redrive

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/kinesis-esm/esm/dlq"
	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// goldenMessages is a file of every kind of message: a batch, a bisected record, a range trimmed
// by retention, a message of another stream, and something that is not a failure message.
func goldenMessages(t *testing.T) (*fakekinesis.Fake, string, []byte) {
	t.Helper()
	f := fakekinesis.New(fakekinesis.WithClock(fixedClock))
	arn := f.CreateStream("orders", 2)
	var seqs []string
	for i, d := range []string{`{"order":1}`, `{"order":2}`, `{"order":3}`, "poison <&>"} {
		seqs = append(seqs, f.PutToShard("orders", shard0, []string{"a", "b"}[i%2], []byte(d)))
	}
	const shard1 = "shardId-000000000001"
	old := []string{f.PutToShard("orders", shard1, "c", []byte("old")), f.PutToShard("orders", shard1, "c", []byte("older"))}
	f.TrimBefore("orders", shard1, f.PutToShard("orders", shard1, "c", []byte("kept")))
	batch := failureRecord(arn, seqs[0], seqs[2], 3)
	single := failureRecord(arn, seqs[3], seqs[3], 1)
	trimmed := failureRecord(arn, old[0], old[1], 2)
	trimmed.ShardID = shard1
	other := failureRecord("arn:aws:kinesis:us-east-1:000000000000:stream/payments", seqs[0], seqs[0], 1)
	body := bytes.Join([][]byte{dlq.Message(batch), dlq.Message(single), dlq.Message(trimmed), dlq.Message(other), []byte(`{"hello":"world"}`)}, []byte("\n"))
	return f, arn, body
}

func TestDryRunGolden(t *testing.T) {
	f, arn, body := goldenMessages(t)
	src, err := ReadMessages(bytes.NewReader(body), "messages.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	inv := &fn{}
	sum, out := run(t, arn, mapping(arn), f, src, WithInvoker(inv), WithDryRun())
	if sum.WouldRedrive != 2 || sum.Expired != 1 || sum.Skipped != 1 || sum.Invalid != 1 || len(inv.calls()) != 0 {
		t.Fatalf("summary %+v, %d invocations", sum, len(inv.calls()))
	}
	testkit.Golden(t, "dry-run.golden", []byte(out))
}

func TestExportGolden(t *testing.T) {
	f, arn, body := goldenMessages(t)
	path := filepath.Join(t.TempDir(), "messages.jsonl")
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var records bytes.Buffer
	sum, out := run(t, arn, mapping(arn), f, src, WithExport(&records))
	if sum.Exported != 2 {
		t.Fatalf("summary %+v", sum)
	}
	testkit.Golden(t, "export.golden", bytes.ReplaceAll([]byte(out), []byte(path), []byte("messages.jsonl")))
	testkit.Golden(t, "export.jsonl.golden", records.Bytes())
	if left, _ := os.ReadFile(path); !bytes.Equal(left, body) {
		t.Fatalf("an export changed the message file:\n%s", left)
	}
}
