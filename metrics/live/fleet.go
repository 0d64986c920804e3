package live

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Peer is another worker of the mapping's lease table and where it serves its page.
type Peer struct {
	ID   string
	Addr string // HOST:PORT; "" when it publishes none
}

// PeerSource lists the workers of the lease table (this one included or not).
type PeerSource func(ctx context.Context) ([]Peer, error)

// WithPeers makes the page show the whole fleet: the workers src lists are asked for their own
// state (their /live/state.json?scope=worker, through client, each within PeerTimeout) at most
// every FleetRefresh, while the page or state.json is read, and merged with this worker's.
func WithPeers(src PeerSource, client *http.Client) Option {
	return func(b *Board) {
		if client == nil {
			client = http.DefaultClient
		}
		b.fleet = &fleet{src: src, client: client, peers: map[string]*peerState{}}
	}
}

// FleetRefresh is the least time between two fetches of the other workers' state; PeerTimeout
// bounds each fetch.
const (
	FleetRefresh = time.Second
	PeerTimeout  = 2 * time.Second
)

// fleet fetches the other workers' state.
type fleet struct {
	src    PeerSource
	client *http.Client

	mu      sync.Mutex // one refresh at a time; guards the fields below
	at      time.Time  // the last refresh
	srcErr  error      // the last listing's error
	order   []string   // the workers listed last, by id
	peers   map[string]*peerState
	history map[string][]sample // the other workers' shards' iterator ages, by mapping and shard
}

type peerState struct {
	Peer
	state      *State // the last answer
	err        error  // the last fetch's error; nil when it answered
	lastAnswer time.Time
}

// refresh fetches the peers' states when the last fetch is older than FleetRefresh, and
// returns what is known of each listed worker.
func (f *fleet) refresh(ctx context.Context, self string, now time.Time) ([]*peerState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.at.IsZero() && now.Sub(f.at) < FleetRefresh {
		return f.listed(), f.srcErr
	}
	f.at = now
	listed, err := f.src(ctx)
	f.srcErr = err
	if err != nil {
		return f.listed(), err // the workers listed before, as last fetched
	}
	f.order = f.order[:0]
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for _, p := range listed {
		if p.ID == self || seen[p.ID] {
			continue
		}
		seen[p.ID] = true
		f.order = append(f.order, p.ID)
		ps := f.peers[p.ID]
		if ps == nil || ps.Addr != p.Addr {
			ps = &peerState{Peer: p}
			f.peers[p.ID] = ps
		}
		if p.Addr == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := f.fetch(ctx, p.Addr)
			ps.err = err
			if err == nil {
				ps.state, ps.lastAnswer = st, now
			}
		}()
	}
	wg.Wait()
	for id := range f.peers {
		if !seen[id] {
			delete(f.peers, id)
		}
	}
	return f.listed(), nil
}

// listed are the peers of the last listing, in its order; f.mu is held.
func (f *fleet) listed() []*peerState {
	out := make([]*peerState, 0, len(f.order))
	for _, id := range f.order {
		if ps := f.peers[id]; ps != nil {
			cp := *ps
			out = append(out, &cp)
		}
	}
	return out
}

// fetch reads one worker's own state.
func (f *fleet) fetch(ctx context.Context, addr string) (*State, error) {
	ctx, cancel := context.WithTimeout(ctx, PeerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+PathState+"?scope="+ScopeWorker, nil)
	if err != nil {
		return nil, err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", PathState, resp.Status)
	}
	var st State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("%s: %w", PathState, err)
	}
	return &st, nil
}

// Fleet returns the mappings of this worker with every other worker's shards merged in (see
// WithPeers); without peers, Snapshot.
func (b *Board) Fleet(ctx context.Context) State {
	st := b.Snapshot()
	if b.fleet == nil {
		return st
	}
	st.Scope = ScopeFleet
	now := b.now()
	// The fetches outlive a request that goes away (each is bounded by PeerTimeout): their
	// answers serve the next one.
	peers, err := b.fleet.refresh(context.WithoutCancel(ctx), b.worker, now)
	b.fleet.mu.Lock()
	defer b.fleet.mu.Unlock()
	if b.fleet.history == nil {
		b.fleet.history = map[string][]sample{}
	}
	for i := range st.Mappings {
		b.fleet.merge(&st.Mappings[i], b.worker, peers, err, now)
	}
	return st
}

