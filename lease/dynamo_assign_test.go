package lease

import (
	"fmt"
	"testing"
)

// TestAssignFairAndStable: every member gets floor or ceil of its share, the placement does not
// depend on the order of its inputs, and a join moves about shards/members leases, all to the
// newcomer.
func TestAssignFairAndStable(t *testing.T) {
	var shards, members []string
	for i := range 1000 {
		shards = append(shards, fmt.Sprintf("shardId-%012d", i))
	}
	for i := range 9 {
		members = append(members, fmt.Sprintf("w%d", i))
	}
	a := assign(shards, members)
	for _, m := range members {
		if n := a.load[m]; n < 1000/9 || n > 1000/9+1 {
			t.Fatalf("%s has %d of 1000 shards over 9 members", m, n)
		}
	}
	rev := assign(reversed(shards), reversed(members))
	for _, s := range shards {
		if a.owner[s] != rev.owner[s] {
			t.Fatalf("%s placed on %s or %s depending on input order", s, a.owner[s], rev.owner[s])
		}
	}
	b := assign(shards, append(members, "w9"))
	moved, toNew := 0, 0
	for _, s := range shards {
		if a.owner[s] != b.owner[s] {
			moved++
			if b.owner[s] == "w9" {
				toNew++
			}
		}
	}
	if toNew != 100 || moved > 130 {
		t.Fatalf("a join moved %d shards, %d of them to the newcomer; want 100 to it and few others", moved, toNew)
	}
}

func reversed(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[len(ss)-1-i] = s
	}
	return out
}

func TestNewDynamoRejectsBadArguments(t *testing.T) {
	for name, call := range map[string]func() (*Dynamo, error){
		"no client":       func() (*Dynamo, error) { return NewDynamo(nil, "t", "w") },
		"no table":        func() (*Dynamo, error) { return NewDynamo(ddb, "", "w") },
		"no worker":       func() (*Dynamo, error) { return NewDynamo(ddb, "t", "") },
		"roster id":       func() (*Dynamo, error) { return NewDynamo(ddb, "t", "!w") },
		"zero duration":   func() (*Dynamo, error) { return NewDynamo(ddb, "t", "w", WithLeaseDuration(0)) },
		"negative settle": func() (*Dynamo, error) { return NewDynamo(ddb, "t", "w", WithShardSettle(-1)) },
	} {
		if _, err := call(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
