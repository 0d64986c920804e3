package chaos

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

func inv(worker, shard string, from, to float64, data ...string) Invocation {
	i := Invocation{Worker: worker, Shard: shard, Start: at(from), End: at(to)}
	for _, d := range data {
		key, _, _ := strings.Cut(d, ":")
		i.Records = append(i.Records, Record{Key: key, Data: d})
	}
	return i
}

// goodRun is a run that keeps every invariant: shard p split into c1 and c2, which merged into m.
// Keys a and b; a hashes to c1, b to c2.
func goodRun() Input {
	return Input{
		Invocations: []Invocation{
			inv("w1", "p", 0, 1, "a:0", "b:0"),
			inv("w1", "p", 1, 2, "a:1", "b:1"),
			inv("w2", "p", 2, 2.5, "a:1", "b:1"), // a duplicate after a takeover, still before the children
			inv("w2", "c1", 3, 4, "a:2"),
			inv("w3", "c2", 3, 3.5, "b:2"),
			inv("w3", "c2", 3.5, 4.5, "b:3"),
			inv("w1", "m", 5, 6, "a:3", "b:4"),
		},
		Produced: Produced{Written: map[string]int{"a": 4, "b": 5},
			FirstPut: map[string]time.Time{"p": at(0), "c1": at(1.5), "c2": at(1.5), "m": at(4)}},
		Lineage:      map[string][]string{"p": nil, "c1": {"p"}, "c2": {"p"}, "m": {"c1", "c2"}},
		Events:       []FaultEvent{{Kind: "sigstop", Worker: "w3", From: at(3.7), To: at(8)}, {Kind: "sigkill", Worker: "w2", From: at(9), To: at(9)}},
		Exits:        []Exit{{Worker: "w1", Cause: "sigterm", Code: 0}, {Worker: "w2", Cause: "sigkill", Code: -1}},
		MaxChildWait: 15 * time.Second,
		Resharded:    true,
		End:          at(10),
	}
}

func verdictsByName(vs []Verdict) map[string]Verdict {
	out := map[string]Verdict{}
	for _, v := range vs {
		out[strings.SplitN(v.Name, " ", 2)[0]] = v
	}
	return out
}

func TestJudgePassesAGoodRun(t *testing.T) {
	vs, st := Judge(goodRun())
	for _, v := range vs {
		if !v.OK {
			t.Errorf("%s: %s", v.Name, v.Detail)
		}
	}
	if st.Records != 9 || st.Deliveries != 11 || st.Duplicates != 2 {
		t.Errorf("records %d, deliveries %d, duplicates %d; want 9, 11, 2", st.Records, st.Deliveries, st.Duplicates)
	}
	if st.LongestChildWait != 500*time.Millisecond {
		t.Errorf("longest child wait %s (%s), want 500ms", st.LongestChildWait, st.LongestChild)
	}
	if st.MidInvocation["sigstop"] != 1 || st.MidInvocation["sigkill"] != 0 {
		t.Errorf("mid-invocation %v, want the sigstop only", st.MidInvocation)
	}
}

