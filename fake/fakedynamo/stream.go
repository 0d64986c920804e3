package fakedynamo

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// Stream defaults, as DynamoDB Streams has them.
const (
	// DefaultShardRotation is how long a stream shard stays open before it closes and a child
	// takes over. DynamoDB does not document it; shards are seen to close about every four hours.
	DefaultShardRotation = 4 * time.Hour
	// DefaultStreamRetention is how long a stream record stays readable (the trim).
	DefaultStreamRetention = 24 * time.Hour
	// DefaultIteratorTTL is how long a shard iterator stays valid after it was issued.
	DefaultIteratorTTL = 15 * time.Minute
	// maxStreamRecords and maxStreamBytes bound one GetRecords answer.
	maxStreamRecords = 1000
	maxStreamBytes   = 1 << 20
	// seqDigits is the width of a sequence number: "1" then a 20-digit counter.
	seqDigits = 21
)

// WithShardRotation sets how long a stream shard stays open before it closes and its child
// opens. Default DefaultShardRotation; tests use seconds.
func WithShardRotation(p time.Duration) Option { return func(d *DB) { d.rotation = p } }

// WithStreamRetention sets how long stream records stay readable. Default
// DefaultStreamRetention.
func WithStreamRetention(r time.Duration) Option { return func(d *DB) { d.retention = r } }

// WithIteratorTTL sets how long a shard iterator stays valid. Default DefaultIteratorTTL.
func WithIteratorTTL(ttl time.Duration) Option { return func(d *DB) { d.iterTTL = ttl } }

// WithStreamShards sets how many shards of a stream are open at once (items are spread over
// them by their partition). Default 1.
func WithStreamShards(n int) Option { return func(d *DB) { d.lanes = max(1, n) } }

// WithShardReadRate limits GetRecords calls per shard per second (a LimitExceededException
// beyond it, with a burst of one second). Default 0: no limit.
func WithShardReadRate(perSecond float64) Option { return func(d *DB) { d.readRate = perSecond } }

// WithRegion sets the region of ARNs and records. Default us-east-1.
func WithRegion(r string) Option { return func(d *DB) { d.region = r } }

// WithAccount sets the account of ARNs. Default 000000000000.
func WithAccount(a string) Option { return func(d *DB) { d.account = a } }

// stream is one DynamoDB stream: a table gets a new one each time its stream is enabled.
type stream struct {
	arn, label string
	table      string
	view       types.StreamViewType
	keySchema  []types.KeySchemaElement
	created    time.Time
	enabled    bool
	disabledAt time.Time
	seq        uint64          // the last sequence number handed out
	made       int             // shards made so far
	idMs       int64           // the time part of the newest shard id
	shards     []*shard        // every shard not yet trimmed, in creation (and id) order
	open       []*shard        // the open shard of each lane; nil entries once disabled
	trimmed    map[string]bool // ids of the shards trimmed away
}

// shard is one stream shard. Its records keep their absolute positions: base counts the
// records trimmed from its front, so records[i] is at position base+i.
type shard struct {
	id, parent string
	opened     time.Time
	closed     bool
	closedAt   time.Time
	start, end uint64 // end is set once closed
	last       uint64 // the newest record's sequence number, trimmed or not (start: none)
	base       int
	records    []*change
	reads      bucket
}

// change is one stream record as stored: the images are kept whole and cut to the stream's
// view type when read.
type change struct {
	seq      uint64
	at       time.Time
	name     streamtypes.OperationType
	keys     map[string]types.AttributeValue
	old, new map[string]types.AttributeValue
}

func formatStreamSeq(n uint64) string {
	return "1" + fmt.Sprintf("%0*d", seqDigits-1, n)
}

// parseStreamSeq reads a number made by formatStreamSeq.
func parseStreamSeq(s string) (uint64, bool) {
	rest, ok := strings.CutPrefix(s, "1")
	if !ok || len(s) != seqDigits {
		return 0, false
	}
	n, err := strconv.ParseUint(rest, 10, 64)
	return n, err == nil
}

// enableStream gives t a new stream of view type v at now; d.mu is held.
func (d *DB) enableStream(t *table, v types.StreamViewType, now time.Time) {
	label := now.UTC().Format("2006-01-02T15:04:05.000")
	for _, s := range d.streams {
		if s.label == label && s.table == t.name {
			now = now.Add(time.Millisecond) // two streams of one table never share a label
			label = now.UTC().Format("2006-01-02T15:04:05.000")
		}
	}
	s := &stream{
		arn: d.tableARN(t.name) + "/stream/" + label, label: label, table: t.name, view: v,
		keySchema: t.describe(types.TableStatusActive).KeySchema, created: now, enabled: true, trimmed: map[string]bool{},
	}
	for range d.lanes {
		s.open = append(s.open, d.newShard(s, "", now))
	}
	d.streams = append(d.streams, s)
	t.stream = s
}

