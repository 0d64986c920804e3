package poller

import (
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesis-esm/esm/source"
)

// splitListing: P split into A and B; A and B merged into M. Q unrelated.
func splitListing() []source.Shard {
	sh := func(id, p, ap, lo, hi string) source.Shard {
		s := source.Shard{ID: id, StartingSequenceNumber: lo, EndingSequenceNumber: hi, Closed: hi != ""}
		for _, parent := range []string{p, ap} {
			if parent != "" {
				s.Parents = append(s.Parents, parent)
			}
		}
		return s
	}
	return []source.Shard{sh("P", "", "", "100", "199"), sh("A", "P", "", "200", "299"), sh("B", "P", "", "300", "399"),
		sh("M", "A", "B", "400", ""), sh("Q", "", "", "500", "")}
}

func TestRewindRequestValidate(t *testing.T) {
	now := time.Date(2026, 12, 7, 20, 0, 0, 0, time.UTC)
	hour := now.Add(-time.Hour)
	for _, tc := range []struct {
		name  string
		q     RewindRequest
		field string // "" valid
		says  string
	}{
		{"every shard an hour back", RewindRequest{Timestamp: hour}, "", ""},
		{"window", RewindRequest{Timestamp: hour, Until: now.Add(-time.Minute)}, "", ""},
		{"sequence", RewindRequest{Sequences: map[string]string{"A": "250"}}, "", ""},
		{"nothing", RewindRequest{}, "Timestamp", "needs a time"},
		{"both", RewindRequest{Timestamp: hour, Sequences: map[string]string{"A": "250"}}, "Sequences", "not both"},
		{"future", RewindRequest{Timestamp: now.Add(time.Minute)}, "Timestamp", "in the future"},
		{"window end in the future", RewindRequest{Timestamp: hour, Until: now.Add(time.Minute)}, "Until", "in the future"},
		{"window backwards", RewindRequest{Timestamp: hour, Until: hour.Add(-time.Second)}, "Until", "not after its start"},
		{"empty window", RewindRequest{Timestamp: hour, Until: hour}, "Until", "not after its start"},
		{"unknown shard", RewindRequest{Timestamp: hour, Shards: []string{"Z"}}, "Shards", "shard Z is not a shard"},
		{"unknown shard of a sequence", RewindRequest{Sequences: map[string]string{"Z": "1"}}, "Sequences", "shard Z is not"},
		{"sequence of another shard", RewindRequest{Sequences: map[string]string{"A": "350"}}, "Sequences", "of another shard"},
		{"sequence before the shard", RewindRequest{Sequences: map[string]string{"A": "150"}}, "Sequences", "of another shard"},
		{"not a number", RewindRequest{Sequences: map[string]string{"A": "x"}}, "Sequences", "not a sequence number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.q.Validate(splitListing(), now)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Field != tc.field || !strings.Contains(ve.Message, tc.says) {
				t.Fatalf("got %v, want a %s error saying %q", err, tc.field, tc.says)
			}
		})
	}
}

func TestPlanRewindLineage(t *testing.T) {
	at := time.Date(2026, 12, 7, 19, 0, 0, 0, time.UTC)
	stored := map[string]ShardProgress{
		"P": {Finished: true, Checkpoint: "190"},
		"A": {Finished: true, Checkpoint: "290"},
		"B": {Checkpoint: "350"},
		"M": {},
		"Q": {Checkpoint: "550", Start: TrimHorizon},
	}
	plan := PlanRewind(RewindRequest{Shards: []string{"P"}, Timestamp: at}, splitListing(), stored, 3)
	if !reflect.DeepEqual(plan.Rewound, []string{"P"}) || !reflect.DeepEqual(plan.Reset, []string{"A", "B", "M"}) {
		t.Fatalf("rewound %v reset %v; want P, and its descendants A B M", plan.Rewound, plan.Reset)
	}
	for id, pr := range plan.Progress {
		if pr.Finished || pr.Checkpoint != "" || pr.Rewind == nil || !pr.Rewind.Timestamp.Equal(at) || pr.Rewind.Revision != 3 {
			t.Errorf("%s: %+v; want unfinished, no checkpoint, at %v", id, pr, at)
		}
	}
	if _, ok := plan.Progress["Q"]; ok {
		t.Error("Q changed: not named and no descendant of a named shard")
	}
	// Every shard: all of them, none a reset.
	all := PlanRewind(RewindRequest{Timestamp: at}, splitListing(), stored, 1)
	if len(all.Rewound) != 5 || len(all.Reset) != 0 {
		t.Fatalf("every shard: rewound %v reset %v", all.Rewound, all.Reset)
	}
	// A window keeps what each shard had handled.
	win := PlanRewind(RewindRequest{Shards: []string{"P"}, Timestamp: at, Until: at.Add(time.Hour)}, splitListing(), stored, 4)
	if w := win.Progress["P"].Rewind; !w.SkipAll {
		t.Errorf("P was finished: its replay skips every record after the window; got %+v", w)
	}
	if w := win.Progress["B"].Rewind; w.Skip != "350" || w.SkipAll {
		t.Errorf("B had handled up to 350; got %+v", w)
	}
	if w := win.Progress["M"].Rewind; w.Skip != "" || w.SkipAll {
		t.Errorf("M had handled nothing; got %+v", w)
	}
	// A sequence number: that shard at that record, its descendants from their first record.
	seq := PlanRewind(RewindRequest{Sequences: map[string]string{"A": "250"}}, splitListing(), stored, 5)
	if p := seq.Progress["A"]; p.Rewind.Sequence != "250" || resumePosition("", p, time.Time{}).kind != source.AtSequenceNumber {
		t.Errorf("A: %+v", p.Rewind)
	}
	if p := seq.Progress["M"]; resumePosition("", p, time.Time{}).kind != source.TrimHorizon {
		t.Errorf("M opens at %v, want its first record", resumePosition("", p, time.Time{}))
	}
}

