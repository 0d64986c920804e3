package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/runner"
)

// Exit codes of esm run --until-caught-up, beside 0 (caught up, no record failed), 1 (a runtime
// failure) and 2 (invalid configuration or usage).
const (
	// ExitDelivered: caught up, and records went to the on-failure destination (none dropped).
	ExitDelivered = 3
	// ExitDropped: caught up, and records were dropped (discarded without reaching a destination).
	ExitDropped = 4
	// ExitNotCaughtUp: stopped (a signal) before every shard was caught up.
	ExitNotCaughtUp = 5
)

// CaughtUpFlags are esm run's flags for a run that ends on its own once the mapping is caught up.
type CaughtUpFlags struct {
	UntilCaughtUp bool          `name:"until-caught-up" help:"Read until every shard of the mapping is caught up (its tips when the run starts; with --idle-for, its tips once the stream was idle that long), then stop cleanly and print a summary. Exit 0 when no record went to the on-failure destination and none was dropped; 3 when records went to the destination; 4 when records were dropped; 5 when stopped by a signal before caught up." env:"ESM_UNTIL_CAUGHT_UP"`
	IdleFor       time.Duration `name:"idle-for" help:"With --until-caught-up: end at the tips once no read of any shard returned a record for this long (e.g. 5s), instead of at the tips of the start." env:"ESM_IDLE_FOR" placeholder:"DURATION"`
	PerShard      bool          `name:"per-shard" help:"With --until-caught-up: the summary counts each shard too." env:"ESM_PER_SHARD"`
	JSON          bool          `name:"json" help:"With --until-caught-up: print the summary as one JSON object." env:"ESM_JSON"`
}

// Check validates the flags against the run's configuration c: every error is a usage error that
// says what to change.
func (f CaughtUpFlags) Check(c *Config) error {
	if !f.UntilCaughtUp {
		for name, given := range map[string]bool{"--idle-for": f.IdleFor != 0, "--per-shard": f.PerShard, "--json": f.JSON} {
			if given {
				return Usage(fmt.Errorf("%s goes with --until-caught-up: add --until-caught-up, or drop %s", name, name))
			}
		}
		return nil
	}
	m := &c.Run
	switch {
	case f.IdleFor < 0:
		return Usage(fmt.Errorf("--idle-for %s: must be positive (e.g. 5s), or left out to end at the tips of the start", f.IdleFor))
	case m.Config.Disabled:
		return Usage(errors.New("--until-caught-up: the mapping is disabled (Enabled: false or --no-enabled), so nothing would be read: enable it, or drop --until-caught-up"))
	case f.IdleFor > 0 && readsThroughConsumer(m):
		return Usage(errors.New("--idle-for: not supported when reading through an enhanced fan-out consumer (a caught-up subscription is not read again until records come); use --until-caught-up without --idle-for"))
	}
	return nil
}

// readsThroughConsumer reports whether the mapping reads through an enhanced fan-out consumer.
func readsThroughConsumer(m *runner.Mapping) bool {
	return m.Source.Consumer != "" || strings.Contains(m.Source.Stream, "/consumer/")
}

// Summary counts what a run did, as the mapping's Observer: in total and per shard.
type Summary struct {
	poller.NopObserver
	mu      sync.Mutex
	shards  map[string]*Counts
	reached atomic.Bool
}

// Counts are a run's (or a shard's) numbers.
type Counts struct {
	Records           int `json:"records"`           // read from the stream
	FilteredOut       int `json:"filteredOut"`       // dropped by FilterCriteria (not failures)
	Invocations       int `json:"invocations"`       // that reached the function
	FailedInvocations int `json:"failedInvocations"` // function errors, partial and invalid responses
	Delivered         int `json:"deliveredToDestination"`
	DeliveryFailures  int `json:"destinationDeliveryFailures"` // failed sends to the destination
	Dropped           int `json:"dropped"`                     // discarded without reaching a destination
}

func (c *Counts) add(o Counts) {
	c.Records += o.Records
	c.FilteredOut += o.FilteredOut
	c.Invocations += o.Invocations
	c.FailedInvocations += o.FailedInvocations
	c.Delivered += o.Delivered
	c.DeliveryFailures += o.DeliveryFailures
	c.Dropped += o.Dropped
}

// NewSummary returns an empty Summary.
func NewSummary() *Summary { return &Summary{shards: map[string]*Counts{}} }

func (s *Summary) count(shardID string, f func(*Counts)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.shards[shardID]
	if c == nil {
		c = &Counts{}
		s.shards[shardID] = c
	}
	f(c)
}

