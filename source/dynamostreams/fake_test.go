package dynamostreams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/fake/fakedynamo"
	"github.com/kinesis-esm/esm/source"
)

// clock is a manual clock for the fake.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fakeTable is a table of the in-memory DynamoDB with a NEW_AND_OLD_IMAGES stream whose shards
// rotate every rotation of c, and the Stream that reads it.
func fakeTable(t *testing.T, c *clock, opts ...fakedynamo.Option) (*fakedynamo.DB, *Stream) {
	t.Helper()
	db := fakedynamo.New(append([]fakedynamo.Option{fakedynamo.WithClock(c.now)}, opts...)...)
	out, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName: aws.String("orders"), BillingMode: ddbtypes.BillingModePayPerRequest,
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("k"), KeyType: ddbtypes.KeyTypeHash}},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("k"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		StreamSpecification:  &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeNewAndOldImages},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(db, aws.ToString(out.TableDescription.LatestStreamArn))
	if err != nil {
		t.Fatal(err)
	}
	return db, s
}

func putVersion(t *testing.T, db *fakedynamo.DB, key string, v int) {
	t.Helper()
	item := map[string]ddbtypes.AttributeValue{"k": &ddbtypes.AttributeValueMemberS{Value: key}, "v": &ddbtypes.AttributeValueMemberN{Value: fmt.Sprint(v)}}
	if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String("orders"), Item: item}); err != nil {
		t.Fatal(err)
	}
}

// change is what a test sees of one record's event object.
type change struct {
	EventName string `json:"eventName"`
	Dynamodb  struct {
		Keys     map[string]map[string]string `json:"Keys"`
		NewImage map[string]map[string]string `json:"NewImage"`
		OldImage map[string]map[string]string `json:"OldImage"`
	} `json:"dynamodb"`
}

// readShard reads a shard from TRIM_HORIZON to its end (a closed one) or until a read returns
// nothing (an open one), and returns its records and, at a closed shard's end, its children.
func readShard(t *testing.T, s *Stream, id string) (recs []source.Record, children []source.Shard, ended bool) {
	t.Helper()
	it, err := s.Open(context.Background(), id, source.Position{Type: source.TrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	for {
		p, err := s.Read(context.Background(), id, it, 7)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, p.Records...)
		if p.Next == "" {
			return recs, p.Children, true
		}
		if len(p.Records) == 0 {
			return recs, nil, false
		}
		it = p.Next
	}
}

// TestReadsTheFakeAcrossRotations: 60 writes over 10 keys across six shard rotations, read
// shard by shard in lineage order from the roots the listing gives, each closed shard's
// children taken from its end (CHILD_SHARDS), not from a listing: every change is read once,
// in order per key, with its old and new images.
func TestReadsTheFakeAcrossRotations(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)}
	db, s := fakeTable(t, c, fakedynamo.WithShardRotation(10*time.Second))
	for i := range 60 {
		putVersion(t, db, fmt.Sprintf("key-%d", i%10), i/10)
		c.add(time.Second + 500*time.Millisecond)
	}
	shards, err := s.Shards(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) < 6 {
		t.Fatalf("%d shards after 90 s at a 10 s rotation", len(shards))
	}
	var queue []string
	for _, sh := range shards {
		if len(sh.Parents) == 0 {
			queue = append(queue, sh.ID)
		}
		if len(sh.Parents) > 1 {
			t.Fatalf("shard %s has %d parents", sh.ID, len(sh.Parents))
		}
	}
	last := map[string]int{}
	read, closedRead := 0, 0
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		recs, children, ended := readShard(t, s, id)
		for _, r := range recs {
			var ch change
			if err := json.Unmarshal(r.Data, &ch); err != nil {
				t.Fatal(err)
			}
			key := ch.Dynamodb.Keys["k"]["S"]
			var v int
			fmt.Sscan(ch.Dynamodb.NewImage["v"]["N"], &v)
			if prev, seen := last[key]; seen && v != prev+1 || !seen && v != 0 {
				t.Fatalf("%s: version %d after %d (seen %v)", key, v, prev, seen)
			}
			if (v == 0) != (ch.EventName == "INSERT") || v > 0 && ch.Dynamodb.OldImage["v"]["N"] != fmt.Sprint(v-1) {
				t.Fatalf("%s version %d: %s with old image %v", key, v, ch.EventName, ch.Dynamodb.OldImage)
			}
			if r.PartitionKey != fmt.Sprintf(`{"k":{"S":%q}}`, key) || r.ArrivalTime.IsZero() {
				t.Fatalf("record %+v", r)
			}
			last[key] = v
			read++
		}
		if ended {
			closedRead++
			for _, ch := range children {
				if len(ch.Parents) != 1 || ch.Parents[0] != id {
					t.Fatalf("child %+v of %s", ch, id)
				}
				queue = append(queue, ch.ID)
			}
		}
	}
	if read != 60 || closedRead < 5 {
		t.Fatalf("read %d of 60 changes, %d closed shards to their end", read, closedRead)
	}
}