// TestJudgeCatches breaks each invariant in several ways; the judge must fail that invariant
// (named by its verdict's first word) and no other.
func TestJudgeCatches(t *testing.T) {
	cases := []struct {
		name, verdict string
		breakIt       func(*Input)
	}{
		{"a record never delivered", "every", func(in *Input) { in.Produced.Written["b"] = 6 }},
		{"a record only in an invocation that did not end", "every", func(in *Input) {
			in.Invocations[6].Records = in.Invocations[6].Records[:1] // b:4 dropped
		}},
		{"nothing produced", "every", func(in *Input) { in.Produced.Written = map[string]int{} }},
		{"two records of a key swapped in one invocation", "order", func(in *Input) {
			r := in.Invocations[0].Records
			in.Invocations[0].Records = []Record{r[0], {Key: "b", Data: "b:1"}}
			in.Invocations[1].Records = []Record{{Key: "a", Data: "a:1"}, {Key: "b", Data: "b:0"}}
		}},
		{"a key's later record first delivered on another shard", "order", func(in *Input) {
			in.Invocations[5].Records = []Record{{Key: "b", Data: "b:4"}}
			in.Invocations[6].Records = []Record{{Key: "a", Data: "a:3"}, {Key: "b", Data: "b:3"}}
		}},
		{"a child invoked before its parent's last invocation ended", "lineage", func(in *Input) {
			in.Invocations[3] = inv("w2", "c1", 2.4, 4, "a:2")
		}},
		{"a finished parent read again after its child started", "lineage", func(in *Input) {
			in.Invocations = append(in.Invocations, inv("w3", "p", 4.2, 4.4, "a:0"))
		}},
		{"a grandparent read again after its grandchild started", "lineage", func(in *Input) {
			in.Invocations = append(in.Invocations, inv("w2", "p", 5.5, 7, "b:0"))
		}},
		{"a merge started while its second parent ran", "lineage", func(in *Input) {
			in.Invocations[5] = inv("w3", "c2", 3.5, 5.2, "b:3")
		}},
		{"resharded, but no pair had invocations", "lineage", func(in *Input) {
			in.Lineage = map[string][]string{"p": nil, "c1": nil, "c2": nil, "m": nil}
		}},
		{"two workers on one shard at once", "no", func(in *Input) {
			in.Invocations[2] = inv("w2", "p", 1.5, 2.5, "a:1", "b:1")
		}},
		{"an invocation inside a long earlier one, after a short one", "no", func(in *Input) {
			in.Invocations[4] = inv("w3", "c2", 3, 4.4, "b:2")
			in.Invocations = append(in.Invocations, inv("w1", "c2", 3.7, 3.8, "b:2"))
			in.Invocations[5] = inv("w3", "c2", 4.4, 4.5, "b:3")
		}},
		{"no shard with two invocations", "no", func(in *Input) {
			in.Invocations = []Invocation{in.Invocations[0]}
			in.Invocations[0].Records = []Record{{Key: "a", Data: "a:0"}}
			in.Produced.Written = map[string]int{"a": 1}
			in.Lineage, in.Resharded = map[string][]string{"p": nil}, false
			in.Events[0] = FaultEvent{Kind: "sigstop", Worker: "w1", From: at(0.5)}
		}},
		{"a child waits 16 s after its parents", "no", func(in *Input) {
			for i := range in.Invocations {
				if in.Invocations[i].Shard == "m" {
					in.Invocations[i].Start, in.Invocations[i].End = at(20.5), at(21)
				}
			}
		}},
		{"a child waits 16 s after its first record, put after its parents ended", "no", func(in *Input) {
			in.Produced.FirstPut["m"] = at(10)
			in.Invocations[6].Start, in.Invocations[6].End = at(26.5), at(27)
		}},
		{"a child with records never invoked", "no", func(in *Input) {
			in.Invocations = in.Invocations[:6]
			in.Produced.Written["a"], in.Produced.Written["b"] = 3, 4
			in.End = at(25)
		}},
		{"SIGTERM exits 1", "SIGTERM", func(in *Input) { in.Exits[0].Code = 1 }},
		{"a worker exits on its own", "SIGTERM", func(in *Input) { in.Exits = append(in.Exits, Exit{Worker: "w3", Cause: "self", Code: 1}) }},
		{"no SIGTERM at all", "SIGTERM", func(in *Input) { in.Exits = in.Exits[1:] }},
		{"no fault while an invocation ran", "faults", func(in *Input) { in.Events[0].From = at(7) }},
		{"a fault while another worker's invocation ran", "faults", func(in *Input) { in.Events[0].Worker = "w1" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := goodRun()
			in.Invocations = slices.Clone(in.Invocations)
			c.breakIt(&in)
			vs, _ := Judge(in)
			var failed []string
			for _, v := range vs {
				if !v.OK {
					failed = append(failed, strings.SplitN(v.Name, " ", 2)[0])
				}
			}
			if !slices.Equal(failed, []string{c.verdict}) {
				t.Errorf("failed verdicts %v, want [%s]:\n%s", failed, c.verdict, fmt.Sprint(vs))
			}
		})
	}
}
