package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/example"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/lease"
)

// TestServeSkipReachesTheOwner: two esm serve workers share a mapping on a lease table
// (dynalite); its one shard is blocked on a poison record (MaximumRetryAttempts -1). A skip sent
// to the worker that does not read the shard reaches the one that does, through the mapping's
// lease table: answered 200 with the batch skipped, and the next record is invoked. A skip of a
// shard that is no longer blocked, sent the same way, is refused as the owner refuses it (409).
func TestServeSkipReachesTheOwner(t *testing.T) {
	ddbEndpoint := dynalite(t)
	stream := newStream(t, 1)
	dir := t.TempDir()
	tmpl := writeTemplate(t, dir, stream, "BatchSize: 1", "MaximumRetryAttempts: -1")
	table := fmt.Sprintf("serve-skip-%d-%d", os.Getpid(), streamSeq.Add(1))
	proxy := newLoadBarrier(t, ddbEndpoint, table, 2)
	endpoints, outs, procs := map[string]string{}, map[string]string{}, map[string]*esmProc{}
	for _, id := range []string{"w1", "w2"} {
		addr, out := freeAddr(t), filepath.Join(dir, id+".jsonl")
		p := spawnESM(t, append(stopEnv(), "EXAMPLE_OUTPUT="+out, "EXAMPLE_FAIL=error", "EXAMPLE_FAIL_MATCH=poison"), "serve",
			"--endpoint-url", proxy.URL, "--api-addr", addr, "--lease-table", table, "--worker-id", id, "--lease-duration", "3s",
			"--sync-interval", "200ms", "--template", tmpl, "--function", "Fn=example", "--poll-interval", "100ms")
		endpoints[id], outs[id], procs[id] = "http://"+addr, out, p
		testkit.WaitFor(t, "esm serve to listen", 60*time.Second, func() bool {
			select {
			case err := <-p.done:
				t.Fatalf("esm serve %s exited: %v\n%s", id, err, p.stderr.String())
			default:
			}
			return strings.Contains(p.stderr.String(), "esm serve:")
		})
	}
	uuid := listMappings(t, endpoints["w1"])[0]["UUID"].(string)
	putSequenced(t, stream, "poison", "next")
	cfg, err := local.AWSConfig(context.Background(), "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	ddb, _ := local.DDBClients(cfg, ddbEndpoint)
	shard, owner := "shardId-000000000000", ""
	testkit.WaitFor(t, "a worker to read the shard and retry the poison record", 60*time.Second, func() bool {
		f, err := lease.ReadFleet(context.Background(), ddb, table+"-"+uuid)
		if err != nil {
			return false
		}
		for _, l := range f.Leases {
			if l.ShardID == shard && l.Owner != "" {
				owner = l.Owner
			}
		}
		return owner != "" && procs[owner] != nil && strings.Contains(procs[owner].stderr.String(), "function error")
	})
	other := map[string]string{"w1": "w2", "w2": "w1"}[owner]
	status, typ, ans := postTool(t, endpoints[other], uuid, "skip", `{"ShardId":"`+shard+`"}`)
	if status != 200 || ans["Records"] != 1.0 || ans["ShardId"] != shard {
		t.Fatalf("skip sent to %s (the shard is %s's): %d %s %v; want 200 and the poison record skipped", other, owner, status, typ, ans)
	}
	testkit.WaitFor(t, "the next record invoked", 30*time.Second, func() bool {
		return slices.ContainsFunc(readDeliveries(t, outs[owner]), func(d example.Delivery) bool { return d.Data == "next" })
	})
	status, typ, ans = postTool(t, endpoints[other], uuid, "skip", `{"ShardId":"`+shard+`"}`)
	if msg, _ := ans["message"].(string); status != 409 || typ != "ResourceConflictException" || !strings.Contains(msg, "is not retrying a batch") {
		t.Fatalf("a second skip through %s: %d %s %v; want 409, the shard not blocked", other, status, typ, ans)
	}
}