// merge adds the peers' shards to v, this worker's view of a mapping: a shard a worker reads is
// shown as that worker shows it; one that no worker that answered reads, while a worker did not
// answer, is marked Unreachable. f.mu is held.
func (f *fleet) merge(v *MappingView, self string, peers []*peerState, listErr error, now time.Time) {
	v.Workers = append(v.Workers, WorkerView{ID: self, Status: WorkerSelf})
	byID := make(map[string]int, len(v.Shards))
	for i, s := range v.Shards {
		byID[s.ShardID] = i
	}
	silent := listErr != nil
	if silent {
		v.Workers = append(v.Workers, WorkerView{ID: "(the workers' listing)", Status: WorkerUnreachable, Error: listErr.Error()})
	}
	for _, p := range peers {
		wv := WorkerView{ID: p.ID, Addr: p.Addr, Status: WorkerOK, LastAnswer: stamp(p.lastAnswer, time.Millisecond)}
		switch {
		case p.Addr == "":
			wv.Status, silent = WorkerNoAddr, true
		case p.err != nil:
			wv.Status, wv.Error, silent = WorkerUnreachable, p.err.Error(), true
		}
		v.Workers = append(v.Workers, wv)
		if p.err != nil || p.state == nil {
			continue
		}
		pm := matching(p.state.Mappings, v)
		if pm == nil {
			continue
		}
		v.Rewind = laterRewind(v.Rewind, pm.Rewind)
		for _, s := range pm.Shards {
			if s.Owner == "" {
				continue // not read there: this worker's view stands
			}
			key := v.UUID + "\x00" + v.Function + "\x00" + v.Stream + "\x00" + s.ShardID
			if s.IteratorAgeMillis != nil {
				f.history[key] = addSample(f.history[key], now, *s.IteratorAgeMillis)
			}
			s.ages = f.history[key]
			if i, ok := byID[s.ShardID]; ok {
				if s.Parents == nil {
					s.Parents = v.Shards[i].Parents
				}
				v.Shards[i] = s
			} else {
				byID[s.ShardID] = len(v.Shards)
				v.Shards = append(v.Shards, s)
			}
		}
	}
	counts := map[string]int{}
	for i := range v.Shards {
		s := &v.Shards[i]
		counts[s.Owner]++
		if silent && s.Owner == "" && (s.State == StateReleased || s.State == StatePending) && parentsDone(v.Shards, byID, s.Parents) {
			s.Unreachable = true
		}
	}
	for i := range v.Workers {
		v.Workers[i].Shards = counts[v.Workers[i].ID]
	}
	v.finish()
}

// laterRewind is the later of two workers' views of the mapping's latest rewind: the higher
// revision, or of the same one the view that saw it end.
func laterRewind(a, b *RewindView) *RewindView {
	switch {
	case a == nil:
		return b
	case b == nil || a.Revision > b.Revision:
		return a
	case b.Revision > a.Revision || (a.InProgress && !b.InProgress):
		return b
	}
	return a
}

// matching is the mapping of ms that is v's: the same UUID, or the same function and stream.
func matching(ms []MappingView, v *MappingView) *MappingView {
	for i := range ms {
		m := &ms[i]
		if v.UUID != "" && m.UUID == v.UUID || (v.UUID == "" || m.UUID == "") && m.Function == v.Function && m.Stream == v.Stream {
			return m
		}
	}
	return nil
}

// parentsDone: every parent is finished, or unknown (trimmed): the shard is to be read.
func parentsDone(shards []ShardView, byID map[string]int, parents []string) bool {
	for _, p := range parents {
		if i, ok := byID[p]; ok && shards[i].State != StateFinished {
			return false
		}
	}
	return true
}