// disableStream closes every open shard of s at now; d.mu is held.
func (d *DB) disableStream(s *stream, now time.Time) {
	if s == nil || !s.enabled {
		return
	}
	for i, sh := range s.open {
		s.closeShard(sh, now)
		s.open[i] = nil
	}
	s.enabled, s.disabledAt = false, now
}

func (d *DB) newShard(s *stream, parent string, at time.Time) *shard {
	// Ids sort in creation order (DescribeStream pages by them): the time part never goes
	// back, and the counter orders shards made at one instant.
	s.made++
	s.idMs = max(s.idMs, at.UnixMilli())
	s.seq++
	sh := &shard{
		id:     fmt.Sprintf("shardId-%020d-%08x", s.idMs, s.made),
		parent: parent, opened: at, start: s.seq, last: s.seq, reads: newBucket(d.readRate, time.Second, at),
	}
	s.shards = append(s.shards, sh)
	return sh
}

func (s *stream) closeShard(sh *shard, at time.Time) {
	sh.closed, sh.closedAt, sh.end = true, at, sh.last
}

// tick brings every stream to now: open shards older than the rotation period close and
// their children open, records older than the retention are trimmed, and closed shards and
// disabled streams past the retention go; d.mu is held. There is no goroutine: every call
// that touches a stream ticks first, so a reader sees the same stream whenever it looks.
func (d *DB) tick() {
	now := d.now()
	cutoff := now.Add(-d.retention)
	d.streams = slices.DeleteFunc(d.streams, func(s *stream) bool {
		if s.enabled {
			d.rotate(s, now)
		}
		s.trim(cutoff)
		return !s.enabled && s.disabledAt.Before(cutoff)
	})
}

// trim drops the records created before cutoff and the shards closed before it.
func (s *stream) trim(cutoff time.Time) {
	for _, sh := range s.shards {
		n := 0
		for n < len(sh.records) && sh.records[n].at.Before(cutoff) {
			n++
		}
		sh.records, sh.base = sh.records[n:], sh.base+n
	}
	s.shards = slices.DeleteFunc(s.shards, func(sh *shard) bool {
		gone := sh.closed && sh.closedAt.Before(cutoff)
		if gone {
			s.trimmed[sh.id] = true
		}
		return gone
	})
}

// RotateStream closes the open shards of a table's stream now and opens their children, as
// the rotation period does (for schedules that rotate at chosen times). A table without an
// enabled stream is a ResourceNotFoundException.
func (d *DB) RotateStream(tableName string) error {
	return d.onStream(tableName, func(s *stream, now time.Time) {
		for i, sh := range s.open {
			s.closeShard(sh, now)
			s.open[i] = d.newShard(s, sh.id, now)
		}
	})
}

// TrimStream trims a table's stream now as the retention does later: the records created
// before cutoff and the shards closed before it go (for schedules that trim at chosen times).
func (d *DB) TrimStream(tableName string, cutoff time.Time) error {
	return d.onStream(tableName, func(s *stream, _ time.Time) { s.trim(cutoff) })
}

// onStream runs do on a table's enabled stream, brought to now, under d.mu.
func (d *DB) onStream(tableName string, do func(s *stream, now time.Time)) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.tick()
	t, ok := d.tables[tableName]
	if !ok || t.stream == nil || !t.stream.enabled {
		return streamNotFound("Table: " + tableName + " has no enabled stream")
	}
	do(t.stream, d.now())
	return nil
}

// rotate closes each open shard of s that has been open a whole period and opens its child.
// A stream idle for several periods gets one child, opened at the last period's start.
func (d *DB) rotate(s *stream, now time.Time) {
	if d.rotation <= 0 {
		return
	}
	for i, sh := range s.open {
		age := now.Sub(sh.opened)
		if age < d.rotation {
			continue
		}
		s.closeShard(sh, sh.opened.Add(d.rotation))
		s.open[i] = d.newShard(s, sh.id, sh.opened.Add(age/d.rotation*d.rotation))
	}
}

