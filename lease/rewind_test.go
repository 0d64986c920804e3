package lease

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestRewindSeenOnlyWhenAsked: a worker started under revision 2 stops invoking once a roster
// read shows revision 3 (not 2); one made without WithRewindRevision (esm serve's, a library
// user's) never does, whatever the roster says: it would otherwise never hold a lease again on
// a table that once had a rewind.
func TestRewindSeenOnlyWhenAsked(t *testing.T) {
	roster := func(rev string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{attrRosterRewind: &types.AttributeValueMemberN{Value: rev}}
	}
	aware, err := NewDynamo(ddb, "t", "w", WithRewindRevision(2))
	if err != nil {
		t.Fatal(err)
	}
	aware.noteRewindLocked(roster("2"))
	if aware.rewindDueLocked() {
		t.Fatal("stopped for the revision it started under")
	}
	aware.noteRewindLocked(roster("3"))
	select {
	case <-aware.RewindRequested():
	default:
		t.Fatal("a newer rewind not seen")
	}
	if !aware.rewindDueLocked() {
		t.Fatal("still invoking after a newer rewind was seen")
	}
	plain, err := NewDynamo(ddb, "t", "w")
	if err != nil {
		t.Fatal(err)
	}
	plain.noteRewindLocked(roster("7"))
	if plain.rewindDueLocked() {
		t.Fatal("a worker that does not stop for rewinds stopped invoking: it would never invoke again")
	}
}
