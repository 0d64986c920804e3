package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/internal/ctxwait"
	"github.com/kinesis-esm/esm/poller"
)

// Skips asked of a fleet through its lease table (DESIGN.md, "Skips through the table"): the
// asker (esm serve's replica that got the API call but does not read the shard) writes the
// request on the mapping's item (esm:mapping) and its revision on the roster (attribute skip),
// so every worker sees it at its next heartbeat or roster read; the worker that holds the
// shard's lease does the skip with its poller (poller.Skips: under the lease, fenced like a
// checkpoint) and writes the answer, conditional on the request still being the one asked and
// unanswered; the asker reads it. The request outlives its owner: a worker that takes the
// lease over before the deadline takes the request up.

// Attributes of the skip request on the mapping item, and of the roster.
const (
	attrSkipRev      = "skipRev"      // N: the latest request's revision (1, 2, ...)
	attrSkipState    = "skipState"    // S: SkipRequested, SkipAnswered, SkipExpired
	attrSkipRequest  = "skipRequest"  // S: the poller.SkipRequest, JSON
	attrSkipBy       = "skipBy"       // S: who asked
	attrSkipDeadline = "skipDeadline" // S: until when the shard's owner may take it up, RFC 3339
	attrSkipAnswer   = "skipAnswer"   // S: SkipAnswer, JSON
	attrRosterSkip   = "skip"         // N, on the roster: the latest request's revision
)

// The states of a skip request.
const (
	SkipRequested = "requested"
	SkipAnswered  = "answered"
	SkipExpired   = "expired" // nobody answered by the deadline: the asker gave up
)

// SkipState is a mapping's latest skip request.
type SkipState struct {
	Revision int64
	State    string
	Request  poller.SkipRequest
	By       string
	Deadline time.Time
	Answer   SkipAnswer
}

// SkipAnswer is the owner's answer: the skip done, or why it was refused (Refusal names the
// poller's reason, Message is its text).
type SkipAnswer struct {
	Skipped *poller.Skipped `json:"skipped,omitempty"`
	Refusal string          `json:"refusal,omitempty"`
	Message string          `json:"message,omitempty"`
}

// skipReasons are the poller's reasons a skip is refused, by the name an answer carries.
var skipReasons = map[string]error{
	"unknown-shard": poller.ErrSkipUnknownShard, "not-here": poller.ErrSkipNotHere, "not-blocked": poller.ErrSkipNotBlocked,
	"batch-changed": poller.ErrSkipBatchChanged, "ambiguous": poller.ErrSkipAmbiguous, "not-done": poller.ErrSkipNotDone,
}

// NewSkipAnswer is the answer for the outcome of poller.Skips.Skip.
func NewSkipAnswer(res poller.Skipped, err error) SkipAnswer {
	if err == nil {
		return SkipAnswer{Skipped: &res}
	}
	a := SkipAnswer{Refusal: "not-done", Message: err.Error()}
	for name, reason := range skipReasons {
		if errors.Is(err, reason) {
			a.Refusal = name
		}
	}
	return a
}

// skipRefusal is a refusal read from the table: its text is the owner's, and it wraps the
// poller's reason, so that callers classify it as they would the owner's own error.
type skipRefusal struct {
	reason error
	msg    string
}

func (e *skipRefusal) Error() string { return e.msg }
func (e *skipRefusal) Unwrap() error { return e.reason }

// Result is the answer as Skips.Skip returns it.
func (a SkipAnswer) Result() (poller.Skipped, error) {
	if a.Skipped != nil {
		return *a.Skipped, nil
	}
	reason, ok := skipReasons[a.Refusal]
	if !ok {
		reason = poller.ErrSkipNotDone
	}
	return poller.Skipped{}, &skipRefusal{reason: reason, msg: a.Message}
}