func TestReplayCut(t *testing.T) {
	until := time.Date(2026, 12, 7, 19, 0, 0, 0, time.UTC)
	rec := func(seq string, at time.Time) source.Record {
		return source.Record{SequenceNumber: seq, ArrivalTime: at}
	}
	before, after := until.Add(-time.Second), until.Add(time.Second)
	seqs := func(rs []source.Record) (out []string) {
		for _, r := range rs {
			out = append(out, r.SequenceNumber)
		}
		return out
	}
	r := &reader{p: &Poller{log: slog.New(slog.DiscardHandler)}, replay: &Rewind{Until: until, Skip: "13"}} // as run sets it from the progress
	// In the window: everything, the handled ones too.
	if got := seqs(r.replayCut([]source.Record{rec("10", before), rec("11", before)})); !reflect.DeepEqual(got, []string{"10", "11"}) {
		t.Fatalf("window: %v", got)
	}
	// The window ends at 12: 12 and 13 were handled before the rewind, 14 was not.
	if got := seqs(r.replayCut([]source.Record{rec("12", after), rec("13", after), rec("14", after), rec("15", after)})); !reflect.DeepEqual(got, []string{"14", "15"}) {
		t.Fatalf("after the window: %v, want 14 15", got)
	}
	if got := seqs(r.replayCut([]source.Record{rec("9", after)})); !reflect.DeepEqual(got, []string{"9"}) {
		t.Fatalf("after the replay: %v, want everything", got)
	}
	// A finished shard's replay skips to its end.
	f := &reader{p: r.p, replay: &Rewind{Until: until, SkipAll: true}}
	if got := f.replayCut([]source.Record{rec("1", before), rec("2", after), rec("3", after)}); len(got) != 1 {
		t.Fatalf("finished shard: %v, want only the window's record", seqs(got))
	}
	// The rewind is forgotten once a checkpoint passes what was handled before it.
	pr := ShardProgress{Checkpoint: "13", Rewind: &Rewind{Until: until, Skip: "13"}}
	if endReplay(pr).Rewind == nil {
		t.Error("forgotten at the last handled record: a restart would invoke the handled ones again")
	}
	if pr.Checkpoint = "14"; endReplay(pr).Rewind != nil {
		t.Error("kept past what was handled")
	}
	if move := (ShardProgress{Checkpoint: "5", Rewind: &Rewind{Timestamp: until}}); endReplay(move).Rewind != nil {
		t.Error("a move kept after its first checkpoint")
	}
}

// The read path cuts a replay window without the slots' progress lock: a checkpoint holds that
// lock through its write's retries (a lease table down for a while), and a read waiting for it
// there held the idle poller's entry lock and stopped every idle shard's polls.
func TestReplayCutWhileACheckpointRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		until := time.Date(2026, 12, 7, 19, 0, 0, 0, time.UTC)
		r := &reader{p: &Poller{log: slog.New(slog.DiscardHandler)}, slots: &slots{ck: make(chan struct{}, 1)}}
		r.progress = ShardProgress{Rewind: &Rewind{Until: until, Skip: "13"}}
		r.replay = r.progress.Rewind // as run sets it from the progress
		r.slots.lockProgress()       // a checkpoint write retrying
		var got []source.Record
		done := make(chan struct{})
		go func() {
			defer close(done)
			got = r.replayCut([]source.Record{{SequenceNumber: "10", ArrivalTime: until.Add(-time.Second)}})
		}()
		synctest.Wait()
		select {
		case <-done:
		default:
			r.slots.unlockProgress()
			<-done
			t.Fatal("the read waited for the checkpoint's lock")
		}
		r.slots.unlockProgress()
		if len(got) != 1 {
			t.Fatalf("cut %d records, want the window's one", len(got))
		}
	})
}
