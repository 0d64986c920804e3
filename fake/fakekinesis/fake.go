package fakekinesis

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// Operation names passed to an Inject callback and accepted by Calls: the read calls.
const (
	// OpListShards is a ListShards call; Inject gets its *kinesis.ListShardsInput.
	OpListShards = "ListShards"
	// OpGetShardIterator is a GetShardIterator call; Inject gets its
	// *kinesis.GetShardIteratorInput.
	OpGetShardIterator = "GetShardIterator"
	// OpGetRecords is a GetRecords call; Inject gets its *kinesis.GetRecordsInput.
	OpGetRecords = "GetRecords"
)

const (
	defaultIteratorTTL = 5 * time.Minute
	pageTokenTTL       = 300 * time.Second
	maxGetRecords      = 10000
	maxGetBytes        = 10 << 20
	defaultListShards  = 1000
	maxListShardsInput = 10000
)

// Option configures a Fake.
type Option func(*config) // nil Options are ignored

type config struct {
	now      func() time.Time
	ttl      time.Duration
	region   string
	account  string
	pageSize int // ListShards page size when MaxResults is not given
	efo      efoConfig
}

// WithListShardsPageSize sets how many shards a ListShards call without MaxResults returns per
// page (default 1000, as Kinesis), so that callers' paging can be exercised with few shards.
// Values outside [1, 1000] keep the default.
func WithListShardsPageSize(n int) Option {
	return func(c *config) {
		if n >= 1 && n <= defaultListShards {
			c.pageSize = n
		}
	}
}

// WithClock sets the clock used for arrival timestamps, iterator expiry,
// MillisBehindLatest and shard filters. Default time.Now. The clock is called
// without the Fake's lock held, but must not block.
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		if now != nil {
			c.now = now
		}
	}
}

// WithIteratorTTL sets how long a shard iterator stays valid. Default 5
// minutes, as in Kinesis. A value <= 0 keeps the default.
func WithIteratorTTL(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.ttl = d
		}
	}
}

// WithRegion sets the region in stream ARNs. Default "us-east-1".
func WithRegion(region string) Option {
	return func(c *config) { c.region = region }
}

// WithAccount sets the account id in stream ARNs and error messages.
// Default "000000000000".
func WithAccount(account string) Option {
	return func(c *config) { c.account = account }
}

// Fake is an in-memory Kinesis read API. The zero value is not usable; call
// New. All methods are safe for concurrent use.
type Fake struct {
	cfg config

	mu      sync.RWMutex
	streams []*stream // index is the stream's id
	byName  map[string]*stream
	byARN   map[string]*stream
	pages   map[string]page // ListShards NextToken state
	pageSeq uint64

	injector atomic.Pointer[func(op string, in any) error]
	calls    [6]atomic.Int64
	efo      efoState
}

type stream struct {
	id        int
	name, arn string
	counter   uint64   // last sequence counter handed out
	shards    []*shard // index is the shard number; nil once trimmed
	open      []*shard // open shards ordered by hash range
	// retention is RetentionPeriodHours; 0 means the default 24 hours (see SetRetention).
	retention time.Duration
	// wake is closed when a record is added or a shard closes (subscribe.go).
	wake chan struct{}
}

type shard struct {
	num               int
	id                string
	lo, hi            u128
	hashRange         types.HashKeyRange
	parent, adjacent  *string
	startSeq          string
	endSeq            *string // nil while open
	created, closedAt time.Time
	children          []types.ChildShard

	base int            // position of recs[0]; grows with TrimBefore
	recs []types.Record // in sequence order
	meta []recMeta      // current chunk backing the records' pointers
}

// recMeta holds what a types.Record points to. Chunks of them are allocated
// together and never moved, so each Put allocates little.
type recMeta struct {
	seq, pk string
	arrival time.Time
}

