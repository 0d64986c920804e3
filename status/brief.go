package status

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Brief returns v cut to about rows lines of text, for a terminal (esm status --watch): each
// mapping's header (its summary and blocked shards) and then its top shards, one line each:
// blocked first, then by iterator age, oldest first; a last line counts the shards left out. Its
// JSON is v's.
func Brief(v View, rows int) View { return brief{v, rows} }

type brief struct {
	View
	rows int
}

func (b brief) Render(w io.Writer) error {
	var out strings.Builder
	switch v := b.View.(type) {
	case Report:
		out.WriteString(v.brief(b.rows))
	case Mappings:
		if len(v.List) == 0 {
			return v.Render(w)
		}
		each := max(b.rows/len(v.List), 8)
		for _, r := range v.List {
			fmt.Fprintf(&out, "mapping   %s\n%s\n", cmp.Or(r.UUID, "(esm run's)"), r.brief(each-1))
		}
	default:
		return b.View.Render(w)
	}
	_, err := io.WriteString(w, out.String())
	return err
}

// brief is the report's header and its top shards, in about rows lines.
func (r Report) brief(rows int) string {
	head := r.header()
	left := rows - strings.Count(head, "\n") - 2 // a blank line, and the count of the rest
	top := slices.Clone(r.Shards)
	slices.SortStableFunc(top, func(a, b Shard) int {
		if c := cmp.Compare(briefRank(a), briefRank(b)); c != 0 {
			return c
		}
		return cmp.Compare(ageOf(b), ageOf(a))
	})
	var b strings.Builder
	b.WriteString(head + "\n")
	n := min(max(left, 1), len(top))
	for _, s := range top[:n] {
		b.WriteString(s.line("") + "\n")
	}
	if rest := len(top) - n; rest > 0 {
		fmt.Fprintf(&b, "… and %d more shards (esm status without --watch lists them all)\n", rest)
	}
	return b.String()
}

// briefRank orders shards for Brief: blocked, reading, pending, the others, finished.
func briefRank(s Shard) int {
	switch s.State {
	case "blocked":
		return 0
	case Reading:
		return 1
	case Pending:
		return 2
	case Finished:
		return 4
	}
	return 3
}

func ageOf(s Shard) float64 {
	if s.IteratorAgeMillis == nil {
		return -1
	}
	return *s.IteratorAgeMillis
}
