package status

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"time"
)

// Render draws the report as text: a header (stream, function, where the progress came from),
// then the shards as a lineage tree, each child under its first parent (a merge's second parent
// is named on the child's line).
func (r Report) Render(w io.Writer) error {
	_, err := io.WriteString(w, r.text())
	return err
}

// RenderMappings draws every mapping Reader.All found, each as Report.Render does under a line
// naming its UUID; with none, a line saying that the metrics at metricsAddr name no mapping.
func RenderMappings(w io.Writer, metricsAddr string, reps []MappingReport) error {
	var b strings.Builder
	for _, m := range reps {
		fmt.Fprintf(&b, "mapping   %s\n%s\n", cmp.Or(m.UUID, "(esm run's)"), m.text())
	}
	if len(reps) == 0 {
		b.WriteString("no mapping in the metrics at " + metricsAddr + " (is it an esm serve, and has a mapping started?)\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (r Report) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "stream    %s\nfunction  %s\nstate     %s\n\n", r.Stream, r.Function, r.StateDir)
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
	}
	if s.IteratorAgeMillis != nil {
		line += fmt.Sprintf(" iterator age %s", time.Duration(*s.IteratorAgeMillis*float64(time.Millisecond)).Round(time.Millisecond))
	}
	if s.ReadBy != "" {
		line += " read by " + s.ReadBy
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
