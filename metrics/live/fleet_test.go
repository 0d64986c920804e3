package live_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/metrics/live"
	"github.com/kinesis-esm/esm/poller"
)

// TestFleetMergesPeers: worker a's page shows the shards worker b reads (b's own state, its
// blocked shard with its error first), worker c, whose page does not answer, as unreachable
// with the error, the shard nobody that answered reads as its owner not answering, and the
// mapping's latest rewind as the worker that saw it end last.
func TestFleetMergesPeers(t *testing.T) {
	shards := []string{"shardId-000000000000", "shardId-000000000001", "shardId-000000000002"}
	mk := func(id string) (*live.Board, *live.Mapping) {
		b := live.New(live.WithWorker(id))
		m := b.Add("fn", "orders")
		m.SetMappingUUID("u1")
		for _, s := range shards {
			m.ShardLineage(s, nil)
		}
		return b, m
	}
	bb, bm := mk("b")
	bm.ShardState(shards[1], poller.StateReading)
	bm.BatchFailing(shards[1], poller.BatchFailure{First: "9", Last: "9", Cause: "cannot parse the poison record", Since: time.Now(), Attempts: 1})
	bm.ShardBlocked(shards[1], true)
	bm.RewindSeen(poller.RewindNotice{Revision: 2, State: "applied", Report: "applied: 2 shards rewound"})
	bsrv := httptest.NewServer(bb.Handler())
	defer bsrv.Close()
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	peers := func(context.Context) ([]live.Peer, error) {
		return []live.Peer{{ID: "a"}, {ID: "b", Addr: strings.TrimPrefix(bsrv.URL, "http://")}, {ID: "c", Addr: deadAddr}}, nil
	}
	ab := live.New(live.WithWorker("a"), live.WithPeers(peers, http.DefaultClient))
	am := ab.Add("fn", "orders")
	am.SetMappingUUID("u1")
	for _, s := range shards {
		am.ShardLineage(s, nil)
	}
	am.ShardState(shards[0], poller.StateReading)
	am.RewindSeen(poller.RewindNotice{Revision: 2, State: "applying", InProgress: true})

	v := ab.Fleet(context.Background()).Mappings[0]
	got := map[string]live.ShardView{}
	for _, s := range v.Shards {
		got[s.ShardID] = s
	}
	if s := got[shards[0]]; s.State != live.StateReading || s.Owner != "a" {
		t.Errorf("a's own shard: %+v", s)
	}
	if s := got[shards[1]]; s.State != live.StateBlocked || s.Owner != "b" || s.LastError != "cannot parse the poison record" || s.BlockedSince == nil {
		t.Errorf("b's blocked shard as a shows it: %+v", s)
	}
	if s := got[shards[2]]; !s.Unreachable || s.Owner != "" {
		t.Errorf("the shard read by nobody that answered: %+v", s)
	}
	ws := map[string]live.WorkerView{}
	for _, w := range v.Workers {
		ws[w.ID] = w
	}
	if ws["a"].Status != live.WorkerSelf || ws["b"].Status != live.WorkerOK || ws["b"].Shards != 1 || ws["c"].Status != live.WorkerUnreachable || ws["c"].Error == "" {
		t.Errorf("workers %+v", v.Workers)
	}
	if r := v.Rewind; r == nil || r.Revision != 2 || r.State != "applied" || r.InProgress {
		t.Errorf("the fleet's rewind is b's (seen ended), not a's (seen applying): %+v", r)
	}
	if v.Summary.ByState[live.StateBlocked] != 1 || v.Summary.ByState[live.StateReading] != 1 {
		t.Errorf("summary %+v", v.Summary)
	}
	srv := httptest.NewServer(ab.Handler())
	defer srv.Close()
	page := get(t, srv, live.PathPage+"?part=content")
	blockedAt, shardsAt := strings.Index(page, `<table class="blocked">`), strings.Index(page, `<table class="shards">`)
	if blockedAt < 0 || blockedAt > shardsAt || !strings.Contains(page[blockedAt:shardsAt], "cannot parse the poison record") {
		t.Errorf("a's page does not show b's blocked shard with its error above the table")
	}
	if !strings.Contains(page, `data-worker="c" data-status="unreachable"`) {
		t.Errorf("a's page does not show c unreachable")
	}
}

// TestFleetListingFails: when the workers cannot be listed, the page says so and shows this
// worker's shards.
func TestFleetListingFails(t *testing.T) {
	ab := live.New(live.WithWorker("a"), live.WithPeers(func(context.Context) ([]live.Peer, error) {
		return nil, errors.New("lease table unreachable")
	}, nil))
	am := ab.Add("fn", "orders")
	am.ShardState("s", poller.StateReading)
	v := ab.Fleet(context.Background()).Mappings[0]
	if len(v.Shards) != 1 || v.Shards[0].Owner != "a" {
		t.Fatalf("shards %+v", v.Shards)
	}
	if len(v.Workers) != 2 || v.Workers[1].Status != live.WorkerUnreachable || !strings.Contains(v.Workers[1].Error, "lease table unreachable") {
		t.Errorf("workers %+v: want the listing's error shown", v.Workers)
	}
}