// New returns an empty Fake. It never fails.
func New(opts ...Option) *Fake {
	f := &Fake{
		cfg:    config{now: time.Now, ttl: defaultIteratorTTL, region: "us-east-1", account: "000000000000", pageSize: defaultListShards},
		byName: map[string]*stream{},
		byARN:  map[string]*stream{},
		pages:  map[string]page{},
	}
	for _, o := range opts {
		if o != nil {
			o(&f.cfg)
		}
	}
	return f
}

// Inject installs fn, the fault hook, replacing any previous one; nil removes it. fn is called
// at the start of every ListShards, GetShardIterator, GetRecords, DescribeStreamSummary and
// SubscribeToShard call, after the call is counted, with the operation name (OpListShards, ...)
// and the call's input pointer (*kinesis.GetRecordsInput, ...), and before each event a
// subscription sends (OpSubscribeToShardEvent). A non-nil result is returned as the call's
// error, wrapped as the SDK wraps errors (see ErrThrottled); for OpSubscribeToShardEvent it ends
// the subscription instead (see ErrDropped). fn runs without the Fake's lock held, so it may call
// Put, Split and the rest, or block. It may be called concurrently. RegisterStreamConsumer and
// DescribeStreamConsumer are not hooked.
func (f *Fake) Inject(fn func(op string, in any) error) {
	if fn == nil {
		f.injector.Store(nil)
		return
	}
	f.injector.Store(&fn)
}

// Calls returns how many times op (one of the Op constants) has been called, counting failed
// calls and the one in progress; for OpSubscribeToShardEvent, how many events subscriptions sent
// (those the hook failed not included). Unknown ops give 0.
func (f *Fake) Calls(op string) int {
	if i := opIndex(op); i >= 0 {
		return int(f.calls[i].Load())
	}
	return 0
}

func opIndex(op string) int {
	switch op {
	case OpListShards:
		return 0
	case OpGetShardIterator:
		return 1
	case OpGetRecords:
		return 2
	case OpDescribeStreamSummary:
		return 3
	case OpSubscribeToShard:
		return 4
	case OpSubscribeToShardEvent:
		return 5
	}
	return -1
}

// CreateStream creates an active stream with n shards whose hash key ranges
// divide [0, 2^128-1] evenly, and returns its ARN. It panics if the name is
// empty or taken, or n < 1.
func (f *Fake) CreateStream(name string, n int) (arn string) {
	if name == "" || n < 1 {
		panic(fmt.Sprintf("fakekinesis: CreateStream(%q, %d): need a name and at least one shard", name, n))
	}
	now := f.cfg.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byName[name] != nil {
		panic(fmt.Sprintf("fakekinesis: stream %q already exists", name))
	}
	s := &stream{
		id:   len(f.streams),
		name: name,
		arn:  fmt.Sprintf("arn:aws:kinesis:%s:%s:stream/%s", f.cfg.region, f.cfg.account, name),
	}
	for _, r := range evenRanges(n) {
		s.addShard(r, nil, nil, now)
	}
	s.reindex()
	f.streams = append(f.streams, s)
	f.byName[name] = s
	f.byARN[s.arn] = s
	return s.arn
}

// Put appends a record to the open shard whose hash key range holds the MD5
// of partitionKey and returns that shard's id and the record's sequence
// number. data is stored and later returned by GetRecords without copying:
// the caller must not modify it afterwards. It panics on an unknown stream.
func (f *Fake) Put(streamName, partitionKey string, data []byte) (shardID, seq string) {
	now := f.cfg.now()
	h := hashKey(partitionKey)
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.mustStream(streamName)
	sh := s.route(h)
	return sh.id, s.appendRecord(sh, partitionKey, data, now)
}

// PutToShard appends a record to the named open shard regardless of the
// partition key's hash, and returns its sequence number. It panics on an
// unknown stream, or a shard that does not exist or is closed.
func (f *Fake) PutToShard(streamName, shardID, partitionKey string, data []byte) (seq string) {
	now := f.cfg.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.mustStream(streamName)
	return s.appendRecord(s.mustOpenShard(shardID), partitionKey, data, now)
}

