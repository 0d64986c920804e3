package fakedynamo

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// Operation names, as Call.Op and in Stats.
const (
	OpGetItem       = "GetItem"
	OpBatchGetItem  = "BatchGetItem"
	OpPutItem       = "PutItem"
	OpUpdateItem    = "UpdateItem"
	OpDeleteItem    = "DeleteItem"
	OpQuery         = "Query"
	OpScan          = "Scan"
	OpCreateTable   = "CreateTable"
	OpDescribeTable = "DescribeTable"
	OpUpdateTable   = "UpdateTable"
	OpDeleteTable   = "DeleteTable"
)

// Limits DynamoDB applies, used as defaults.
const (
	// DefaultTableReadUnits and DefaultTableWriteUnits are an on-demand table's default
	// account-level quota per table, in units per second.
	DefaultTableReadUnits  = 40000
	DefaultTableWriteUnits = 40000
	// DefaultPartitionReadUnits and DefaultPartitionWriteUnits are what one partition serves
	// per second.
	DefaultPartitionReadUnits  = 3000
	DefaultPartitionWriteUnits = 1000
	// pageLimit is the most data one Scan or Query page evaluates.
	pageLimit = 1 << 20
	// maxItemSize is DynamoDB's item size limit.
	maxItemSize = 400 * 1024
	// maxBatchGet is the most keys one BatchGetItem may ask for.
	maxBatchGet = 100
)

// Fault is what a FaultFunc makes of one call.
type Fault int

const (
	// NoFault lets the call run.
	NoFault Fault = iota
	// Throttle fails the call with ProvisionedThroughputExceededException, without effect or
	// charge.
	Throttle
	// ServerError fails the call with InternalServerError (HTTP 500), without effect.
	ServerError
	// LoseResponse runs the call (a write takes effect) and then fails it with an error whose
	// response was lost (ErrResponseLost), as a connection reset after the request reached
	// DynamoDB would.
	LoseResponse
	// LoseResponseRetried runs the call, loses the response and runs the same call again,
	// returning the second outcome, as the SDK's retryer does after a lost response: a
	// conditional write then usually fails its condition, on its own effect.
	LoseResponseRetried
)

// ErrResponseLost is the cause of the error a LoseResponse fault returns.
var ErrResponseLost = errors.New("fakedynamo: connection reset after the request was sent (response lost)")

// Call describes one API call to a FaultFunc.
type Call struct {
	Op    string
	Table string
	// Input is the call's input, e.g. *dynamodb.UpdateItemInput. Do not modify it.
	Input any
}

// FaultFunc decides the fault of each call. It runs with no lock held and may block (for
// example on a channel, to hold a call until a test releases it).
type FaultFunc func(ctx context.Context, c Call) Fault

// DB is an in-memory DynamoDB. See the package documentation.
type DB struct {
	now       func() time.Time
	latency   func(op string) time.Duration
	fault     FaultFunc
	tableRU   float64
	tableWU   float64
	partRU    float64
	partWU    float64
	burst     time.Duration
	parts     int
	faultMu   sync.Mutex
	mu        sync.Mutex
	tables    map[string]*table
	stats     map[string]*TableStats
	throttled map[string]time.Time // table → throttle every call until then
}

// Option configures New.
type Option func(*DB) // nil Options are ignored

// WithClock sets the clock the token buckets refill on. Default time.Now, which runs on
// virtual time inside a testing/synctest bubble.
func WithClock(now func() time.Time) Option { return func(d *DB) { d.now = now } }

// WithLatency makes every call wait latency(op) before it takes effect (on a timer, so that a
// synctest bubble sees the caller durably blocked). Default: no wait.
func WithLatency(latency func(op string) time.Duration) Option {
	return func(d *DB) { d.latency = latency }
}

// WithTableCapacity sets each table's read and write units per second. Defaults
// DefaultTableReadUnits and DefaultTableWriteUnits.
func WithTableCapacity(read, write float64) Option {
	return func(d *DB) { d.tableRU, d.tableWU = read, write }
}

// WithPartitionCapacity sets each partition's read and write units per second. Defaults
// DefaultPartitionReadUnits and DefaultPartitionWriteUnits.
func WithPartitionCapacity(read, write float64) Option {
	return func(d *DB) { d.partRU, d.partWU = read, write }
}

// WithPartitions sets how many partitions each table's items are hashed over. Default 4.
func WithPartitions(n int) Option { return func(d *DB) { d.parts = max(1, n) } }

// WithBurst sets how much unused capacity a bucket keeps, as a duration of its rate. Default
// one second.
func WithBurst(b time.Duration) Option { return func(d *DB) { d.burst = b } }

// WithFaults installs a fault injector. It can also be set later with SetFaults.
func WithFaults(f FaultFunc) Option { return func(d *DB) { d.fault = f } }

// New returns an empty DB.
func New(opts ...Option) *DB {
	d := &DB{
		now: time.Now, tableRU: DefaultTableReadUnits, tableWU: DefaultTableWriteUnits,
		partRU: DefaultPartitionReadUnits, partWU: DefaultPartitionWriteUnits, burst: time.Second, parts: 4,
		tables: map[string]*table{}, stats: map[string]*TableStats{}, throttled: map[string]time.Time{},
	}
	for _, o := range opts {
		if o != nil {
			o(d)
		}
	}
	return d
}

// SetFaults replaces the fault injector (nil: none).
func (d *DB) SetFaults(f FaultFunc) {
	d.faultMu.Lock()
	defer d.faultMu.Unlock()
	d.fault = f
}

// ThrottleUntil throttles every call on the table until t: a throttle burst.
func (d *DB) ThrottleUntil(tableName string, t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.throttled[tableName] = t
}