// ReadSkip reads the table's latest skip request (a consistent read of the mapping item);
// Revision 0 when there never was one.
func ReadSkip(ctx context.Context, api DynamoAPI, table string) (SkipState, error) {
	out, err := timed(api).GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key(mappingItemKey), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return SkipState{}, fmt.Errorf("read the skip request of lease table %s: %w", table, err)
	}
	it := out.Item
	s := func(n string) string {
		if v, ok := it[n].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	var st SkipState
	if v, ok := it[attrSkipRev].(*types.AttributeValueMemberN); ok {
		if st.Revision, err = strconv.ParseInt(v.Value, 10, 64); err != nil {
			return st, fmt.Errorf("attribute %s: %w", attrSkipRev, err)
		}
	}
	st.State, st.By = s(attrSkipState), s(attrSkipBy)
	st.Deadline, _ = time.Parse(time.RFC3339Nano, s(attrSkipDeadline))
	for _, f := range []struct {
		attr string
		v    any
	}{{attrSkipRequest, &st.Request}, {attrSkipAnswer, &st.Answer}} {
		if j := s(f.attr); j != "" {
			if err := json.Unmarshal([]byte(j), f.v); err != nil {
				return st, fmt.Errorf("attribute %s: %w", f.attr, err)
			}
		}
	}
	return st, nil
}

// Pending reports whether the request waits for the shard's owner at now.
func (s SkipState) Pending(now time.Time) bool {
	return s.State == SkipRequested && now.Before(s.Deadline)
}

// skipPoll is how often the asker reads the request for its answer.
const skipPoll = 200 * time.Millisecond

// AskSkip asks the fleet on table to skip q's batch and waits for the owner's answer: the
// owner may take the request up until deadline; the asker waits until ctx ends (give it a
// little more than the deadline: a skip taken up just before it still completes). One request
// at a time per mapping: another one pending is refused (poller.ErrSkipNotDone).
func AskSkip(ctx context.Context, api DynamoAPI, table string, q poller.SkipRequest, by string, deadline time.Time) (poller.Skipped, error) {
	cur, err := ReadSkip(ctx, api, table)
	if err != nil {
		return poller.Skipped{}, err
	}
	if cur.Pending(time.Now()) {
		return poller.Skipped{}, fmt.Errorf("%w: another skip (of shard %s, asked by %s) waits for its answer; ask again once it is answered", poller.ErrSkipNotDone, cur.Request.ShardID, cur.By)
	}
	rev := cur.Revision + 1
	if err := requestSkip(ctx, api, table, cur.Revision, rev, q, by, deadline); err != nil {
		return poller.Skipped{}, err
	}
	for {
		if !ctxwait.Sleep(ctx, skipPoll) {
			return poller.Skipped{}, expireSkip(context.WithoutCancel(ctx), api, table, rev)
		}
		st, err := ReadSkip(ctx, api, table)
		switch {
		case err != nil && ctx.Err() == nil:
			continue // read again: the answer stays
		case err != nil:
			return poller.Skipped{}, expireSkip(context.WithoutCancel(ctx), api, table, rev)
		case st.Revision != rev:
			return poller.Skipped{}, fmt.Errorf("%w: a later skip request replaced this one before it was answered", poller.ErrSkipNotDone)
		case st.State == SkipAnswered:
			return st.Answer.Result()
		}
	}
}

// requestSkip writes the request rev (conditional on old being the latest) and its revision on
// the roster.
func requestSkip(ctx context.Context, api DynamoAPI, table string, old, rev int64, q poller.SkipRequest, by string, deadline time.Time) error {
	body, err := json.Marshal(q)
	if err != nil {
		return fmt.Errorf("encode skip: %w", err)
	}
	cond, vals := "attribute_not_exists(#rev)", map[string]types.AttributeValue{
		":rev": num(rev), ":s": str(SkipRequested), ":q": str(string(body)), ":by": str(by),
		":dl": str(deadline.UTC().Format(time.RFC3339Nano)),
	}
	if old > 0 {
		cond, vals[":old"] = "#rev = :old", num(old)
	}
	_, err = timed(api).UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &table, Key: key(mappingItemKey),
		UpdateExpression:    aws.String("SET #rev = :rev, #s = :s, #q = :q, #by = :by, #dl = :dl REMOVE #ans"),
		ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: map[string]string{"#rev": attrSkipRev, "#s": attrSkipState, "#q": attrSkipRequest,
			"#by": attrSkipBy, "#dl": attrSkipDeadline, "#ans": attrSkipAnswer},
		ExpressionAttributeValues: vals,
	})
	if isConditionFailed(err) {
		return fmt.Errorf("%w: another skip was asked for at the same time; ask again", poller.ErrSkipNotDone)
	}
	if err != nil {
		return fmt.Errorf("request skip in lease table %s: %w", table, err)
	}
	_, err = timed(api).UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &table, Key: key(rosterKey),
		UpdateExpression:          aws.String("SET #sk = :rev"),
		ConditionExpression:       aws.String("attribute_exists(#k)"),
		ExpressionAttributeNames:  map[string]string{"#sk": attrRosterSkip, "#k": attrKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{":rev": num(rev)},
	})
	if isConditionFailed(err) {
		if _, err := setSkipState(ctx, api, table, rev, SkipExpired, nil); err != nil {
			return err
		}
		return fmt.Errorf("%w: no worker runs the mapping (its lease table has no roster)", poller.ErrSkipNotHere)
	}
	if err != nil {
		return fmt.Errorf("announce skip in lease table %s: %w", table, err)
	}
	return nil
}