func (s *Summary) RecordsPolled(id string, n int) { s.count(id, func(c *Counts) { c.Records += n }) }
func (s *Summary) RecordsFilteredOut(id string, n int) {
	s.count(id, func(c *Counts) { c.FilteredOut += n })
}
func (s *Summary) BatchInvoked(id string, _ int, _ time.Duration, failed bool) {
	s.count(id, func(c *Counts) {
		c.Invocations++
		if failed {
			c.FailedInvocations++
		}
	})
}
func (s *Summary) RecordsDropped(id string, n int) { s.count(id, func(c *Counts) { c.Dropped += n }) }
func (s *Summary) RecordsDelivered(id string, n int) {
	s.count(id, func(c *Counts) { c.Delivered += n })
}
func (s *Summary) DestinationDeliveryFailed(id string) {
	s.count(id, func(c *Counts) { c.DeliveryFailures++ })
}
func (s *Summary) ShardState(id, _ string) { s.count(id, func(*Counts) {}) }

// Reached is the poller's UntilCaughtUp.Reached: every shard was caught up.
func (s *Summary) Reached() { s.reached.Store(true) }

// summaryJSON is the summary as --json prints it.
type summaryJSON struct {
	CaughtUp bool `json:"caughtUp"`
	Counts
	Shards          int                `json:"shards"`
	DurationSeconds float64            `json:"durationSeconds"`
	PerShard        map[string]*Counts `json:"perShard,omitempty"`
}

// totals is the run's counts and its shards' (a copy).
func (s *Summary) totals() (Counts, map[string]*Counts) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var t Counts
	per := make(map[string]*Counts, len(s.shards))
	for id, c := range s.shards {
		t.add(*c)
		cc := *c
		per[id] = &cc
	}
	return t, per
}

// Print writes the summary: one JSON object, or lines of text; with perShard each shard's too.
func (s *Summary) Print(w io.Writer, took time.Duration, asJSON, perShard bool) error {
	t, per := s.totals()
	if asJSON {
		out := summaryJSON{CaughtUp: s.reached.Load(), Counts: t, Shards: len(per), DurationSeconds: took.Seconds()}
		if perShard {
			out.PerShard = per
		}
		b, err := json.Marshal(out)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	head := "caught up"
	if !s.reached.Load() {
		head = "stopped before caught up"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d shards in %s: %s\n", head, len(per), took.Round(time.Millisecond), t.text())
	if perShard {
		for _, id := range slices.Sorted(maps.Keys(per)) {
			fmt.Fprintf(&b, "  %s: %s\n", id, per[id].text())
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (c Counts) text() string {
	return fmt.Sprintf("%d records (%d filtered out), %d invocations (%d failed), %d records to the on-failure destination (%d failed sends), %d dropped",
		c.Records, c.FilteredOut, c.Invocations, c.FailedInvocations, c.Delivered, c.DeliveryFailures, c.Dropped)
}

// Verdict is the outcome of the run as an error: nil when caught up with nothing delivered to the
// destination or dropped; else an error whose exit code (ExitCode) says which.
func (s *Summary) Verdict() error {
	t, _ := s.totals()
	switch {
	case !s.reached.Load():
		return &exitError{code: ExitNotCaughtUp, err: errors.New("stopped before every shard was caught up")}
	case t.Dropped > 0:
		return &exitError{code: ExitDropped, err: fmt.Errorf("caught up, but %d records were dropped (and %d went to the on-failure destination)", t.Dropped, t.Delivered)}
	case t.Delivered > 0:
		return &exitError{code: ExitDelivered, err: fmt.Errorf("caught up, but %d records went to the on-failure destination", t.Delivered)}
	}
	return nil
}

// exitError is an error with its own exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// RunUntilCaughtUp is Run with f: when f.UntilCaughtUp, the mapping stops once caught up, the
// summary is printed on stdout and the verdict returned (Summary.Verdict).
func RunUntilCaughtUp(ctx context.Context, c *Config, f CaughtUpFlags, fn any, stdout io.Writer) error {
	if !f.UntilCaughtUp {
		if err := f.Check(c); err != nil {
			return err
		}
		return Run(ctx, c, fn, stdout)
	}
	s := NewSummary()
	c.Run.Hooks.UntilCaughtUp = &poller.UntilCaughtUp{Idle: f.IdleFor, Reached: s.Reached}
	c.Run.Hooks.Observer = s
	if err := f.Check(c); err != nil {
		return err
	}
	start := time.Now()
	if err := Run(ctx, c, fn, stdout); err != nil {
		return err
	}
	if err := s.Print(stdout, time.Since(start), f.JSON, f.PerShard); err != nil {
		return err
	}
	return s.Verdict()
}