// SetCapacity changes a table's capacity (table and per-partition units per second) from now
// on. Zero leaves a value as it is.
func (d *DB) SetCapacity(tableName string, tableRead, tableWrite, partRead, partWrite float64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.tables[tableName]
	if !ok {
		return notFound(tableName)
	}
	now := d.now()
	set := func(b *bucket, rate float64) {
		if rate > 0 {
			b.refill(now)
			b.rate, b.capacity = rate, rate*d.burst.Seconds()
			b.tokens = min(b.tokens, b.capacity)
		}
	}
	set(&t.read, tableRead)
	set(&t.write, tableWrite)
	for _, p := range t.parts {
		set(&p.read, partRead)
		set(&p.write, partWrite)
	}
	return nil
}

// TableStats counts what a table served. Units are billed units (reads of 4 KB, writes of 1 KB).
type TableStats struct {
	Calls          map[string]int64   // per operation, throttled and faulted calls included
	ReadUnits      float64            // read units consumed
	WriteUnits     float64            // write units consumed, failed conditional writes included
	ReadUnitsByOp  map[string]float64 // per operation
	WriteUnitsByOp map[string]float64
	// ConditionalWrites counts writes with a condition expression that were evaluated;
	// ConditionFailures how many failed it.
	ConditionalWrites int64
	ConditionFailures int64
	Throttled         int64 // calls refused for capacity or a throttle burst
	Faults            int64 // calls a FaultFunc failed or whose response it lost
	Items             int   // items in the table now
	Bytes             int   // their total size
}

// Stats returns a copy of every table's counters, by table name (deleted tables included).
func (d *DB) Stats() map[string]TableStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]TableStats{}
	for name, s := range d.stats {
		c := *s
		c.Calls, c.ReadUnitsByOp, c.WriteUnitsByOp = maps.Clone(s.Calls), maps.Clone(s.ReadUnitsByOp), maps.Clone(s.WriteUnitsByOp)
		if t, ok := d.tables[name]; ok {
			c.Items = len(t.items)
			for _, it := range t.items {
				c.Bytes += it.size
			}
		}
		out[name] = c
	}
	return out
}

// TableStats returns one table's counters (zero when the table never existed).
func (d *DB) TableStats(name string) TableStats { return d.Stats()[name] }

// Items returns a copy of every item of a table, in no particular order.
func (d *DB) Items(tableName string) []map[string]types.AttributeValue {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.tables[tableName]
	if !ok {
		return nil
	}
	out := make([]map[string]types.AttributeValue, 0, len(t.items))
	for _, it := range t.items {
		out = append(out, cloneItem(it.attrs))
	}
	return out
}

type bucket struct {
	rate, capacity, tokens float64
	last                   time.Time
}

func newBucket(rate float64, burst time.Duration, now time.Time) bucket {
	c := rate * burst.Seconds()
	return bucket{rate: rate, capacity: c, tokens: c, last: now}
}

func (b *bucket) refill(now time.Time) {
	if dt := now.Sub(b.last).Seconds(); dt > 0 {
		b.tokens = min(b.capacity, b.tokens+dt*b.rate)
	}
	b.last = now
}

// ok: a request is admitted while the bucket holds anything; its cost may then overdraw it.
func (b *bucket) ok(now time.Time) bool { b.refill(now); return b.tokens > 0 }

type partition struct{ read, write bucket }

type stored struct {
	attrs map[string]types.AttributeValue
	size  int
	part  int
	order uint64 // scan order: hash of the partition key
	key   string
}

type table struct {
	name       string
	hashKey    string
	hashType   string
	rangeKey   string
	rangeType  string
	created    time.Time
	billing    types.BillingMode
	throughput *types.ProvisionedThroughput
	items      map[string]*stored
	sorted     []*stored // scan order, nil when stale
	read       bucket
	write      bucket
	parts      []*partition
	deleted    bool
}

func (d *DB) statsOf(name string) *TableStats {
	s, ok := d.stats[name]
	if !ok {
		s = &TableStats{Calls: map[string]int64{}, ReadUnitsByOp: map[string]float64{}, WriteUnitsByOp: map[string]float64{}}
		d.stats[name] = s
	}
	return s
}

