package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// TestLeaseTableOfAnotherStream: a lease table holds one stream's leases. esm run on a table
// that a worker of another stream started on refuses to start (exit 1), naming the table and
// both streams; the table's own stream still starts on it.
func TestLeaseTableOfAnotherStream(t *testing.T) {
	orders, payments := newStream(t, 1), newStream(t, 1)
	table := fmt.Sprintf("owner-%d-%d", os.Getpid(), streamSeq.Add(1))
	env := append(stopEnv(), "AWS_ENDPOINT_URL_KINESIS="+kinesisEndpoint, "AWS_ENDPOINT_URL_DYNAMODB="+dynalite(t))
	run := func(stream string) *esmProc {
		return spawnESM(t, env, "run", "--invoke", "example", "--stream", stream, "--lease-table", table,
			"--state-dir", filepath.Join(t.TempDir(), "state"))
	}
	started := func(p *esmProc) {
		t.Helper()
		testkit.WaitFor(t, "esm to start on the table", 60*time.Second, func() bool {
			return strings.Contains(p.stderr.String(), "event source mapping")
		})
		if code := p.stop(t); code != 0 {
			t.Fatalf("stop: exit %d", code)
		}
	}
	started(run(orders))

	p := run(payments)
	if code := p.wait(t); code != 1 {
		t.Fatalf("esm on another stream's lease table: exit %d, want 1", code)
	}
	out := p.stderr.String()
	for _, want := range []string{"esm: lease table holds another stream's leases", table, "stream/" + orders, "stream/" + payments} {
		if !strings.Contains(out, want) {
			t.Errorf("the refusal does not name %q:\n%s", want, tail(out, 10))
		}
	}
	started(run(orders))
}
