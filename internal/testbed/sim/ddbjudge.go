package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/kinesis-esm/esm/fake/fakedynamo"
	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/poller"
)

// ddbFunction is the function of a DynamoDB run: it checks the event's shape, records the call,
// runs a few milliseconds and fails at random and on the poison change (reporting it alone when
// the mapping asks for partial responses).
type ddbFunction struct{ w *ddbWorld }

func (f ddbFunction) Invoke(ctx context.Context, payload []byte) (invoke.Response, error) {
	w := f.w
	var e events.DynamoDBEvent
	if err := json.Unmarshal(payload, &e); err != nil {
		w.violate("event: %v", err)
		return invoke.Response{StatusCode: 200, Payload: []byte("null")}, nil
	}
	c := &ddbCall{start: time.Now()}
	poison := ""
	for _, r := range e.Records {
		item, v, ok := w.shapeOf(r)
		if !ok {
			continue
		}
		c.seqs, c.items, c.versions = append(c.seqs, r.Change.SequenceNumber), append(c.items, item), append(c.versions, v)
		if _, bad := r.Change.NewImage["poison"]; bad && poison == "" {
			poison = r.Change.SequenceNumber
		}
	}
	w.mu.Lock()
	w.res.Checked[InvDDBShape]++
	for _, item := range uniq(c.items) {
		if w.running[item] > 0 {
			w.res.Violations = append(w.res.Violations, fmt.Sprintf("item %s invoked while another invocation with it ran", item))
		}
		w.running[item]++
	}
	fail := w.rnd.Float64() < w.s.FailRate
	pause := time.Duration(5+w.rnd.IntN(45)) * time.Millisecond
	w.mu.Unlock()
	time.Sleep(pause)
	w.mu.Lock()
	c.end = time.Now()
	w.calls = append(w.calls, c)
	for _, item := range uniq(c.items) {
		w.running[item]--
	}
	w.mu.Unlock()
	switch {
	case poison != "" && w.s.Partial:
		body := fmt.Sprintf(`{"batchItemFailures":[{"itemIdentifier":%q}]}`, poison)
		return invoke.Response{StatusCode: 200, Payload: []byte(body)}, nil
	case poison != "" || fail:
		return invoke.Response{StatusCode: 200, FunctionError: invoke.FunctionErrorUnhandled,
			Payload: []byte(`{"errorMessage":"ddbsim","errorType":"Error"}`)}, nil
	}
	return invoke.Response{StatusCode: 200, Payload: []byte("null")}, nil
}

// shapeOf checks a record of an event against Lambda's DynamoDB shape and returns its item and
// version.
func (w *ddbWorld) shapeOf(r events.DynamoDBEventRecord) (string, int, bool) {
	k, kok := r.Change.Keys["k"]
	nv, vok := r.Change.NewImage["v"]
	if r.EventSource != "aws:dynamodb" || r.EventSourceArn != w.arn || !kok || !vok || r.Change.SequenceNumber == "" ||
		r.EventName == "" || r.AWSRegion == "" || r.Change.StreamViewType != "NEW_AND_OLD_IMAGES" {
		w.violate("a record not in Lambda's DynamoDB shape: %+v", r)
		return "", 0, false
	}
	v, err := strconv.Atoi(nv.Number())
	if err != nil {
		w.violate("record %s: version %q", r.Change.SequenceNumber, nv.Number())
		return "", 0, false
	}
	return k.String(), v, true
}

func uniq(xs []string) []string {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}

// ddbStreams is the source's client: the in-memory DynamoDB's streams API, counting the reads
// answered with an expired iterator or a trimmed position.
type ddbStreams struct {
	*fakedynamo.DB
	w *ddbWorld
}

func (s ddbStreams) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, o ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	out, err := s.DB.GetRecords(ctx, in, o...)
	var expired *streamtypes.ExpiredIteratorException
	var trimmed *streamtypes.TrimmedDataAccessException
	switch {
	case errors.As(err, &expired):
		s.w.inject("ddb-iterator-expired")
	case errors.As(err, &trimmed):
		s.w.inject("ddb-read-trimmed")
	}
	return out, err
}

// ddbDest is the on-failure destination: it notes the records of the event it is given.
type ddbDest struct{ w *ddbWorld }

func (d ddbDest) Deliver(_ context.Context, f poller.FailureRecord) error {
	var e events.DynamoDBEvent
	if err := json.Unmarshal(f.Payload, &e); err != nil || len(e.Records) == 0 {
		d.w.violate("failure record of %s: payload %q (%v)", f.ShardID, f.Payload, err)
		return nil
	}
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	d.w.res.Injected["ddb-discarded-batch"]++
	for _, r := range e.Records {
		d.w.discarded[r.Change.SequenceNumber] = true
	}
	return nil
}

