package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/browsertest"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/metrics/live"
)

// TestFleetLivePageShowsPeersBlockedShard (must-show of the fleet view): three "esm run" workers
// share a 1,000-shard stream (the in-memory Kinesis served over HTTP) through one lease table on
// dynalite, each serving its live page. A poison record blocks a shard the third worker reads;
// the first worker's page, in headless Chromium, shows that shard first, with its owner and
// error, within --blocked-after + 5 s of the record's put. Screenshots are kept as artifacts.
func TestFleetLivePageShowsPeersBlockedShard(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three workers on 1,000 shards")
	}
	ctx, cancel := browsertest.Start(t, 1400, 1000, 3*time.Minute)
	defer cancel()
	const shards, blockedAfter = 1000, 5 * time.Second
	f := fakekinesis.New()
	f.CreateStream("fleet", shards)
	kin := httptest.NewServer(fakeKinesisHTTP(f))
	t.Cleanup(kin.Close) // after the workers' cleanup stopped them
	env := append(stopEnv(), "AWS_ENDPOINT_URL_KINESIS="+kin.URL, "AWS_ENDPOINT_URL_DYNAMODB="+dynalite(t),
		"EXAMPLE_FAIL=error", "EXAMPLE_FAIL_MATCH=poison")
	table := fmt.Sprintf("fleet-live-%d", streamSeq.Add(1)+time.Now().UnixNano()%1e6)
	addrs := make([]string, 3)
	started := time.Now()
	for i := range addrs {
		addrs[i] = freeAddr(t)
		spawnESM(t, env, "run", "--invoke", "example", "--stream", "fleet", "--lease-table", table,
			"--worker-id", fmt.Sprintf("w%d", i+1), "--metrics-addr", addrs[i], "--blocked-after", blockedAfter.String())
	}
	// Wait until the three share the shards, each reading about a third.
	var st live.State
	testkit.WaitFor(t, "the shards shared by the three workers", 2*time.Minute, func() bool {
		if err := getJSON(addrs[0], live.PathState, &st); err != nil || len(st.Mappings) != 1 {
			return false
		}
		per := map[string]int{}
		for _, w := range st.Mappings[0].Workers {
			per[w.ID] = w.Shards
		}
		return per["w1"]+per["w2"]+per["w3"] == shards && min(per["w1"], per["w2"], per["w3"]) >= shards/3-shards/20
	})
	t.Logf("1,000 shards shared by three workers %s after they started; load average %s", time.Since(started).Round(time.Millisecond), testkit.LoadAverage())
	var own live.State
	if err := getJSON(addrs[2], live.PathState+"?scope=worker", &own); err != nil {
		t.Fatal(err)
	}
	target := ""
	for _, s := range own.Mappings[0].Shards {
		if s.Owner == "w3" && s.State == live.StateReading {
			target = s.ShardID
			break
		}
	}
	if target == "" {
		t.Fatal("w3 reads no shard")
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+addrs[0]+live.PathPage)); err != nil {
		t.Fatal(err)
	}
	browsertest.Screenshot(t, ctx, "fleet-before-poison.png")

	f.PutToShard("fleet", target, "k", []byte("poison"))
	put := time.Now()
	row := chromedp.CSS(`table.blocked tbody tr[data-shard="` + target + `"]`)
	wctx, stopWaiting := context.WithTimeout(ctx, blockedAfter+30*time.Second)
	defer stopWaiting()
	if err := chromedp.Do(wctx, chromedp.WaitVisible(row)); err != nil {
		var now live.State
		_ = getJSON(addrs[2], live.PathState+"?scope=worker", &now)
		for _, s := range now.Mappings[0].Shards {
			if s.ShardID == target {
				t.Logf("w3 says of %s: %+v", target, s)
			}
		}
		t.Fatalf("w1's page never showed w3's blocked shard %s: %v", target, err)
	}
	shown := time.Since(put)
	type first struct {
		Blocked, FirstRow, Owner string
		LineageWidth, Window     float64
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[first](`({
	  LineageWidth: document.querySelector('.lineage').scrollWidth, Window: window.innerWidth,
	  Blocked: document.querySelector('table.blocked tbody tr').innerText,
	  FirstRow: document.querySelector('table.shards tbody tr').dataset.shard,
	  Owner: document.querySelector('table.shards tbody tr td:nth-child(4)').innerText})`))
	if err != nil {
		t.Fatal(err)
	}
	browsertest.Screenshot(t, ctx, "fleet-blocked.png")
	browsertest.Window(t, ctx, "fleet-blocked-window.png")
	t.Logf("w3's blocked shard %s on w1's page %s after the poison record's put (--blocked-after %s): %q", target, shown.Round(time.Millisecond), blockedAfter, got.Blocked)
	if shown > blockedAfter+5*time.Second {
		t.Errorf("shown %s after the put: over --blocked-after + 5 s", shown.Round(time.Millisecond))
	}
	if !strings.HasPrefix(got.Blocked, target) || !strings.Contains(got.Blocked, "w3") || !strings.Contains(got.Blocked, "failing as EXAMPLE_FAIL=error asks") {
		t.Errorf("the first blocked row %q: want %s on w3 with the error", got.Blocked, target)
	}
	if got.LineageWidth > got.Window {
		t.Errorf("the lineage of 1,000 shards is %v px wide in a %v px window", got.LineageWidth, got.Window)
	}
	if got.FirstRow != target || got.Owner != "w3" {
		t.Errorf("the shard table starts with %s owned by %q, want the blocked %s of w3", got.FirstRow, got.Owner, target)
	}
	var data json.RawMessage
	if err := getJSON(addrs[0], live.PathState, &data); err != nil {
		t.Fatal(err)
	}
	t.Logf("w1's state.json of the fleet: %d bytes", len(data))

	// esm status from anywhere with the lease table: the summary and the blocked shard first,
	// owners from the table, live views from the addresses the workers publish there.
	code, out, stderr := runESMEnv(t, env, "", "status", "--stream", "fleet", "--lease-table", table)
	head := strings.Join(strings.SplitN(out, "\n", 11)[:10], "\n")
	t.Logf("esm status --lease-table, first lines:\n%s", head)
	for _, want := range []string{"state     lease table " + table, "shards    1000: 1 blocked, 999 reading",
		"blocked   " + target + " on w3 since ", "failing as EXAMPLE_FAIL=error asks", "workers   w1 at " + addrs[0]} {
		if code != 0 || !strings.Contains(head, want) {
			t.Errorf("esm status (exit %d) lacks %q in its first lines\n%s", code, want, stderr)
		}
	}
}