// begin waits the call's latency, counts it and applies the fault injector.
func (d *DB) begin(ctx context.Context, op, tableName string, in any) (Fault, error) {
	if d.latency != nil {
		if l := d.latency(op); l > 0 {
			t := time.NewTimer(l)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return NoFault, ctx.Err()
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return NoFault, err
	}
	d.faultMu.Lock()
	f := d.fault
	d.faultMu.Unlock()
	fault := NoFault
	if f != nil {
		fault = f(ctx, Call{Op: op, Table: tableName, Input: in})
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.statsOf(tableName)
	s.Calls[op]++
	if fault != NoFault {
		s.Faults++
	}
	switch fault {
	case Throttle:
		s.Throttled++
		return fault, throttled(tableName)
	case ServerError:
		return fault, &types.InternalServerError{Message: aws.String("Internal server error (injected)")}
	}
	if until, ok := d.throttled[tableName]; ok && d.now().Before(until) {
		s.Throttled++
		return fault, throttled(tableName)
	}
	return fault, nil
}

// finish turns a fault into the caller's outcome: a lost response after the call ran.
func finish[T any](ctx context.Context, d *DB, op string, fault Fault, run func() (T, error)) (T, error) {
	out, err := run()
	switch fault {
	case LoseResponse:
		var zero T
		return zero, wrap(op, fmt.Errorf("%w", ErrResponseLost))
	case LoseResponseRetried:
		if ctx.Err() != nil {
			var zero T
			return zero, wrap(op, ctx.Err())
		}
		out, err = run()
	}
	if err != nil {
		var zero T
		return zero, wrap(op, err)
	}
	return out, nil
}

func wrap(op string, err error) error {
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: op, Err: err}
}

func validation(format string, args ...any) error {
	return &smithy.GenericAPIError{Code: "ValidationException", Message: fmt.Sprintf(format, args...), Fault: smithy.FaultClient}
}

func notFound(name string) error {
	return &types.ResourceNotFoundException{Message: aws.String("Requested resource not found: Table: " + name + " not found")}
}

func throttled(name string) error {
	return &types.ProvisionedThroughputExceededException{Message: aws.String("The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API. Table: " + name)}
}

// tableLocked finds a table; d.mu is held.
func (d *DB) tableLocked(name *string) (*table, error) {
	if name == nil || *name == "" {
		return nil, validation("1 validation error detected: Value null at 'tableName' failed to satisfy constraint: Member must not be null")
	}
	t, ok := d.tables[*name]
	if !ok {
		return nil, notFound(*name)
	}
	return t, nil
}

// keyOf validates a key (exactly the key attributes, of the right types) and returns its string.
func (t *table) keyOf(key map[string]types.AttributeValue, exact bool) (string, error) {
	h, ok := key[t.hashKey]
	if !ok || keyType(h) != t.hashType {
		if !exact {
			return "", validation("One or more parameter values were invalid: Missing the key %s in the item", t.hashKey)
		}
		return "", validation("The provided key element does not match the schema")
	}
	k := keyString(h)
	n := 1
	if t.rangeKey != "" {
		r, ok := key[t.rangeKey]
		if !ok || keyType(r) != t.rangeType {
			if !exact {
				return "", validation("One or more parameter values were invalid: Missing the key %s in the item", t.rangeKey)
			}
			return "", validation("The provided key element does not match the schema")
		}
		k += "\x00" + keyString(r)
		n++
	}
	if exact && len(key) != n {
		return "", validation("The provided key element does not match the schema")
	}
	return k, nil
}

func (t *table) partOf(item map[string]types.AttributeValue) (int, uint64) {
	h := fnv.New64a()
	_, _ = h.Write([]byte(keyString(item[t.hashKey])))
	sum := h.Sum64()
	return int(sum % uint64(len(t.parts))), sum
}

func (t *table) keyAttrs(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	k := map[string]types.AttributeValue{t.hashKey: cloneValue(item[t.hashKey])}
	if t.rangeKey != "" {
		k[t.rangeKey] = cloneValue(item[t.rangeKey])
	}
	return k
}

func readUnits(size int, consistent bool) float64 {
	u := math.Ceil(float64(max(size, 1)) / 4096)
	if !consistent {
		u /= 2
	}
	return u
}

func writeUnits(size int) float64 { return math.Ceil(float64(max(size, 1)) / 1024) }

func consumed(name string, mode types.ReturnConsumedCapacity, units float64, write bool) *types.ConsumedCapacity {
	if mode != types.ReturnConsumedCapacityTotal && mode != types.ReturnConsumedCapacityIndexes {
		return nil
	}
	cc := &types.ConsumedCapacity{TableName: aws.String(name), CapacityUnits: aws.Float64(units)}
	if write {
		cc.WriteCapacityUnits = aws.Float64(units)
	} else {
		cc.ReadCapacityUnits = aws.Float64(units)
	}
	if mode == types.ReturnConsumedCapacityIndexes {
		cc.Table = &types.Capacity{CapacityUnits: aws.Float64(units)}
	}
	return cc
}

// admitRead and admitWrite check the table's and one partition's buckets; d.mu is held.
func (d *DB) admit(t *table, part int, write bool) error {
	now := d.now()
	tb, pb := &t.read, &t.parts[part].read
	if write {
		tb, pb = &t.write, &t.parts[part].write
	}
	if !tb.ok(now) || !pb.ok(now) {
		d.statsOf(t.name).Throttled++
		return throttled(t.name)
	}
	return nil
}

func (d *DB) charge(t *table, op string, part int, units float64, write bool) {
	s := d.statsOf(t.name)
	if write {
		t.write.tokens -= units
		t.parts[part].write.tokens -= units
		s.WriteUnits += units
		s.WriteUnitsByOp[op] += units
		return
	}
	t.read.tokens -= units
	t.parts[part].read.tokens -= units
	s.ReadUnits += units
	s.ReadUnitsByOp[op] += units
}

// CreateTable creates a table (ACTIVE at once). Only KeySchema, AttributeDefinitions,
// BillingMode and ProvisionedThroughput are honoured; secondary indexes are refused.
func (d *DB) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	name := aws.ToString(in.TableName)
	fault, err := d.begin(ctx, OpCreateTable, name, in)
	if err != nil {
		return nil, wrap(OpCreateTable, err)
	}
	return finish(ctx, d, OpCreateTable, fault, func() (*dynamodb.CreateTableOutput, error) { return d.createTable(in) })
}

