package chaos

import (
	"fmt"
	"maps"
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

// key names a verdict by the first two words of its name.
func key(v Verdict) string { return strings.Join(strings.Fields(v.Name)[:2], " ") }

func verdictsByName(vs []Verdict) map[string]Verdict {
	out := map[string]Verdict{}
	for _, v := range vs {
		out[key(v)] = v
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

// TestJudgeChildWaitAllowsAnInvocationInFlight: a child may wait the in-flight allowance longer
// than 15 s only when a worker faulted during its wait (or just before) had an invocation in
// flight, or one that ended just before; a fault on an idle worker allows nothing more (its
// shards are taken within its lease, as when there is no fault). The verdict says which
// applied.
func TestJudgeChildWaitAllowsAnInvocationInFlight(t *testing.T) {
	in := goodRun()
	in.InFlight, in.Recent = 20*time.Second, time.Second
	in.Invocations = slices.Clone(in.Invocations)
	in.Invocations[6].Start, in.Invocations[6].End = at(30), at(31) // m waits 25.5 s
	in.End = at(40)
	in.Events = nil // (the faults-landed verdict fails then: only the child wait is looked at here)
	name := "no child waits more than 15s once its parents are done"
	if vs, _ := Judge(in); verdictsByName(vs)["no child"].OK || verdictsByName(vs)["no child"].Name != name {
		v := verdictsByName(vs)["no child"]
		t.Fatalf("no fault during the wait: %+v, want a failed %q", v, name)
	}
	// w2 killed at 0.5 s: it had invoked nothing yet (its first invocation starts at 2 s).
	in.Events = []FaultEvent{{Kind: "sigkill", Worker: "w2", From: at(0.5), To: at(0.5)}}
	vs, _ := Judge(in)
	if v := verdictsByName(vs)["no child"]; v.OK || !strings.Contains(v.Detail, "no invocation in flight at any fault near it: bound 15s") {
		t.Fatalf("a kill of an idle worker: %+v, want m failed against 15 s", v)
	}
	// w2 cut off from Kinesis alone from 0.5 s to 12 s while idle: it kept its leases and read
	// nothing; the child may wait that much longer.
	in.Events = []FaultEvent{{Kind: "partition kinesis", Worker: "w2", From: at(0.5), To: at(12)}}
	if v := verdictsByName(func() []Verdict { vs, _ := Judge(in); return vs }())["no child"]; !v.OK {
		t.Fatalf("a Kinesis partition of an idle worker during the wait: %+v, want m held within 15 s + 11.5 s", v)
	}
	// The same cut from a DynamoDB stream's service holds it the same; a cut from DynamoDB too
	// (its worker declared dead) does not.
	in.Events = []FaultEvent{{Kind: "partition dynamodbstreams", Worker: "w2", From: at(0.5), To: at(12)}}
	if v := verdictsByName(func() []Verdict { vs, _ := Judge(in); return vs }())["no child"]; !v.OK {
		t.Fatalf("a DynamoDB Streams partition of an idle worker during the wait: %+v, want m held within 15 s + 11.5 s", v)
	}
	in.Events = []FaultEvent{{Kind: "partition dynamodb+dynamodbstreams", Worker: "w2", From: at(0.5), To: at(12)}}
	if v := verdictsByName(func() []Verdict { vs, _ := Judge(in); return vs }())["no child"]; v.OK {
		t.Fatalf("a DynamoDB and DynamoDB Streams partition of an idle worker: %+v, want m failed against 15 s", v)
	}
	// w1 killed at 1.5 s, in the middle of its invocation of p (1 s to 2 s).
	in.Events = []FaultEvent{{Kind: "sigkill", Worker: "w1", From: at(1.5), To: at(1.5)}}
	vs, _ = Judge(in)
	if v := verdictsByName(vs)["no child"]; !v.OK || !strings.Contains(v.Detail, "3 against 15s + 20s") {
		t.Fatalf("a kill with an invocation in flight: %+v, want every child held within 15 s + 20 s", v)
	}
	// w1 killed at 2.5 s, its invocation of p ended 0.5 s before: still within its last horizon.
	in.Events = []FaultEvent{{Kind: "sigkill", Worker: "w1", From: at(2.5), To: at(2.5)}}
	if v := verdictsByName(func() []Verdict { vs, _ := Judge(in); return vs }())["no child"]; !v.OK {
		t.Fatalf("a kill just after an invocation ended: %+v, want it held within 15 s + 20 s", v)
	}
}

// TestJudgeCatches breaks each invariant in several ways; the judge must fail that invariant
// (named by its verdict's first two words) and no other.
func TestJudgeCatches(t *testing.T) {
	cases := []struct {
		name, verdict string
		breakIt       func(*Input)
	}{
		{"a record never delivered", "every record", func(in *Input) { in.Produced.Written["b"] = 6 }},
		{"a record only in an invocation that did not end", "every record", func(in *Input) {
			in.Invocations[6].Records = in.Invocations[6].Records[:1] // b:4 dropped
		}},
		{"nothing produced", "every record", func(in *Input) { in.Produced.Written = map[string]int{} }},
		{"two records of a key swapped in one invocation", "order per", func(in *Input) {
			r := in.Invocations[0].Records
			in.Invocations[0].Records = []Record{r[0], {Key: "b", Data: "b:1"}}
			in.Invocations[1].Records = []Record{{Key: "a", Data: "a:1"}, {Key: "b", Data: "b:0"}}
		}},
		{"a key's later record first delivered on another shard", "order per", func(in *Input) {
			in.Invocations[5].Records = []Record{{Key: "b", Data: "b:4"}}
			in.Invocations[6].Records = []Record{{Key: "a", Data: "a:3"}, {Key: "b", Data: "b:3"}}
		}},
		{"a child invoked before its parent's last invocation ended", "lineage by", func(in *Input) {
			in.Invocations[3] = inv("w2", "c1", 2.4, 4, "a:2")
		}},
		{"a finished parent read again after its child started", "lineage by", func(in *Input) {
			in.Invocations = append(in.Invocations, inv("w3", "p", 4.2, 4.4, "a:0"))
		}},
		{"a grandparent read again after its grandchild started", "lineage by", func(in *Input) {
			in.Invocations = append(in.Invocations, inv("w2", "p", 5.5, 7, "b:0"))
		}},
		{"a merge started while its second parent ran", "lineage by", func(in *Input) {
			in.Invocations[5] = inv("w3", "c2", 3.5, 5.2, "b:3")
		}},
		{"resharded, but no pair had invocations", "lineage by", func(in *Input) {
			in.Lineage = map[string][]string{"p": nil, "c1": nil, "c2": nil, "m": nil}
		}},
		{"two workers on one shard at once", "no overlap", func(in *Input) {
			in.Invocations[2] = inv("w2", "p", 1.5, 2.5, "a:1", "b:1")
		}},
		{"an invocation inside a long earlier one, after a short one", "no overlap", func(in *Input) {
			in.Invocations[4] = inv("w3", "c2", 3, 4.4, "b:2")
			in.Invocations = append(in.Invocations, inv("w1", "c2", 3.7, 3.8, "b:2"))
			in.Invocations[5] = inv("w3", "c2", 4.4, 4.5, "b:3")
		}},
		{"no shard with two invocations", "no overlap", func(in *Input) {
			in.Invocations = []Invocation{in.Invocations[0]}
			in.Invocations[0].Records = []Record{{Key: "a", Data: "a:0"}}
			in.Produced.Written = map[string]int{"a": 1}
			in.Lineage, in.Resharded = map[string][]string{"p": nil}, false
			in.Events[0] = FaultEvent{Kind: "sigstop", Worker: "w1", From: at(0.5)}
		}},
		{"a child waits 16 s after its parents", "no child", func(in *Input) {
			for i := range in.Invocations {
				if in.Invocations[i].Shard == "m" {
					in.Invocations[i].Start, in.Invocations[i].End = at(20.5), at(21)
				}
			}
		}},
		{"a child waits 16 s after its first record, put after its parents ended", "no child", func(in *Input) {
			in.Produced.FirstPut["m"] = at(10)
			in.Invocations[6].Start, in.Invocations[6].End = at(26.5), at(27)
		}},
		{"a child waits past the in-flight allowance after a fault mid-invocation", "no child", func(in *Input) {
			in.InFlight = 5 * time.Second
			in.Events = append(in.Events, FaultEvent{Kind: "sigkill", Worker: "w1", From: at(1.5), To: at(1.5)})
			for i := range in.Invocations {
				if in.Invocations[i].Shard == "m" {
					in.Invocations[i].Start, in.Invocations[i].End = at(25), at(26)
				}
			}
		}},
		{"a child with records never invoked", "no child", func(in *Input) {
			in.Invocations = in.Invocations[:6]
			in.Produced.Written["a"], in.Produced.Written["b"] = 3, 4
			in.End = at(25)
		}},
		{"SIGTERM exits 1", "SIGTERM exits", func(in *Input) { in.Exits[0].Code = 1 }},
		{"a worker exits on its own", "SIGTERM exits", func(in *Input) { in.Exits = append(in.Exits, Exit{Worker: "w3", Cause: "self", Code: 1}) }},
		{"no SIGTERM at all", "SIGTERM exits", func(in *Input) { in.Exits = in.Exits[1:] }},
		{"no fault while an invocation ran", "faults landed", func(in *Input) { in.Events[0].From = at(7) }},
		{"a fault while another worker's invocation ran", "faults landed", func(in *Input) { in.Events[0].Worker = "w1" }},
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
					failed = append(failed, key(v))
				}
			}
			if !slices.Equal(failed, []string{c.verdict}) {
				t.Errorf("failed verdicts %v, want [%s]:\n%s", failed, c.verdict, fmt.Sprint(vs))
			}
		})
	}
}