// oneShard is a fake table (its clock c) with one change, "a" version 0, in its stream's one shard.
func oneShard(t *testing.T, opts ...fakedynamo.Option) (c *clock, db *fakedynamo.DB, s *Stream, shardID string) {
	t.Helper()
	c = &clock{t: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)}
	db, s = fakeTable(t, c, opts...)
	putVersion(t, db, "a", 0)
	shards, err := s.Shards(context.Background())
	if err != nil || len(shards) != 1 {
		t.Fatalf("shards %v, %v", shards, err)
	}
	return c, db, s, shards[0].ID
}

// TestFakeTrimAndExpiry: an iterator older than the fake's TTL is source.ErrExpired; a checkpoint
// trimmed away opens at TRIM_HORIZON.
func TestFakeTrimAndExpiry(t *testing.T) {
	c, db, s, id := oneShard(t, fakedynamo.WithIteratorTTL(15*time.Minute), fakedynamo.WithStreamRetention(time.Hour))
	it, err := s.Open(context.Background(), id, source.Position{Type: source.TrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Read(context.Background(), id, it, 10)
	if err != nil || len(p.Records) != 1 {
		t.Fatalf("first read: %+v, %v", p, err)
	}
	first := p.Records[0].SequenceNumber
	c.add(16 * time.Minute)
	if _, err := s.Read(context.Background(), id, p.Next, 10); !errors.Is(err, source.ErrExpired) {
		t.Fatalf("a 16-minute-old iterator: %v, want ErrExpired", err)
	}
	c.add(2 * time.Hour) // "a" is trimmed
	putVersion(t, db, "b", 0)
	if _, err := s.open(context.Background(), id, source.Position{Type: source.AfterSequenceNumber, SequenceNumber: first}); !errors.Is(err, errTrimmed) {
		t.Fatalf("the fake does not trim: %v", err)
	}
	it, err = s.Open(context.Background(), id, source.Position{Type: source.AfterSequenceNumber, SequenceNumber: first})
	if err != nil {
		t.Fatalf("a trimmed checkpoint: %v", err)
	}
	p, err = s.Read(context.Background(), id, it, 10)
	if err != nil || len(p.Records) != 1 || p.Records[0].SequenceNumber == first {
		t.Fatalf("after the trim: %+v, %v; want b's record alone", p, err)
	}
}

// TestFakeShardTrimmedAway: a closed shard whose every record is trimmed opens (TRIM_HORIZON is
// trimmed too) and its first read ends it with its children, so its children need not wait for a
// listing.
func TestFakeShardTrimmedAway(t *testing.T) {
	c, db, s, first := oneShard(t, fakedynamo.WithShardRotation(10*time.Second), fakedynamo.WithStreamRetention(time.Minute))
	c.add(15 * time.Second) // the first shard closes
	putVersion(t, db, "a", 1)
	c.add(50 * time.Second) // its record is 65 s old, trimmed (its child's, 50 s, is kept)
	putVersion(t, db, "a", 2)
	it, err := s.Open(context.Background(), first, source.Position{Type: source.TrimHorizon})
	if err != nil {
		t.Fatalf("open a shard trimmed away: %v", err)
	}
	p, err := s.Read(context.Background(), first, it, 10)
	if err != nil || p.Next != "" || len(p.Records) != 0 || len(p.Children) != 1 || p.Children[0].Parents[0] != first {
		t.Fatalf("read of a shard trimmed away: %+v, %v; want its end with its child", p, err)
	}
}