// recordChange writes the stream record of one write to t's stream, if it has an enabled one
// and the write changed the item (DynamoDB writes no record for a write that changes nothing);
// d.mu is held.
func (d *DB) recordChange(t *table, part int, key, old, cur map[string]types.AttributeValue) {
	s := t.stream
	if s == nil || !s.enabled || (old == nil && cur == nil) || (old != nil && cur != nil && sameItem(old, cur)) {
		return
	}
	d.tick()
	if !s.enabled {
		return
	}
	name := streamtypes.OperationTypeModify
	switch {
	case old == nil:
		name = streamtypes.OperationTypeInsert
	case cur == nil:
		name = streamtypes.OperationTypeRemove
	}
	sh := s.open[part%len(s.open)]
	s.seq++
	sh.last = s.seq
	sh.records = append(sh.records, &change{seq: s.seq, at: d.now(), name: name, keys: cloneItem(key), old: cloneItem(old), new: cloneItem(cur)})
}

func sameItem(a, b map[string]types.AttributeValue) bool {
	return equal(&types.AttributeValueMemberM{Value: a}, &types.AttributeValueMemberM{Value: b})
}

// view cuts a change to the stream's view type, as GetRecords returns it. SizeBytes is the
// size of the keys and images sent (AWS's recorded NEW_IMAGE record of a 43-byte item with a
// 27-byte key says 70).
func (d *DB) view(s *stream, c *change) streamtypes.Record {
	r := &streamtypes.StreamRecord{
		ApproximateCreationDateTime: aws.Time(c.at.Truncate(time.Second)),
		Keys:                        toStreamItem(c.keys),
		SequenceNumber:              aws.String(formatStreamSeq(c.seq)),
		StreamViewType:              streamtypes.StreamViewType(s.view),
	}
	size := ItemSize(c.keys)
	if s.view == types.StreamViewTypeNewImage || s.view == types.StreamViewTypeNewAndOldImages {
		if c.new != nil {
			r.NewImage, size = toStreamItem(c.new), size+ItemSize(c.new)
		}
	}
	if s.view == types.StreamViewTypeOldImage || s.view == types.StreamViewTypeNewAndOldImages {
		if c.old != nil {
			r.OldImage, size = toStreamItem(c.old), size+ItemSize(c.old)
		}
	}
	r.SizeBytes = aws.Int64(int64(size))
	id := md5.Sum([]byte(s.arn + "/" + formatStreamSeq(c.seq)))
	return streamtypes.Record{
		AwsRegion: aws.String(d.region), Dynamodb: r, EventID: aws.String(hex.EncodeToString(id[:])),
		EventName: c.name, EventSource: aws.String("aws:dynamodb"), EventVersion: aws.String("1.1"),
	}
}

// toStreamItem converts an item to the DynamoDB Streams API's attribute values.
func toStreamItem(item map[string]types.AttributeValue) map[string]streamtypes.AttributeValue {
	if item == nil {
		return nil
	}
	out := make(map[string]streamtypes.AttributeValue, len(item))
	for k, v := range item {
		out[k] = toStreamValue(v)
	}
	return out
}

func toStreamValue(v types.AttributeValue) streamtypes.AttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return &streamtypes.AttributeValueMemberS{Value: v.Value}
	case *types.AttributeValueMemberN:
		return &streamtypes.AttributeValueMemberN{Value: v.Value}
	case *types.AttributeValueMemberB:
		return &streamtypes.AttributeValueMemberB{Value: slices.Clone(v.Value)}
	case *types.AttributeValueMemberBOOL:
		return &streamtypes.AttributeValueMemberBOOL{Value: v.Value}
	case *types.AttributeValueMemberNULL:
		return &streamtypes.AttributeValueMemberNULL{Value: v.Value}
	case *types.AttributeValueMemberSS:
		return &streamtypes.AttributeValueMemberSS{Value: slices.Clone(v.Value)}
	case *types.AttributeValueMemberNS:
		return &streamtypes.AttributeValueMemberNS{Value: slices.Clone(v.Value)}
	case *types.AttributeValueMemberBS:
		out := make([][]byte, len(v.Value))
		for i, b := range v.Value {
			out[i] = slices.Clone(b)
		}
		return &streamtypes.AttributeValueMemberBS{Value: out}
	case *types.AttributeValueMemberL:
		out := make([]streamtypes.AttributeValue, len(v.Value))
		for i, e := range v.Value {
			out[i] = toStreamValue(e)
		}
		return &streamtypes.AttributeValueMemberL{Value: out}
	case *types.AttributeValueMemberM:
		return &streamtypes.AttributeValueMemberM{Value: toStreamItem(v.Value)}
	}
	return nil
}
