package fakedynamo

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// Operation names, as Call.Op and as the keys of TableStats.Calls and its units by operation.
const (
	OpGetItem       = "GetItem"       // a GetItem call
	OpBatchGetItem  = "BatchGetItem"  // a BatchGetItem call
	OpPutItem       = "PutItem"       // a PutItem call
	OpUpdateItem    = "UpdateItem"    // an UpdateItem call
	OpDeleteItem    = "DeleteItem"    // a DeleteItem call
	OpQuery         = "Query"         // a Query call
	OpScan          = "Scan"          // a Scan call
	OpCreateTable   = "CreateTable"   // a CreateTable call
	OpDescribeTable = "DescribeTable" // a DescribeTable call
	OpUpdateTable   = "UpdateTable"   // an UpdateTable call
	OpDeleteTable   = "DeleteTable"   // a DeleteTable call
	OpListTables    = "ListTables"    // a ListTables call

	OpBatchWriteItem     = "BatchWriteItem"     // a BatchWriteItem call
	OpTransactWriteItems = "TransactWriteItems" // a TransactWriteItems call
)

// Limits DynamoDB applies, used as defaults.
const (
	// DefaultTableReadUnits is an on-demand table's default account-level read quota per
	// table, in units per second.
	DefaultTableReadUnits = 40000
	// DefaultTableWriteUnits is the same quota for writes.
	DefaultTableWriteUnits = 40000
	// DefaultPartitionReadUnits is how many read units one partition serves per second.
	DefaultPartitionReadUnits = 3000
	// DefaultPartitionWriteUnits is how many write units one partition serves per second.
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
	Op    string // the operation, one of the Op constants
	Table string // the table it addresses; for BatchGetItem, one of its tables
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
	rotation  time.Duration        // stream shard rotation period
	retention time.Duration        // stream record retention
	iterTTL   time.Duration        // shard iterator lifetime
	lanes     int                  // open shards per stream
	readRate  float64              // GetRecords calls per shard per second; 0: no limit
	region    string
	account   string
	streams   []*stream // every stream not yet gone, enabled or not, in creation order
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
		rotation: DefaultShardRotation, retention: DefaultStreamRetention, iterTTL: DefaultIteratorTTL, lanes: 1,
		region: "us-east-1", account: "000000000000",
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

type stored struct {
	attrs map[string]types.AttributeValue
	size  int
	part  int
	order uint64 // scan order: hash of the partition key
	key   string
}

type table struct {
	name       string
	arn        string
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
	stream     *stream // the latest stream, enabled or not; nil if never enabled
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

// serve runs one call of op on tableName: the fault injector and the latency first (begin),
// then run, whose outcome a fault may still replace (finish).
func serve[T any](ctx context.Context, d *DB, op, tableName string, in any, run func() (T, error)) (T, error) {
	fault, err := d.begin(ctx, op, tableName, in)
	if err != nil {
		var zero T
		return zero, wrap(op, err)
	}
	return finish(ctx, d, op, fault, run)
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

// tableARN is a table's ARN in the DB's region and account.
func (d *DB) tableARN(name string) string {
	return "arn:aws:dynamodb:" + d.region + ":" + d.account + ":table/" + name
}

func (t *table) keyAttrs(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	k := map[string]types.AttributeValue{t.hashKey: cloneValue(item[t.hashKey])}
	if t.rangeKey != "" {
		k[t.rangeKey] = cloneValue(item[t.rangeKey])
	}
	return k
}