// Entry is one record for PutMany.
type Entry struct {
	PartitionKey string // routes the record, as Put's partitionKey
	Data         []byte // stored without copying, as Put's data
}

// PutMany is Put for many records under one lock, in order, with one clock
// reading. It returns the sequence numbers in entry order.
func (f *Fake) PutMany(streamName string, entries []Entry) (seqs []string) {
	now := f.cfg.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.mustStream(streamName)
	seqs = make([]string, len(entries))
	for i, e := range entries {
		seqs[i] = s.appendRecord(s.route(hashKey(e.PartitionKey)), e.PartitionKey, e.Data, now)
	}
	return seqs
}

// Split closes an open shard and creates two children, each with half of its
// hash key range and ParentShardId set to it. Later Puts route to the
// children. It panics on an unknown or closed shard, or one with a single
// hash key.
func (f *Fake) Split(streamName, shardID string) (children [2]string) {
	now := f.cfg.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.mustStream(streamName)
	p := s.mustOpenShard(shardID)
	a, b, ok := halve(p.lo, p.hi)
	if !ok {
		panic(fmt.Sprintf("fakekinesis: shard %s has one hash key and cannot be split", shardID))
	}
	s.close(p, now)
	for i, r := range [2][2]u128{a, b} {
		c := s.addShard(r, &p.id, nil, now)
		p.children = append(p.children, childOf(c, p.id))
		children[i] = c.id
	}
	s.reindex()
	return children
}

// Merge closes two open shards with adjacent hash key ranges (in either
// order) and creates one child covering both, with ParentShardId shardA and
// AdjacentParentShardId shardB. It panics unless both are open and adjacent.
func (f *Fake) Merge(streamName, shardA, shardB string) (child string) {
	now := f.cfg.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.mustStream(streamName)
	a, b := s.mustOpenShard(shardA), s.mustOpenShard(shardB)
	var r [2]u128
	switch {
	case adjacent(a.hi, b.lo):
		r = [2]u128{a.lo, b.hi}
	case adjacent(b.hi, a.lo):
		r = [2]u128{b.lo, a.hi}
	default:
		panic(fmt.Sprintf("fakekinesis: shards %s and %s are not adjacent", shardA, shardB))
	}
	s.close(a, now)
	s.close(b, now)
	c := s.addShard(r, &a.id, &b.id, now)
	cs := childOf(c, a.id, b.id)
	a.children = []types.ChildShard{cs}
	b.children = []types.ChildShard{cs}
	s.reindex()
	return c.id
}

// Trim removes a closed shard and its records, as when its last record
// passes the retention period. The shard disappears from ListShards, and
// GetShardIterator or GetRecords on it return *types.ResourceNotFoundException.
// It panics unless the shard exists and is closed.
func (f *Fake) Trim(streamName, shardID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.mustStream(streamName)
	sh := s.mustShard(shardID)
	if sh.endSeq == nil {
		panic(fmt.Sprintf("fakekinesis: shard %s is open; only closed shards expire", shardID))
	}
	s.shards[sh.num] = nil
}

// TrimBefore drops the shard's records with sequence numbers below seq, as
// retention does. Iterators positioned on dropped records then read from the
// new trim horizon, as in Kinesis. It panics on an unknown shard.
func (f *Fake) TrimBefore(streamName, shardID, seq string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sh := f.mustStream(streamName).mustShard(shardID)
	k := sh.search(seq, false)
	sh.recs = append([]types.Record(nil), sh.recs[k:]...)
	sh.base += k
}

func (f *Fake) mustStream(name string) *stream {
	s := f.byName[name]
	if s == nil {
		panic(fmt.Sprintf("fakekinesis: no stream %q", name))
	}
	return s
}

func (s *stream) shardByID(id string) *shard {
	n, ok := shardNumber(id)
	if !ok || n >= len(s.shards) {
		return nil
	}
	return s.shards[n]
}

