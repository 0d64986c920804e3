package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testenv"
)

// streamEvents reads every shard of a stream from TRIM_HORIZON, parents first (DescribeStream
// lists shards in creation order), and decodes each record of GetRecords' JSON as the
// aws-lambda-go event record it becomes. It returns the records and the number of shards.
func streamEvents(t *testing.T, ctx context.Context, endpoint string, st *dynamodbstreams.Client, arn string) ([]events.DynamoDBEventRecord, int) {
	t.Helper()
	var shards []streamtypes.Shard
	in := &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)}
	for {
		d, err := st.DescribeStream(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		shards = append(shards, d.StreamDescription.Shards...)
		if in.ExclusiveStartShardId = d.StreamDescription.LastEvaluatedShardId; in.ExclusiveStartShardId == nil {
			break
		}
	}
	var recs []events.DynamoDBEventRecord
	for _, sh := range shards {
		it, err := st.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		for next := it.ShardIterator; next != nil; {
			body, _ := json.Marshal(map[string]any{"ShardIterator": next})
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
			req.Header.Set("X-Amz-Target", "DynamoDBStreams_20120810.GetRecords")
			req.Header.Set("Content-Type", "application/x-amz-json-1.0")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var out struct {
				Records           []events.DynamoDBEventRecord
				NextShardIterator *string
			}
			err = json.NewDecoder(resp.Body).Decode(&out)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("GetRecords: %d %v", resp.StatusCode, err)
			}
			recs = append(recs, out.Records...)
			if next = out.NextShardIterator; len(out.Records) == 0 {
				break // the open shard's end
			}
		}
	}
	return recs, len(shards)
}

// TestDDBProducerAndJudge writes 300 changes over 20 keys to ddb-local (NEW_AND_OLD_IMAGES,
// shards rotating every second, writes spread over three seconds), reads the stream back as
// Lambda's event records, and judges them: all checks pass. Then each check is shown to fail on
// what it guards: a change missing, two changes of a key swapped, an image altered; a repeated
// delivery is no failure.
func TestDDBProducerAndJudge(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	endpoint, stop, err := testenv.DDBStreamsEndpoint(ctx, ".", local.DDBLocalOptions{Rotate: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	cfg, err := local.AWSConfig(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	ddb, st := local.DDBClients(cfg, endpoint)
	streamARN, err := local.CreateStreamTable(ctx, ddb, "judged", types.StreamViewTypeNewAndOldImages)
	if err != nil {
		t.Fatal(err)
	}
	p := NewDDBProducer("judged", 20, 42)
	for range 3 {
		if err := p.Write(ctx, ddb, 100); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond)
	}
	got, shards := streamEvents(t, ctx, endpoint, st, streamARN)
	if shards < 3 {
		t.Fatalf("%d shards: fewer than two rotations", shards)
	}
	if bad := Failed(DDBRecords(got, p.Want)); bad != "" {
		t.Fatal(bad)
	}
	if p.Total() != 300 || len(got) != 300 {
		t.Fatalf("%d changes written, %d records read", p.Total(), len(got))
	}
	kinds := map[string]int{}
	for _, r := range got {
		kinds[r.EventName]++
	}
	if kinds["INSERT"] == 0 || kinds["MODIFY"] == 0 || kinds["REMOVE"] == 0 {
		t.Fatalf("the producer did not make every kind of change: %v", kinds)
	}

	judge := func(recs []events.DynamoDBEventRecord) string { return Failed(DDBRecords(recs, p.Want)) }
	if bad := judge(append(slices.Clone(got), got[5], got[0])); bad != "" {
		t.Errorf("repeated deliveries failed the judge: %s", bad)
	}
	if judge(slices.Delete(slices.Clone(got), 7, 8)) == "" {
		t.Error("a missing change passed")
	}
	swapped := slices.Clone(got)
	k := got[0].Change.Keys["k"].String()
	i := slices.IndexFunc(got[1:], func(r events.DynamoDBEventRecord) bool { return r.Change.Keys["k"].String() == k }) + 1
	swapped[0], swapped[i] = swapped[i], swapped[0]
	if judge(swapped) == "" {
		t.Error("two changes of a key out of order passed")
	}
	altered := slices.Clone(got)
	for j, r := range altered {
		if r.EventName == "MODIFY" {
			r.Change.OldImage = r.Change.NewImage
			altered[j] = r
			break
		}
	}
	if judge(altered) == "" {
		t.Error("a MODIFY whose old image is its new image passed")
	}
}