// expireSkip ends the unanswered request rev (conditional on it still being unanswered) and
// reports it not done; an answer that came meanwhile is returned instead.
func expireSkip(ctx context.Context, api DynamoAPI, table string, rev int64) error {
	ok, err := setSkipState(ctx, api, table, rev, SkipExpired, nil)
	if err == nil && !ok {
		st, rerr := ReadSkip(ctx, api, table)
		if rerr == nil && st.Revision == rev && st.State == SkipAnswered {
			if _, aerr := st.Answer.Result(); aerr != nil {
				return aerr
			}
			return fmt.Errorf("%w: the skip was done after this request stopped waiting (esm status shows it)", poller.ErrSkipNotDone)
		}
	}
	return fmt.Errorf("%w: no worker holding the shard took the skip up in time (the shard's owner may have stopped, or an invocation in flight outlasted the wait); nothing was skipped", poller.ErrSkipNotDone)
}

// setSkipState moves the unanswered request rev to state, with answer a (nil: none),
// conditional on rev being the latest request and still requested: false when it was not.
func setSkipState(ctx context.Context, api DynamoAPI, table string, rev int64, state string, a *SkipAnswer) (bool, error) {
	expr := "SET #s = :to"
	vals := map[string]types.AttributeValue{":to": str(state), ":req": str(SkipRequested), ":rev": num(rev)}
	names := map[string]string{"#s": attrSkipState, "#rev": attrSkipRev}
	if a != nil {
		b, err := json.Marshal(a)
		if err != nil {
			return false, fmt.Errorf("encode skip answer: %w", err)
		}
		expr, vals[":ans"], names["#ans"] = expr+", #ans = :ans", str(string(b)), attrSkipAnswer
	}
	_, err := timed(api).UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &table, Key: key(mappingItemKey), UpdateExpression: aws.String(expr),
		ConditionExpression:      aws.String("#s = :req AND #rev = :rev"),
		ExpressionAttributeNames: names, ExpressionAttributeValues: vals,
	})
	if isConditionFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("skip %d of lease table %s: set %s: %w", rev, table, state, err)
	}
	return true, nil
}

// noteSkipLocked records the skip revision a roster read shows, and tells the worker's watch
// (SkipAsked) of a new one.
func (d *Dynamo) noteSkipLocked(item map[string]types.AttributeValue) {
	v, ok := item[attrRosterSkip].(*types.AttributeValueMemberN)
	if !ok {
		return
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil || n <= d.skipSeen {
		return
	}
	d.skipSeen = n
	select {
	case d.skipCh <- struct{}{}:
	default:
	}
}

// SkipAsked receives once a roster read showed a skip request newer than the last one seen.
func (d *Dynamo) SkipAsked() <-chan struct{} { return d.skipCh }

// LatestSkip reads the latest skip request of this worker's table (ReadSkip).
func (d *Dynamo) LatestSkip(ctx context.Context) (SkipState, error) {
	return ReadSkip(ctx, d.api, d.table)
}

// AnswerSkip writes the answer to request rev, unless it was answered or expired meanwhile
// (false).
func (d *Dynamo) AnswerSkip(ctx context.Context, rev int64, a SkipAnswer) (bool, error) {
	return setSkipState(ctx, d.api, d.table, rev, SkipAnswered, &a)
}