func (s *stream) mustShard(id string) *shard {
	sh := s.shardByID(id)
	if sh == nil {
		panic(fmt.Sprintf("fakekinesis: no shard %q in stream %q", id, s.name))
	}
	return sh
}

func (s *stream) mustOpenShard(id string) *shard {
	sh := s.mustShard(id)
	if sh.endSeq != nil {
		panic(fmt.Sprintf("fakekinesis: shard %s in stream %q is closed", id, s.name))
	}
	return sh
}

func (s *stream) nextSeq(shardNum int) string {
	s.counter++
	return formatSeq(s.counter, shardNum)
}

func (s *stream) addShard(r [2]u128, parent, adjacent *string, now time.Time) *shard {
	num := len(s.shards)
	sh := &shard{
		num: num, id: shardName(num), lo: r[0], hi: r[1],
		hashRange: types.HashKeyRange{
			StartingHashKey: ptr(r[0].big().String()),
			EndingHashKey:   ptr(r[1].big().String()),
		},
		parent: parent, adjacent: adjacent, created: now,
	}
	sh.startSeq = s.nextSeq(num)
	s.shards = append(s.shards, sh)
	return sh
}

func (s *stream) close(sh *shard, now time.Time) {
	sh.endSeq = ptr(s.nextSeq(sh.num))
	sh.closedAt = now
	s.wakeSubscribers()
}

// reindex rebuilds the routing table of open shards after a change.
func (s *stream) reindex() {
	s.open = s.open[:0]
	for _, sh := range s.shards {
		if sh != nil && sh.endSeq == nil {
			s.open = append(s.open, sh)
		}
	}
	sort.Slice(s.open, func(i, j int) bool { return s.open[i].lo.less(s.open[j].lo) })
}

// route finds the open shard whose range holds h. The open ranges always
// tile the whole key space, so there is exactly one.
func (s *stream) route(h u128) *shard {
	i := sort.Search(len(s.open), func(i int) bool { return h.less(s.open[i].lo) })
	return s.open[i-1]
}

func (s *stream) appendRecord(sh *shard, pk string, data []byte, now time.Time) string {
	at := now.Truncate(time.Millisecond)
	if n := len(sh.recs); n > 0 && at.Before(*sh.recs[n-1].ApproximateArrivalTimestamp) {
		at = *sh.recs[n-1].ApproximateArrivalTimestamp // keep arrival order for AT_TIMESTAMP
	}
	if len(sh.meta) == cap(sh.meta) {
		sh.meta = make([]recMeta, 0, min(max(len(sh.recs), 16), 1024))
	}
	sh.meta = append(sh.meta, recMeta{seq: s.nextSeq(sh.num), pk: pk, arrival: at})
	m := &sh.meta[len(sh.meta)-1]
	sh.recs = append(sh.recs, types.Record{
		Data:                        data,
		SequenceNumber:              &m.seq,
		PartitionKey:                &m.pk,
		ApproximateArrivalTimestamp: &m.arrival,
	})
	s.wakeSubscribers()
	return m.seq
}

// search returns the index of the first record with a sequence number
// above seq (after) or at or above it (!after).
func (sh *shard) search(seq string, after bool) int {
	return sort.Search(len(sh.recs), func(i int) bool {
		c := CompareSeq(*sh.recs[i].SequenceNumber, seq)
		return c > 0 || (c == 0 && !after)
	})
}

func childOf(c *shard, parents ...string) types.ChildShard {
	hr := c.hashRange
	return types.ChildShard{ShardId: &c.id, ParentShards: parents, HashKeyRange: &hr}
}

func ptr[T any](v T) *T { return &v }

// nameFromARN returns the stream name in a stream ARN, for error messages.
func nameFromARN(arn string) string {
	if i := strings.LastIndexByte(arn, '/'); i >= 0 {
		return arn[i+1:]
	}
	return arn
}
