package status

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/kinesis-esm/esm/metrics/live"
)

// Render draws the report as text: a header (stream, function, where the progress came from),
// then the shards as a lineage tree, each child under its first parent (a merge's second parent
// is named on the child's line).
func (r Report) Render(w io.Writer) error {
	_, err := io.WriteString(w, r.text())
	return err
}

// Render draws every mapping, each as Report.Render does under a line naming its UUID; with none,
// a line saying that the metrics at MetricsAddr name no mapping.
func (m Mappings) Render(w io.Writer) error {
	var b strings.Builder
	for _, r := range m.List {
		fmt.Fprintf(&b, "mapping   %s\n%s\n", cmp.Or(r.UUID, "(esm run's)"), r.text())
	}
	if len(m.List) == 0 {
		b.WriteString("no mapping in the metrics at " + m.MetricsAddr + " (is it an esm serve, and has a mapping started?)\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// MarshalJSON writes the list of mappings (null when there is none).
func (m Mappings) MarshalJSON() ([]byte, error) { return json.Marshal(m.List) }

// View is what Write and Redraw show: a Report or Mappings.
type View interface {
	Render(w io.Writer) error
}

var (
	_ View = Report{}
	_ View = Mappings{}
)

// Write writes v to w: as indented JSON with asJSON, else rendered as text.
func Write(w io.Writer, v View, asJSON bool) error {
	if !asJSON {
		return v.Render(w)
	}
	if r, ok := v.(Report); ok { // one built by hand has none yet
		r.Summary = r.summarize()
		v = r
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// Redraw writes v as one frame of a terminal view redrawn in place: it homes the cursor and
// clears the screen, renders v, and ends with the time of the frame, now.
func Redraw(w io.Writer, v View, now time.Time) error {
	var b strings.Builder
	b.WriteString("\x1b[H\x1b[2J")
	if err := v.Render(&b); err != nil {
		return err
	}
	b.WriteString("\n" + now.Format(time.TimeOnly) + "  (Ctrl-C to stop)\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// header is the report's first lines: the mapping, where its progress came from, the workers
// read, the summary and the blocked shards with their errors.
func (r Report) header() string {
	var b strings.Builder
	fmt.Fprintf(&b, "stream    %s\nfunction  %s\nstate     %s\n", r.Stream, r.Function, r.StateDir)
	for i, w := range r.Workers {
		label := "          "
		if i == 0 {
			label = "workers   "
		}
		line := cmp.Or(w.ID, w.Addr)
		if w.ID != "" && w.Addr != "" {
			line += " at " + w.Addr
		}
		if w.Error != "" {
			line += ": not read: " + clipLine(w.Error, 160)
		}
		b.WriteString(label + line + "\n")
	}
	sum := r.summarize()
	fmt.Fprintf(&b, "shards    %d", sum.Shards)
	var parts []string
	for _, st := range []string{"blocked", Reading, Pending, "released", Finished} {
		if n := sum.ByState[st]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, st))
		}
	}
	for st, n := range sum.ByState { // states of newer versions
		if !slices.Contains([]string{"blocked", Reading, Pending, "released", Finished}, st) {
			parts = append(parts, fmt.Sprintf("%d %s", n, st))
		}
	}
	if len(parts) > 0 {
		b.WriteString(": " + strings.Join(parts, ", "))
	}
	if sum.IteratorAgeMillis != nil {
		b.WriteString("; iterator age " + millis(*sum.IteratorAgeMillis))
	}
	b.WriteString("\n")
	if w := r.Rewind; w != nil {
		b.WriteString("rewind    " + rewindText(w) + "\n")
	}
	byID := map[string]Shard{}
	for _, s := range r.Shards {
		byID[s.ShardID] = s
	}
	for i, id := range sum.Blocked {
		label := "          "
		if i == 0 {
			label = "blocked   "
		}
		b.WriteString(label + byID[id].blockedText() + "\n")
	}
	return b.String()
}

// blockedText says which worker holds a blocked shard, since when, and why.
func (s Shard) blockedText() string {
	line := s.ShardID
	if s.Owner != "" {
		line += " on " + s.Owner
	}
	if s.BlockedSince != nil {
		line += " since " + s.BlockedSince.UTC().Format("2006-01-02 15:04:05Z")
	}
	if s.Attempts > 0 {
		line += fmt.Sprintf(" (%d attempts)", s.Attempts)
	}
	if s.RetryingFirst != "" {
		line += " on batch " + s.RetryingFirst + ".." + s.RetryingLast
	}
	if s.LastError != "" {
		line += ": " + clipLine(s.LastError, 200)
		if s.LastErrorAt != nil {
			line += " (at " + s.LastErrorAt.UTC().Format(time.TimeOnly) + ")"
		}
	}
	return line
}

// rewindText says what the mapping's latest rewind asked, by whom, and where it stands.
func rewindText(w *live.RewindView) string {
	line := fmt.Sprintf("revision %d %s", w.Revision, w.State)
	if w.InProgress {
		line = fmt.Sprintf("IN PROGRESS (revision %d %s, the workers invoke nothing until it is applied)", w.Revision, w.State)
	} else if w.DoneAt != nil {
		line += " at " + w.DoneAt.UTC().Format(time.DateTime)
	}
	line += ": " + w.Request.String()
	if w.By != "" {
		line += ", asked by " + w.By
	}
	if w.RequestedAt != nil {
		line += " at " + w.RequestedAt.UTC().Format(time.DateTime)
	}
	if w.Report != "" {
		line += "; " + clipLine(w.Report, 200)
	}
	return line
}

// skipText says which batch an operator skipped last, where it went and when.
func skipText(k *live.SkipView) string {
	where := "dropped"
	if k.Destination != "" {
		where = "sent to " + k.Destination
	}
	at := ""
	if k.At != nil {
		at = " at " + k.At.UTC().Format(time.TimeOnly)
	}
	return fmt.Sprintf("(last skip%s: batch %s..%s, %d records %s)", at, k.First, k.Last, k.Records, where)
}

// clipLine is text on one line, cut to n bytes.
func clipLine(text string, n int) string {
	text = strings.Join(strings.Fields(text), " ")
	if len(text) > n {
		return text[:n] + "…"
	}
	return text
}

// millis renders milliseconds as a duration, to the millisecond.
func millis(v float64) string {
	return time.Duration(v * float64(time.Millisecond)).Round(time.Millisecond).String()
}

func (r Report) text() string {
	var b strings.Builder
	b.WriteString(r.header() + "\n")
	byID := map[string]Shard{}
	children := map[string][]string{}
	for _, s := range r.Shards {
		byID[s.ShardID] = s
	}
	var roots []string
	for _, s := range r.Shards {
		if len(s.Parents) > 0 {
			if _, ok := byID[s.Parents[0]]; ok {
				children[s.Parents[0]] = append(children[s.Parents[0]], s.ShardID)
				continue
			}
		}
		roots = append(roots, s.ShardID)
	}
	var walk func(id, prefix string, last, root bool)
	walk = func(id, prefix string, last, root bool) {
		branch, next := "", prefix
		if !root {
			branch, next = "├─ ", prefix+"│  "
			if last {
				branch, next = "└─ ", prefix+"   "
			}
		}
		b.WriteString(byID[id].line(prefix+branch) + "\n")
		kids := children[id]
		for i, k := range kids {
			walk(k, next, i == len(kids)-1, false)
		}
	}
	for _, id := range roots {
		walk(id, "", true, true)
	}
	return b.String()
}

// line is the shard's line of the tree, after the tree's drawing (indent).
func (s Shard) line(indent string) string {
	line := fmt.Sprintf("%-44s %-9s", indent+s.ShardID, s.State)
	if s.Checkpoint != "" {
		line += " checkpoint " + s.Checkpoint
	} else if s.Start != "" && s.State != Finished {
		line += " starts at " + s.Start
	}
	if s.Owner != "" {
		line += " owner " + s.Owner
		if s.OwnerSilent {
			line += " (not answering)"
		}
	}
	if s.IteratorAgeMillis != nil {
		line += " iterator age " + millis(*s.IteratorAgeMillis)
	}
	if s.State == "blocked" && s.LastError != "" {
		line += " error: " + clipLine(s.LastError, 100)
	}
	if s.ReadBy != "" {
		line += " read by " + s.ReadBy
	}
	if s.SkipPending != "" {
		line += " (skip of batch " + s.SkipPending + " under way)"
	}
	if k := s.LastSkip; k != nil {
		line += " " + skipText(k)
	}
	if sub := s.Subscription; sub != nil {
		line += " (" + sub.text() + ")"
	}
	if len(s.Parents) > 1 {
		line += " (merged with " + s.Parents[1] + ")"
	}
	if s.Trimmed {
		line += " (trimmed from the stream)"
	}
	return strings.TrimRight(line, " ")
}

func (sub Subscription) text() string {
	var parts []string
	if sub.AgeSeconds != nil {
		parts = append(parts, "age "+seconds(*sub.AgeSeconds))
	}
	parts = append(parts, fmt.Sprintf("%g renewals", sub.Renewals), fmt.Sprintf("%g refused in use", sub.InUseRefusals))
	if sub.LastEventAgeSeconds != nil {
		parts = append(parts, "last event "+seconds(*sub.LastEventAgeSeconds)+" ago")
	}
	return strings.Join(parts, ", ")
}

// seconds renders a number of seconds as a duration, to the tenth of a second.
func seconds(v float64) string {
	return time.Duration(v * float64(time.Second)).Round(100 * time.Millisecond).String()
}

// Show writes the view read returns to w: as text, or as JSON with asJSON. With every > 0 it
// shows a new one every interval (text redrawn in place with Redraw, JSON one value after the
// other) until ctx ends, and then returns nil, also when ctx ends during a read. It blocks until
// then; the first error of read or of a write ends it.
func Show(ctx context.Context, w io.Writer, asJSON bool, every time.Duration, read func(context.Context) (View, error)) error {
	for {
		v, err := read(ctx)
		switch {
		case err != nil && every > 0 && ctx.Err() != nil: // interrupted while reading
			return nil
		case err != nil:
			return err
		case every > 0 && !asJSON:
			err = Redraw(w, v, time.Now())
		default:
			err = Write(w, v, asJSON)
		}
		if err != nil || every <= 0 {
			return err
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}
