package lease

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/fake/fakedynamo"
	"github.com/kinesis-esm/esm/poller"
)

// answerNext plays the shard's owner: it waits for the next pending request after rev and
// answers it with res and err (or, with err == errSilent, leaves it).
func answerNext(t *testing.T, db DynamoAPI, rev int64, res poller.Skipped, err error) <-chan SkipState {
	seen := make(chan SkipState, 1)
	go func() {
		for range 500 {
			st, rerr := ReadSkip(context.Background(), db, "leases")
			if rerr == nil && st.Revision > rev && st.Pending(time.Now()) {
				seen <- st
				if err != errSilent {
					if ok, aerr := setSkipState(context.Background(), db, "leases", st.Revision, SkipAnswered, new(NewSkipAnswer(res, err))); !ok || aerr != nil {
						t.Errorf("answer: %v %v", ok, aerr)
					}
				}
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		close(seen)
	}()
	return seen
}

var errSilent = errors.New("no answer")

// TestSkipThroughTheTable: a skip asked through the lease table is answered by whoever holds
// the shard: the skip done, or the owner's refusal with its reason and text; the roster carries
// the revision to the workers. A request nobody answers expires at the end of the asker's wait
// (nothing skipped, a late answer is not kept), and a pending request is not replaced.
func TestSkipThroughTheTable(t *testing.T) {
	ctx := context.Background()
	db := fakedynamo.New()
	if err := EnsureTable(ctx, db, "leases", true); err != nil {
		t.Fatal(err)
	}
	q := poller.SkipRequest{ShardID: "shardId-000000000001"}
	if _, err := AskSkip(ctx, db, "leases", q, "op", time.Now().Add(time.Minute)); !errors.Is(err, poller.ErrSkipNotHere) {
		t.Fatalf("a skip with no worker on the table: %v, want not here", err)
	}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("leases"), Item: map[string]types.AttributeValue{attrKey: str(rosterKey)}}); err != nil {
		t.Fatal(err)
	}
	done := poller.Skipped{ShardID: q.ShardID, First: "7", Last: "9", Records: 3, Attempts: 2}
	seen := answerNext(t, db, 1, done, nil)
	got, err := AskSkip(ctx, db, "leases", q, "op", time.Now().Add(time.Minute))
	if st := <-seen; err != nil || got != done || st.Request != q || st.By != "op" {
		t.Fatalf("AskSkip = %+v, %v (request seen %+v); want %+v", got, err, st, done)
	}
	roster, _ := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("leases"), Key: key(rosterKey)})
	d := &Dynamo{skipCh: make(chan struct{}, 1)}
	d.noteSkipLocked(roster.Item)
	d.noteSkipLocked(roster.Item)
	if d.skipSeen != 2 || len(d.skipCh) != 1 {
		t.Fatalf("a worker reading the roster saw revision %d, told %d times; want 2, once", d.skipSeen, len(d.skipCh))
	}

	refusal := errors.New("shard not blocked: shard shardId-000000000001 is not retrying a batch")
	seen = answerNext(t, db, 2, poller.Skipped{}, fmtWrap(poller.ErrSkipNotBlocked, refusal))
	_, err = AskSkip(ctx, db, "leases", q, "op", time.Now().Add(time.Minute))
	<-seen
	if !errors.Is(err, poller.ErrSkipNotBlocked) || err.Error() != fmtWrap(poller.ErrSkipNotBlocked, refusal).Error() {
		t.Fatalf("a refused skip: %v, want the owner's refusal as it was", err)
	}

	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	seen = answerNext(t, db, 3, poller.Skipped{}, errSilent)
	blocked := make(chan error, 1)
	go func() {
		<-seen
		_, err := AskSkip(ctx, db, "leases", q, "another", time.Now().Add(time.Minute))
		blocked <- err
	}()
	if _, err = AskSkip(short, db, "leases", q, "op", time.Now().Add(time.Minute)); !errors.Is(err, poller.ErrSkipNotDone) || !strings.Contains(err.Error(), "took the skip up in time") {
		t.Fatalf("an unanswered skip: %v, want not done", err)
	}
	if err := <-blocked; !errors.Is(err, poller.ErrSkipNotDone) || !strings.Contains(err.Error(), "another skip") {
		t.Fatalf("a skip asked while one is pending: %v, want refused", err)
	}
	if ok, _ := setSkipState(ctx, db, "leases", 4, SkipAnswered, new(NewSkipAnswer(done, nil))); ok {
		t.Fatalf("an answer after the request expired was kept")
	}
	if st, _ := ReadSkip(ctx, db, "leases"); st.State != SkipExpired {
		t.Fatalf("the unanswered request is %q, want %q", st.State, SkipExpired)
	}
}

func fmtWrap(reason, err error) error { return &skipRefusal{reason: reason, msg: err.Error()} }