// TestJudgeRequiresTheExercise: with Required set, a verdict fails a run with fewer parent→child
// pairs invoked on both sides, fewer SIGKILLs, or no records than asked, and only that verdict;
// without it there is no such verdict.
func TestJudgeRequiresTheExercise(t *testing.T) {
	if vs, _ := Judge(goodRun()); verdictsByName(vs)["the run"].Name != "" {
		t.Fatalf("a verdict on the exercise without Required: %+v", verdictsByName(vs)["the run"])
	}
	in := goodRun()
	in.Required = Required{Rotations: 4, Kills: 1} // p→c1, p→c2, c1→m, c2→m; w2's kill
	vs, st := Judge(in)
	if v := verdictsByName(vs)["the run"]; !v.OK || st.Children != 3 || st.ParentChildPairs != 4 {
		t.Fatalf("%+v, %d children, %d pairs; want it passed with 3 and 4", v, st.Children, st.ParentChildPairs)
	}
	for name, breakIt := range map[string]func(*Input){
		"a pair fewer than asked": func(in *Input) { in.Required.Rotations = 5 },
		"a pair without its child": func(in *Input) {
			in.Invocations = slices.Delete(slices.Clone(in.Invocations), 6, 7)
			in.Produced.Written = map[string]int{"a": 3, "b": 4}
			delete(in.Produced.FirstPut, "m")
		},
		"no SIGKILL": func(in *Input) {
			in.Events = slices.Clone(in.Events)
			in.Events[1].Kind = "sigstop"
		},
	} {
		t.Run(name, func(t *testing.T) {
			in := goodRun()
			in.Required = Required{Rotations: 4, Kills: 1}
			in.Produced.Written = maps.Clone(in.Produced.Written)
			in.Produced.FirstPut = maps.Clone(in.Produced.FirstPut)
			breakIt(&in)
			vs, _ := Judge(in)
			var failed []string
			for _, v := range vs {
				if !v.OK {
					failed = append(failed, key(v))
				}
			}
			if !slices.Equal(failed, []string{"the run"}) {
				t.Errorf("failed verdicts %v, want [the run]:\n%s", failed, fmt.Sprint(vs))
			}
		})
	}
}