func (d *DB) createTable(in *dynamodb.CreateTableInput) (*dynamodb.CreateTableOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	name := aws.ToString(in.TableName)
	if len(name) < 3 || len(name) > 255 {
		return nil, validation("TableName must be at least 3 characters long and at most 255 characters long")
	}
	if _, ok := d.tables[name]; ok {
		return nil, &types.ResourceInUseException{Message: aws.String("Table already exists: " + name)}
	}
	if len(in.GlobalSecondaryIndexes) > 0 || len(in.LocalSecondaryIndexes) > 0 {
		return nil, validation("fakedynamo: secondary indexes are not supported")
	}
	defs := map[string]string{}
	for _, a := range in.AttributeDefinitions {
		defs[aws.ToString(a.AttributeName)] = string(a.AttributeType)
	}
	t := &table{name: name, items: map[string]*stored{}, created: d.now(), billing: in.BillingMode, throughput: in.ProvisionedThroughput}
	if t.billing == "" {
		t.billing = types.BillingModeProvisioned
	}
	for _, k := range in.KeySchema {
		n := aws.ToString(k.AttributeName)
		typ, ok := defs[n]
		if !ok {
			return nil, validation("One or more parameter values were invalid: Some index key attributes are not defined in AttributeDefinitions. Keys: [%s], AttributeDefinitions: [%s]", n, strings.Join(slices.Sorted(maps.Keys(defs)), ", "))
		}
		switch k.KeyType {
		case types.KeyTypeHash:
			t.hashKey, t.hashType = n, typ
		case types.KeyTypeRange:
			t.rangeKey, t.rangeType = n, typ
		}
	}
	if t.hashKey == "" || len(in.KeySchema) > 2 || len(defs) != len(in.KeySchema) {
		return nil, validation("One or more parameter values were invalid: Number of attributes in KeySchema does not exactly match number of attributes defined in AttributeDefinitions")
	}
	if t.billing == types.BillingModeProvisioned && t.throughput == nil {
		return nil, validation("One or more parameter values were invalid: ReadCapacityUnits and WriteCapacityUnits must both be specified when BillingMode is PROVISIONED")
	}
	now := d.now()
	rr, wr := d.tableRU, d.tableWU
	if t.billing == types.BillingModeProvisioned {
		rr, wr = float64(aws.ToInt64(t.throughput.ReadCapacityUnits)), float64(aws.ToInt64(t.throughput.WriteCapacityUnits))
	}
	t.read, t.write = newBucket(rr, d.burst, now), newBucket(wr, d.burst, now)
	for range d.parts {
		t.parts = append(t.parts, &partition{read: newBucket(d.partRU, d.burst, now), write: newBucket(d.partWU, d.burst, now)})
	}
	d.tables[name] = t
	d.statsOf(name)
	return &dynamodb.CreateTableOutput{TableDescription: t.describe(types.TableStatusActive)}, nil
}

func (t *table) describe(status types.TableStatus) *types.TableDescription {
	td := &types.TableDescription{
		TableName: aws.String(t.name), TableStatus: status, CreationDateTime: aws.Time(t.created),
		TableArn:  aws.String("arn:aws:dynamodb:us-east-1:000000000000:table/" + t.name),
		ItemCount: aws.Int64(int64(len(t.items))),
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String(t.hashKey), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(t.hashKey), AttributeType: types.ScalarAttributeType(t.hashType)},
		},
		BillingModeSummary: &types.BillingModeSummary{BillingMode: t.billing},
	}
	if t.rangeKey != "" {
		td.KeySchema = append(td.KeySchema, types.KeySchemaElement{AttributeName: aws.String(t.rangeKey), KeyType: types.KeyTypeRange})
		td.AttributeDefinitions = append(td.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(t.rangeKey), AttributeType: types.ScalarAttributeType(t.rangeType)})
	}
	var size int64
	for _, it := range t.items {
		size += int64(it.size)
	}
	td.TableSizeBytes = aws.Int64(size)
	if t.throughput != nil {
		td.ProvisionedThroughput = &types.ProvisionedThroughputDescription{
			ReadCapacityUnits: t.throughput.ReadCapacityUnits, WriteCapacityUnits: t.throughput.WriteCapacityUnits,
		}
	}
	return td
}

// DescribeTable describes a table.
func (d *DB) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	fault, err := d.begin(ctx, OpDescribeTable, aws.ToString(in.TableName), in)
	if err != nil {
		return nil, wrap(OpDescribeTable, err)
	}
	return finish(ctx, d, OpDescribeTable, fault, func() (*dynamodb.DescribeTableOutput, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		t, err := d.tableLocked(in.TableName)
		if err != nil {
			return nil, err
		}
		return &dynamodb.DescribeTableOutput{Table: t.describe(types.TableStatusActive)}, nil
	})
}

// UpdateTable changes a table's billing mode or provisioned throughput (and with them its
// table-level capacity). Index changes are refused.
func (d *DB) UpdateTable(ctx context.Context, in *dynamodb.UpdateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error) {
	fault, err := d.begin(ctx, OpUpdateTable, aws.ToString(in.TableName), in)
	if err != nil {
		return nil, wrap(OpUpdateTable, err)
	}
	return finish(ctx, d, OpUpdateTable, fault, func() (*dynamodb.UpdateTableOutput, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		t, err := d.tableLocked(in.TableName)
		if err != nil {
			return nil, err
		}
		if len(in.GlobalSecondaryIndexUpdates) > 0 {
			return nil, validation("fakedynamo: secondary indexes are not supported")
		}
		if in.BillingMode != "" {
			t.billing = in.BillingMode
		}
		if in.ProvisionedThroughput != nil {
			t.throughput = in.ProvisionedThroughput
		}
		now := d.now()
		rr, wr := d.tableRU, d.tableWU
		if t.billing == types.BillingModeProvisioned && t.throughput != nil {
			rr, wr = float64(aws.ToInt64(t.throughput.ReadCapacityUnits)), float64(aws.ToInt64(t.throughput.WriteCapacityUnits))
		}
		t.read, t.write = newBucket(rr, d.burst, now), newBucket(wr, d.burst, now)
		return &dynamodb.UpdateTableOutput{TableDescription: t.describe(types.TableStatusActive)}, nil
	})
}

