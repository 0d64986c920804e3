package status

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/metrics/live"
	"github.com/kinesis-esm/esm/poller"
)

// Worker is a worker whose live view status read (a --metrics-addr, or an address a lease table
// publishes), and whether it answered.
type Worker struct {
	ID    string `json:"id,omitempty"`
	Addr  string `json:"addr,omitempty"`
	Error string `json:"error,omitempty"` // why it did not answer; "" when it did
}

// peerTimeout bounds the reads of one worker's live view when a lease table names it (an
// explicit --metrics-addr waits as long as the context allows).
const peerTimeout = 3 * time.Second

// readLive reads the live view of the esm at addr: its metrics, with what its live page adds
// (owners, blocked since, attempts, errors; skipped when that esm has no such page).
func readLive(ctx context.Context, client *http.Client, addr string, now time.Time) (map[string]*LiveMapping, error) {
	if strings.HasPrefix(addr, ":") {
		addr = "127.0.0.1" + addr
	}
	mappings, err := scrape(ctx, client, addr, now)
	if err != nil {
		return nil, err
	}
	st, err := scrapeState(ctx, client, addr)
	if err != nil || st == nil {
		return mappings, err
	}
	for _, m := range st.Mappings {
		lm := mappings[m.UUID]
		if lm == nil && len(mappings) == 1 && len(st.Mappings) == 1 { // esm run's: no uuid label
			for _, only := range mappings {
				lm = only
			}
		}
		if lm == nil {
			continue
		}
		for _, s := range m.Shards {
			if s.Owner == "" {
				continue
			}
			l := lm.Shards[s.ShardID]
			l.Owner, l.BlockedSince, l.Attempts, l.LastError, l.LastErrorAt = s.Owner, s.BlockedSince, s.Attempts, s.LastError, s.LastErrorAt
			l.RetryingFirst, l.RetryingLast, l.LastSkip, l.SkipPending = s.RetryingFirst, s.RetryingLast, s.LastSkip, s.SkipPending
			if s.State == live.StateBlocked {
				l.State, l.Blocked = live.StateBlocked, true
			}
			lm.Shards[s.ShardID] = l
		}
	}
	return mappings, nil
}

// scrapeState reads a running esm's own live state (/live/state.json?scope=worker); nil when it
// serves none (an esm from before the page).
func scrapeState(ctx context.Context, client *http.Client, addr string) (*live.State, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+live.PathState+"?scope="+live.ScopeWorker, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read the live view at %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read the live view at %s: %s", addr, resp.Status)
	}
	var st live.State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("read the live view at %s: %w", addr, err)
	}
	return &st, nil
}

// mergeLive adds src's mappings to dst: a shard that src's worker reads (or has blocked)
// replaces what dst says of it.
func mergeLive(dst, src map[string]*LiveMapping) {
	for k, sm := range src {
		dm := dst[k]
		if dm == nil {
			dst[k] = sm
			continue
		}
		for id, s := range sm.Shards {
			if d, ok := dm.Shards[id]; !ok || readsIt(s) && !readsIt(d) {
				dm.Shards[id] = s
			}
		}
	}
}

// readsIt: the shard is read (or blocked) where this live view comes from.
func readsIt(l LiveShard) bool {
	return l.State == poller.StateReading || l.State == live.StateBlocked || l.Owner != ""
}

// leaseFleet is what a lease table says of the workers and the blocked shards.
type leaseFleet struct {
	lease.Fleet
	rewind lease.RewindState // the mapping's latest rewind (Revision 0: none)
}

// apply sets each shard's owner and, for a shard its owner marked blocked, the mark; the workers
// that publish no address are listed as not read. Nil: nothing to apply.
func (f *leaseFleet) apply(rep *Report) {
	if f == nil {
		return
	}
	if f.rewind.Revision > 0 {
		rep.Rewind = live.NewRewindView(f.rewind.Notice())
	}
	owners := map[string]string{}
	for _, l := range f.Leases {
		owners[l.ShardID] = l.Owner
	}
	for i := range rep.Shards {
		sh := &rep.Shards[i]
		sh.Owner = owners[sh.ShardID]
		if b, ok := f.Blocked[sh.ShardID]; ok && sh.State != Finished {
			since, at := b.Since, b.CauseAt
			sh.State, sh.BlockedSince, sh.Attempts, sh.LastError = live.StateBlocked, &since, b.Attempts, b.Cause
			if !at.IsZero() {
				sh.LastErrorAt = &at
			}
		}
	}
	for _, w := range f.Workers {
		if w.Addr == "" {
			rep.Workers = append(rep.Workers, Worker{ID: w.ID, Error: "publishes no status address (no --metrics-addr)"})
		}
	}
}

// addrs are the workers that publish a status address.
func (f *leaseFleet) addrs() []Worker {
	if f == nil {
		return nil
	}
	var out []Worker
	for _, w := range f.Workers {
		if w.Addr != "" {
			out = append(out, Worker{ID: w.ID, Addr: w.Addr})
		}
	}
	return out
}
