package chaos

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Report writes a run's faults, figures and verdicts.
func (r *Result) Report(w io.Writer) {
	fmt.Fprintf(w, "seed %d (%s stream %s)\n", r.Seed, r.Source, r.Stream)
	fmt.Fprintf(w, "  reshards: %s\n", strings.Join(r.Reshards, "; "))
	fmt.Fprintf(w, "  faults: %s\n", formatCounts(r.Faults))
	fmt.Fprintf(w, "  records %d, deliveries %d, duplicates %d, invocations %d, child shards %d (%d parent→child pairs invoked), longest child wait %s\n",
		r.Stats.Records, r.Stats.Deliveries, r.Stats.Duplicates, r.Stats.Invocations, r.Stats.Children, r.Stats.ParentChildPairs,
		r.Stats.LongestChildWait.Round(time.Millisecond))
	for _, v := range r.Verdicts {
		status := "PASS"
		if !v.OK {
			status = "FAIL"
		}
		fmt.Fprintf(w, "  %s %s: %s\n", status, v.Name, v.Detail)
	}
}

func formatCounts(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// Summary adds up runs.
type Summary struct {
	Source                Source
	Seeds, Failed         int
	FailedSeeds           []uint64
	Faults, MidInvocation map[string]int
	Records, Duplicates   int
	Deliveries            int
	Children, Pairs       int // child shards, and parent→child pairs with invocations of both
	LongestChildWait      time.Duration
	LongestChildWaitSeed  uint64
	Violations            map[string]int // failed verdicts per invariant
}

// Add counts one run.
func (s *Summary) Add(r *Result) {
	if s.Faults == nil {
		s.Faults, s.MidInvocation, s.Violations = map[string]int{}, map[string]int{}, map[string]int{}
	}
	s.Seeds++
	if !r.OK() {
		s.Failed++
		s.FailedSeeds = append(s.FailedSeeds, r.Seed)
	}
	for k, v := range r.Faults {
		s.Faults[k] += v
	}
	for k, v := range r.Stats.MidInvocation {
		s.MidInvocation[k] += v
	}
	for _, v := range r.Verdicts {
		if !v.OK {
			s.Violations[v.Name]++
		}
	}
	s.Records += r.Stats.Records
	s.Deliveries += r.Stats.Deliveries
	s.Duplicates += r.Stats.Duplicates
	s.Children += r.Stats.Children
	s.Pairs += r.Stats.ParentChildPairs
	if r.Stats.LongestChildWait > s.LongestChildWait {
		s.LongestChildWait, s.LongestChildWaitSeed = r.Stats.LongestChildWait, r.Seed
	}
}

// Report writes the summary.
func (s *Summary) Report(w io.Writer) {
	fmt.Fprintf(w, "chaos (%s): %d seeds, %d failed %v\n", s.Source, s.Seeds, s.Failed, s.FailedSeeds)
	fmt.Fprintf(w, "  faults injected: %s\n", formatCounts(s.Faults))
	fmt.Fprintf(w, "  landed mid-invocation: %s\n", formatCounts(s.MidInvocation))
	fmt.Fprintf(w, "  records %d, deliveries %d, duplicates %d\n", s.Records, s.Deliveries, s.Duplicates)
	fmt.Fprintf(w, "  child shards %d, parent→child pairs invoked %d\n", s.Children, s.Pairs)
	fmt.Fprintf(w, "  longest child wait after its parents: %s (seed %d)\n", s.LongestChildWait.Round(time.Millisecond), s.LongestChildWaitSeed)
	if len(s.Violations) > 0 {
		fmt.Fprintf(w, "  seeds failing each invariant: %s\n", formatCounts(s.Violations))
	}
}