// DeleteTable deletes a table and its items.
func (d *DB) DeleteTable(ctx context.Context, in *dynamodb.DeleteTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteTableOutput, error) {
	fault, err := d.begin(ctx, OpDeleteTable, aws.ToString(in.TableName), in)
	if err != nil {
		return nil, wrap(OpDeleteTable, err)
	}
	return finish(ctx, d, OpDeleteTable, fault, func() (*dynamodb.DeleteTableOutput, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		t, err := d.tableLocked(in.TableName)
		if err != nil {
			return nil, err
		}
		delete(d.tables, t.name)
		return &dynamodb.DeleteTableOutput{TableDescription: t.describe(types.TableStatusDeleting)}, nil
	})
}

// GetItem reads one item: 1 read unit per 4 KB (at least one) strongly consistent, half that
// eventually consistent. Eventually consistent reads see the latest write.
func (d *DB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	fault, err := d.begin(ctx, OpGetItem, aws.ToString(in.TableName), in)
	if err != nil {
		return nil, wrap(OpGetItem, err)
	}
	return finish(ctx, d, OpGetItem, fault, func() (*dynamodb.GetItemOutput, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		t, err := d.tableLocked(in.TableName)
		if err != nil {
			return nil, err
		}
		k, err := t.keyOf(in.Key, true)
		if err != nil {
			return nil, err
		}
		e := newEnv(in.ExpressionAttributeNames, nil)
		var proj []path
		if in.ProjectionExpression != nil {
			if proj, err = parseProjection(*in.ProjectionExpression, e); err != nil {
				return nil, validation("Invalid ProjectionExpression: %s", err.Error())
			}
		}
		if err := e.checkUnused(); err != nil {
			return nil, err
		}
		part, _ := t.partOf(in.Key)
		if err := d.admit(t, part, false); err != nil {
			return nil, err
		}
		out := &dynamodb.GetItemOutput{}
		size := 0
		if it, ok := t.items[k]; ok {
			size = it.size
			out.Item = cloneItem(project(it.attrs, proj))
		}
		u := readUnits(size, aws.ToBool(in.ConsistentRead))
		d.charge(t, OpGetItem, part, u, false)
		out.ConsumedCapacity = consumed(t.name, in.ReturnConsumedCapacity, u, false)
		return out, nil
	})
}

// BatchGetItem reads up to 100 items of one or more tables, each billed as a GetItem. Keys
// whose table or partition has no capacity left come back in UnprocessedKeys; when none could
// be read the call is throttled.
func (d *DB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	first := ""
	for n := range in.RequestItems {
		first = n
		break
	}
	fault, err := d.begin(ctx, OpBatchGetItem, first, in)
	if err != nil {
		return nil, wrap(OpBatchGetItem, err)
	}
	return finish(ctx, d, OpBatchGetItem, fault, func() (*dynamodb.BatchGetItemOutput, error) { return d.batchGet(in) })
}

func (d *DB) batchGet(in *dynamodb.BatchGetItemInput) (*dynamodb.BatchGetItemOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, ka := range in.RequestItems {
		n += len(ka.Keys)
	}
	if n == 0 || n > maxBatchGet {
		return nil, validation("Too many items requested for the BatchGetItem call")
	}
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{}}
	read := 0
	for _, name := range slices.Sorted(maps.Keys(in.RequestItems)) {
		ka := in.RequestItems[name]
		t, err := d.tableLocked(aws.String(name))
		if err != nil {
			return nil, err
		}
		e := newEnv(ka.ExpressionAttributeNames, nil)
		var proj []path
		if ka.ProjectionExpression != nil {
			if proj, err = parseProjection(*ka.ProjectionExpression, e); err != nil {
				return nil, validation("Invalid ProjectionExpression: %s", err.Error())
			}
		}
		if err := e.checkUnused(); err != nil {
			return nil, err
		}
		var units float64
		seen := map[string]bool{}
		for _, key := range ka.Keys {
			k, err := t.keyOf(key, true)
			if err != nil {
				return nil, err
			}
			if seen[k] {
				return nil, validation("Provided list of item keys contains duplicates")
			}
			seen[k] = true
			part, _ := t.partOf(key)
			if d.admit(t, part, false) != nil {
				un := out.UnprocessedKeys[name]
				un.Keys = append(un.Keys, cloneItem(key))
				un.ConsistentRead, un.ProjectionExpression, un.ExpressionAttributeNames = ka.ConsistentRead, ka.ProjectionExpression, ka.ExpressionAttributeNames
				if out.UnprocessedKeys == nil {
					out.UnprocessedKeys = map[string]types.KeysAndAttributes{}
				}
				out.UnprocessedKeys[name] = un
				continue
			}
			read++
			size := 0
			if it, ok := t.items[k]; ok {
				size = it.size
				out.Responses[name] = append(out.Responses[name], cloneItem(project(it.attrs, proj)))
			}
			u := readUnits(size, aws.ToBool(ka.ConsistentRead))
			d.charge(t, OpBatchGetItem, part, u, false)
			units += u
		}
		if cc := consumed(name, in.ReturnConsumedCapacity, units, false); cc != nil {
			out.ConsumedCapacity = append(out.ConsumedCapacity, *cc)
		}
	}
	if read == 0 {
		return nil, throttled(strings.Join(slices.Sorted(maps.Keys(in.RequestItems)), ","))
	}
	return out, nil
}

// writeKind is the write a conditional-write helper performs.
type writeKind int

const (
	kindPut writeKind = iota
	kindUpdate
	kindDelete
)

