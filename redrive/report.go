package redrive

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Reporter shows a redrive's progress: Begin once (total is how many messages, -1 when the source
// cannot tell), Result after each message, End once with the summary.
type Reporter interface {
	Begin(total int)
	Result(Result)
	End(Summary)
}

type nopReporter struct{}

func (nopReporter) Begin(int)     {}
func (nopReporter) Result(Result) {}
func (nopReporter) End(Summary)   {}

// Line renders one result as a report line: the outcome, the message, its range, and why.
func Line(r Result) string {
	m := r.Message
	s := fmt.Sprintf("%-13s  %s", r.Outcome, r.Item)
	if m.ShardID != "" {
		s += fmt.Sprintf("  %s %s-%s", m.ShardID, m.StartSequenceNumber, m.EndSequenceNumber)
	}
	switch r.Outcome {
	case Redriven, Exported, WouldRedrive:
		s += fmt.Sprintf("  %s in %s", plural(r.Records, "record"), plural(r.Invocations, "invocation"))
	}
	if r.Detail != "" {
		s += ": " + r.Detail
	}
	return s
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// lineReporter writes one line per message and the summary: for output that is not a terminal.
type lineReporter struct{ w io.Writer }

// NewLineReporter reports to w in plain lines: one per message, then the summary.
func NewLineReporter(w io.Writer) Reporter { return lineReporter{w} }

func (l lineReporter) Begin(int)       {}
func (l lineReporter) Result(r Result) { fmt.Fprintln(l.w, Line(r)) }
func (l lineReporter) End(s Summary)   { fmt.Fprintln(l.w, s) }

// NewReporter reports to w as a person reads it: with NewBarReporter when w is a terminal, with
// NewLineReporter otherwise (a file, a pipe).
func NewReporter(w io.Writer) Reporter {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return NewBarReporter(w)
	}
	return NewLineReporter(w)
}

// barReporter draws a progress bar on a terminal, with the lines of the messages that were not
// redriven above it, and the summary at the end.
type barReporter struct {
	w   io.Writer
	bar *progressbar.ProgressBar
}

// NewBarReporter reports to the terminal w with a progress bar; only the messages that were not
// redriven (or exported) get a line of their own.
func NewBarReporter(w io.Writer) Reporter { return &barReporter{w: w} }

func (b *barReporter) Begin(total int) {
	b.bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(b.w), progressbar.OptionSetDescription("redrive"),
		progressbar.OptionShowCount(), progressbar.OptionSetWidth(30), progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(), progressbar.OptionSetItsString("messages"), progressbar.OptionShowIts(),
		progressbar.OptionSpinnerType(14))
}

func (b *barReporter) Result(r Result) {
	switch r.Outcome {
	case Redriven, Exported, WouldRedrive:
	default:
		_ = b.bar.Clear()
		fmt.Fprintln(b.w, Line(r))
	}
	_ = b.bar.Add(1)
}

func (b *barReporter) End(s Summary) {
	_ = b.bar.Finish()
	_ = b.bar.Clear()
	fmt.Fprintln(b.w, s)
}