// ddbShard is a shard of the stream as read at the end: its parent and its records' sequence
// numbers.
type ddbShard struct {
	parent string
	seqs   []string
}

// listStream reads the whole stream: every shard with its parent and records.
func (w *ddbWorld) listStream() (map[string]ddbShard, error) {
	ctx := context.Background()
	out, err := w.db.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(w.arn)})
	if err != nil {
		return nil, err
	}
	shards := map[string]ddbShard{}
	for _, s := range out.StreamDescription.Shards {
		id := aws.ToString(s.ShardId)
		it, err := w.db.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(w.arn),
			ShardId: s.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			return nil, err
		}
		sh := ddbShard{parent: aws.ToString(s.ParentShardId)}
		for iter := it.ShardIterator; iter != nil; {
			page, err := w.db.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				return nil, err
			}
			for _, r := range page.Records {
				sh.seqs = append(sh.seqs, aws.ToString(r.Dynamodb.SequenceNumber))
			}
			if len(page.Records) == 0 {
				break // an open shard's end for now
			}
			iter = page.NextShardIterator
		}
		shards[id] = sh
	}
	return shards, nil
}

// missing are the sequence numbers of the stream neither delivered nor discarded, and the
// stream's shards.
func (w *ddbWorld) missing() ([]string, map[string]ddbShard) {
	shards, err := w.listStream()
	if err != nil {
		w.violate("read the stream: %v", err)
		return nil, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[string]bool{}
	for _, c := range w.calls {
		for _, s := range c.seqs {
			seen[s] = true
		}
	}
	var out []string
	for _, sh := range shards {
		for _, s := range sh.seqs {
			if !seen[s] && !w.discarded[s] {
				out = append(out, s)
			}
		}
	}
	return out, shards
}

// judge checks the run's invariants.
func (w *ddbWorld) judge() {
	missing, shards := w.missing()
	total := 0
	for _, sh := range shards {
		total += len(sh.seqs)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.res.Checked[InvLost] += total
	if !w.s.Trim && total < w.s.Changes {
		w.res.Violations = append(w.res.Violations, fmt.Sprintf("the stream holds %d records of %d changes written", total, w.s.Changes))
	}
	if len(missing) > 0 {
		w.res.Violations = append(w.res.Violations, fmt.Sprintf("%d records neither delivered nor discarded, first %s", len(missing), missing[0]))
	}
	w.judgeOrder()
	w.judgeLineage(shards)
}

// judgeOrder: the first deliveries of each item come in version order (the changes of one item
// are in one shard, or in a parent and then its child).
func (w *ddbWorld) judgeOrder() {
	calls := slices.Clone(w.calls)
	slices.SortStableFunc(calls, func(a, b *ddbCall) int { return a.start.Compare(b.start) })
	last, first := map[string]int{}, map[string]bool{}
	for _, c := range calls {
		for i, item := range c.items {
			key := item + "#" + strconv.Itoa(c.versions[i])
			if first[key] {
				continue
			}
			first[key] = true
			w.res.Checked[InvOrder]++
			if c.versions[i] < last[item] {
				w.res.Violations = append(w.res.Violations, fmt.Sprintf("%s v%d first invoked after v%d", item, c.versions[i], last[item]))
			}
			last[item] = max(last[item], c.versions[i])
		}
	}
}

// judgeLineage: no invocation with a child shard's records starts before every invocation with
// its parent's records ended.
func (w *ddbWorld) judgeLineage(shards map[string]ddbShard) {
	shardOf := map[string]string{}
	for id, sh := range shards {
		for _, s := range sh.seqs {
			shardOf[s] = id
		}
	}
	firstStart, lastEnd := map[string]time.Time{}, map[string]time.Time{}
	for _, c := range w.calls {
		for _, s := range uniq(c.seqs) {
			id := shardOf[s]
			if f, ok := firstStart[id]; !ok || c.start.Before(f) {
				firstStart[id] = c.start
			}
			if c.end.After(lastEnd[id]) {
				lastEnd[id] = c.end
			}
		}
	}
	for id, sh := range shards {
		start, ok := firstStart[id]
		if sh.parent == "" || !ok || lastEnd[sh.parent].IsZero() {
			continue
		}
		w.res.Checked[InvLineage]++
		if start.Before(lastEnd[sh.parent]) {
			w.res.Violations = append(w.res.Violations, fmt.Sprintf("lineage: %s invoked before its parent %s's last invocation ended", id, sh.parent))
		}
	}
}