// write is the common path of PutItem, UpdateItem and DeleteItem; d.mu is held.
func (d *DB) write(op string, kind writeKind, tableName *string, key map[string]types.AttributeValue, newItem map[string]types.AttributeValue,
	updateExpr, condExpr *string, names map[string]string, values map[string]types.AttributeValue,
	onFail types.ReturnValuesOnConditionCheckFailure, ccMode types.ReturnConsumedCapacity,
) (old, cur map[string]types.AttributeValue, touched map[string]bool, cc *types.ConsumedCapacity, err error) {
	t, err := d.tableLocked(tableName)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	var k string
	if kind == kindPut {
		k, err = t.keyOf(newItem, false)
		if err == nil {
			key = t.keyAttrs(newItem)
		}
	} else {
		k, err = t.keyOf(key, true)
	}
	if err != nil {
		return nil, nil, nil, nil, err
	}
	e := newEnv(names, values)
	var c cond
	if condExpr != nil {
		if c, err = parseCondition(*condExpr, e); err != nil {
			return nil, nil, nil, nil, validation("Invalid ConditionExpression: %s", err.Error())
		}
	}
	var u *update
	if kind == kindUpdate {
		if updateExpr == nil {
			return nil, nil, nil, nil, validation("fakedynamo: UpdateItem needs an UpdateExpression")
		}
		if u, err = parseUpdate(*updateExpr, e); err != nil {
			return nil, nil, nil, nil, validation("Invalid UpdateExpression: %s", err.Error())
		}
		for _, a := range u.set {
			if a.p[0].name == t.hashKey || a.p[0].name == t.rangeKey {
				return nil, nil, nil, nil, validation("One or more parameter values were invalid: Cannot update attribute %s. This attribute is part of the key", a.p[0].name)
			}
		}
		for _, pa := range u.remove {
			if pa[0].name == t.hashKey || pa[0].name == t.rangeKey {
				return nil, nil, nil, nil, validation("One or more parameter values were invalid: Cannot update attribute %s. This attribute is part of the key", pa[0].name)
			}
		}
	}
	if err := e.checkUnused(); err != nil {
		return nil, nil, nil, nil, err
	}
	part, order := t.partOf(key)
	if err := d.admit(t, part, true); err != nil {
		return nil, nil, nil, nil, err
	}
	s := d.statsOf(t.name)
	var existing map[string]types.AttributeValue
	oldSize := 0
	if it, ok := t.items[k]; ok {
		existing, oldSize = it.attrs, it.size
	}
	// The item the write would leave. The condition is judged first: a write whose condition
	// fails is a ConditionalCheckFailedException even when its update could not apply.
	var next map[string]types.AttributeValue
	var uerr error
	switch kind {
	case kindPut:
		next = cloneItem(newItem)
	case kindUpdate:
		base := existing
		if base == nil {
			base = t.keyAttrs(key)
		}
		next, touched, uerr = u.apply(base)
	}
	newSize := ItemSize(next)
	units := writeUnits(max(oldSize, newSize))
	if c != nil {
		s.ConditionalWrites++
		ok, cerr := c.eval(existing)
		if cerr != nil {
			return nil, nil, nil, nil, cerr
		}
		if !ok {
			s.ConditionFailures++
			d.charge(t, op, part, units, true)
			ccf := &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
			if onFail == types.ReturnValuesOnConditionCheckFailureAllOld && existing != nil {
				ccf.Item = cloneItem(existing)
			}
			return nil, nil, nil, nil, ccf
		}
	}
	if uerr != nil {
		return nil, nil, nil, nil, uerr
	}
	if newSize > maxItemSize {
		return nil, nil, nil, nil, validation("Item size has exceeded the maximum allowed size")
	}
	d.charge(t, op, part, units, true)
	if kind == kindDelete {
		if existing != nil {
			delete(t.items, k)
			t.sorted = nil
		}
	} else {
		if existing == nil {
			t.sorted = nil
		}
		t.items[k] = &stored{attrs: next, size: newSize, part: part, order: order, key: k}
	}
	return existing, next, touched, consumed(t.name, ccMode, units, true), nil
}

// PutItem writes a whole item, conditionally if asked: 1 write unit per KB of the larger of
// the old and new item, charged even when the condition fails.
func (d *DB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	fault, err := d.begin(ctx, OpPutItem, aws.ToString(in.TableName), in)
	if err != nil {
		return nil, wrap(OpPutItem, err)
	}
	return finish(ctx, d, OpPutItem, fault, func() (*dynamodb.PutItemOutput, error) {
		if in.ReturnValues != "" && in.ReturnValues != types.ReturnValueNone && in.ReturnValues != types.ReturnValueAllOld {
			return nil, validation("ReturnValues can only be ALL_OLD or NONE")
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		old, _, _, cc, err := d.write(OpPutItem, kindPut, in.TableName, nil, in.Item, nil, in.ConditionExpression,
			in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.ReturnValuesOnConditionCheckFailure, in.ReturnConsumedCapacity)
		if err != nil {
			return nil, err
		}
		out := &dynamodb.PutItemOutput{ConsumedCapacity: cc}
		if in.ReturnValues == types.ReturnValueAllOld {
			out.Attributes = cloneItem(old)
		}
		return out, nil
	})
}

// UpdateItem updates (or creates) an item with an update expression, conditionally if asked;
// billed like PutItem.
func (d *DB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	fault, err := d.begin(ctx, OpUpdateItem, aws.ToString(in.TableName), in)
	if err != nil {
		return nil, wrap(OpUpdateItem, err)
	}
	return finish(ctx, d, OpUpdateItem, fault, func() (*dynamodb.UpdateItemOutput, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		old, cur, touched, cc, err := d.write(OpUpdateItem, kindUpdate, in.TableName, in.Key, nil, in.UpdateExpression, in.ConditionExpression,
			in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.ReturnValuesOnConditionCheckFailure, in.ReturnConsumedCapacity)
		if err != nil {
			return nil, err
		}
		out := &dynamodb.UpdateItemOutput{ConsumedCapacity: cc}
		pick := func(item map[string]types.AttributeValue) map[string]types.AttributeValue {
			o := map[string]types.AttributeValue{}
			for n := range touched {
				if v, ok := item[n]; ok {
					o[n] = cloneValue(v)
				}
			}
			return o
		}
		switch in.ReturnValues {
		case types.ReturnValueAllOld:
			out.Attributes = cloneItem(old)
		case types.ReturnValueAllNew:
			out.Attributes = cloneItem(cur)
		case types.ReturnValueUpdatedOld:
			out.Attributes = pick(old)
		case types.ReturnValueUpdatedNew:
			out.Attributes = pick(cur)
		}
		if len(out.Attributes) == 0 {
			out.Attributes = nil
		}
		return out, nil
	})
}

// DeleteItem deletes an item, conditionally if asked; billed on the deleted item's size.
func (d *DB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	fault, err := d.begin(ctx, OpDeleteItem, aws.ToString(in.TableName), in)
	if err != nil {
		return nil, wrap(OpDeleteItem, err)
	}
	return finish(ctx, d, OpDeleteItem, fault, func() (*dynamodb.DeleteItemOutput, error) {
		if in.ReturnValues != "" && in.ReturnValues != types.ReturnValueNone && in.ReturnValues != types.ReturnValueAllOld {
			return nil, validation("ReturnValues can only be ALL_OLD or NONE")
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		old, _, _, cc, err := d.write(OpDeleteItem, kindDelete, in.TableName, in.Key, nil, nil, in.ConditionExpression,
			in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.ReturnValuesOnConditionCheckFailure, in.ReturnConsumedCapacity)
		if err != nil {
			return nil, err
		}
		out := &dynamodb.DeleteItemOutput{ConsumedCapacity: cc}
		if in.ReturnValues == types.ReturnValueAllOld {
			out.Attributes = cloneItem(old)
		}
		return out, nil
	})
}

// order returns the table's items in scan order (by the hash of the partition key, then key).
func (t *table) order() []*stored {
	if t.sorted == nil {
		t.sorted = slices.Collect(maps.Values(t.items))
		slices.SortFunc(t.sorted, func(a, b *stored) int {
			if a.order != b.order {
				if a.order < b.order {
					return -1
				}
				return 1
			}
			return strings.Compare(a.key, b.key)
		})
	}
	return t.sorted
}

// page evaluates items from a start, stopping at Limit items or once 1 MB was read, and
// returns the ones the filter keeps, the last evaluated item and the bytes read.
func page(items []*stored, limit int32, filter cond, proj []path) (kept []map[string]types.AttributeValue, scanned int32, last *stored, bytes int, err error) {
	for _, it := range items {
		if limit > 0 && scanned >= limit || bytes >= pageLimit {
			break
		}
		scanned++
		bytes += it.size
		last = it
		if filter != nil {
			ok, ferr := filter.eval(it.attrs)
			if ferr != nil {
				return nil, 0, nil, 0, ferr
			}
			if !ok {
				continue
			}
		}
		kept = append(kept, cloneItem(project(it.attrs, proj)))
	}
	return kept, scanned, last, bytes, nil
}

// Scan reads a page of the table in hash order: at most Limit items and 1 MB, billed on the
// bytes evaluated (rounded up to 4 KB per page, halved when eventually consistent), before
// FilterExpression. LastEvaluatedKey is set when the page stopped before the end.
func (d *DB) Scan(ctx context.Context, in *dynamodb.ScanInput, _ ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	fault, err := d.begin(ctx, OpScan, aws.ToString(in.TableName), in)
	if err != nil {
		return nil, wrap(OpScan, err)
	}
	return finish(ctx, d, OpScan, fault, func() (*dynamodb.ScanOutput, error) { return d.scan(in) })
}

func (d *DB) scan(in *dynamodb.ScanInput) (*dynamodb.ScanOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, err := d.tableLocked(in.TableName)
	if err != nil {
		return nil, err
	}
	r, err := parseRead(readInput{in.IndexName, in.Limit, in.FilterExpression, in.ProjectionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues}, nil)
	if err != nil {
		return nil, err
	}
	items := t.order()
	start := 0
	if len(in.ExclusiveStartKey) > 0 {
		k, err := t.keyOf(in.ExclusiveStartKey, true)
		if err != nil {
			return nil, validation("The provided starting key is invalid: %s", err.Error())
		}
		_, o := t.partOf(in.ExclusiveStartKey)
		start, _ = slices.BinarySearchFunc(items, struct {
			o uint64
			k string
		}{o, k}, func(it *stored, x struct {
			o uint64
			k string
		}) int {
			if it.order != x.o {
				if it.order < x.o {
					return -1
				}
				return 1
			}
			return strings.Compare(it.key, x.k)
		})
		if start < len(items) && items[start].key == k {
			start++
		}
	}
	part := 0
	if start < len(items) {
		part = items[start].part
	}
	res, err := d.readPage(t, OpScan, part, items, start, r, readOutput{in.ConsistentRead, in.ReturnConsumedCapacity, in.Select})
	if err != nil {
		return nil, err
	}
	return &dynamodb.ScanOutput{Count: res.count, ScannedCount: res.scanned, Items: res.items, LastEvaluatedKey: res.lastKey, ConsumedCapacity: res.consumed}, nil
}

// Query reads the items of one partition key in range-key order (ScanIndexForward false:
// descending), paged and billed like Scan. Secondary indexes are not supported.
func (d *DB) Query(ctx context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	fault, err := d.begin(ctx, OpQuery, aws.ToString(in.TableName), in)
	if err != nil {
		return nil, wrap(OpQuery, err)
	}
	return finish(ctx, d, OpQuery, fault, func() (*dynamodb.QueryOutput, error) { return d.query(in) })
}

func (d *DB) query(in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, err := d.tableLocked(in.TableName)
	if err != nil {
		return nil, err
	}
	if in.IndexName == nil && in.KeyConditionExpression == nil {
		return nil, validation("Either the KeyConditions or KeyConditionExpression parameter must be specified in the request.")
	}
	var kc *keyCond
	r, err := parseRead(readInput{in.IndexName, in.Limit, in.FilterExpression, in.ProjectionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues},
		func(e *env) (err error) {
			kc, err = parseKeyCondition(*in.KeyConditionExpression, e, t.hashKey, t.rangeKey)
			return err
		})
	if err != nil {
		return nil, err
	}
	var items []*stored
	for _, it := range t.items {
		if !equal(it.attrs[t.hashKey], kc.hashValue) {
			continue
		}
		if kc.rng != nil {
			ok, err := kc.rng.eval(it.attrs)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		items = append(items, it)
	}
	slices.SortFunc(items, func(a, b *stored) int {
		if t.rangeKey == "" {
			return 0
		}
		n, _ := compare(a.attrs[t.rangeKey], b.attrs[t.rangeKey])
		return n
	})
	if in.ScanIndexForward != nil && !*in.ScanIndexForward {
		slices.Reverse(items)
	}
	start := 0
	if len(in.ExclusiveStartKey) > 0 {
		k, err := t.keyOf(in.ExclusiveStartKey, true)
		if err != nil {
			return nil, validation("The provided starting key is invalid: %s", err.Error())
		}
		for i, it := range items {
			if it.key == k {
				start = i + 1
			}
		}
	}
	part, _ := t.partOf(map[string]types.AttributeValue{t.hashKey: kc.hashValue})
	res, err := d.readPage(t, OpQuery, part, items, start, r, readOutput{in.ConsistentRead, in.ReturnConsumedCapacity, in.Select})
	if err != nil {
		return nil, err
	}
	return &dynamodb.QueryOutput{Count: res.count, ScannedCount: res.scanned, Items: res.items, LastEvaluatedKey: res.lastKey, ConsumedCapacity: res.consumed}, nil
}

// readInput is what Scan and Query share in their request: the index, the page limit and the
// expressions with their names and values.
type readInput struct {
	index              *string
	limit              *int32
	filter, projection *string
	names              map[string]string
	values             map[string]types.AttributeValue
}

// read is a parsed readInput.
type read struct {
	limit  *int32
	filter cond
	proj   []path
}

// parseRead checks and parses what Scan and Query share; more, when given, parses the
// operation's own expressions with the same names and values (Query's key condition) before
// every name and value is checked to be used.
func parseRead(in readInput, more func(*env) error) (read, error) {
	if in.index != nil {
		return read{}, validation("fakedynamo: secondary indexes are not supported")
	}
	if in.limit != nil && *in.limit <= 0 {
		return read{}, validation("1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value greater than or equal to 1", *in.limit)
	}
	r := read{limit: in.limit}
	e := newEnv(in.names, in.values)
	if more != nil {
		if err := more(e); err != nil {
			return read{}, err
		}
	}
	var err error
	if in.filter != nil {
		if r.filter, err = parseCondition(*in.filter, e); err != nil {
			return read{}, validation("Invalid FilterExpression: %s", err.Error())
		}
	}
	if in.projection != nil {
		if r.proj, err = parseProjection(*in.projection, e); err != nil {
			return read{}, validation("Invalid ProjectionExpression: %s", err.Error())
		}
	}
	if err := e.checkUnused(); err != nil {
		return read{}, err
	}
	return r, nil
}

// readOutput is what Scan and Query share in how they answer.
type readOutput struct {
	consistent *bool
	mode       types.ReturnConsumedCapacity
	sel        types.Select
}

// pageResult is one page of a Scan or a Query.
type pageResult struct {
	count, scanned int32
	items          []map[string]types.AttributeValue // nil with Select COUNT
	lastKey        map[string]types.AttributeValue
	consumed       *types.ConsumedCapacity
}

// readPage admits the read on part, reads the page of items from start, charges it and builds
// the answer: the items kept (none with Select COUNT), and LastEvaluatedKey when the read
// stopped before the end or at the limit.
func (d *DB) readPage(t *table, op string, part int, items []*stored, start int, r read, out readOutput) (pageResult, error) {
	if err := d.admit(t, part, false); err != nil {
		return pageResult{}, err
	}
	kept, scanned, last, bytes, err := page(items[start:], aws.ToInt32(r.limit), r.filter, r.proj)
	if err != nil {
		return pageResult{}, err
	}
	u := readUnits(bytes, aws.ToBool(out.consistent))
	d.charge(t, op, part, u, false)
	res := pageResult{count: int32(len(kept)), scanned: scanned, consumed: consumed(t.name, out.mode, u, false)}
	if out.sel != types.SelectCount {
		res.items = kept
		if res.items == nil {
			res.items = []map[string]types.AttributeValue{}
		}
	}
	if last != nil && (start+int(scanned) < len(items) || r.limit != nil && scanned == *r.limit) {
		res.lastKey = t.keyAttrs(last.attrs)
	}
	return res, nil
}
