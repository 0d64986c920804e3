package fakedynamo

import (
	"maps"
	"math"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

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
	ReadUnitsByOp  map[string]float64 // read units per operation
	WriteUnitsByOp map[string]float64 // write units per operation
	// ConditionalWrites counts writes with a condition expression that were evaluated.
	ConditionalWrites int64
	// ConditionFailures counts the conditional writes whose condition failed.
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

func (d *DB) statsOf(name string) *TableStats {
	s, ok := d.stats[name]
	if !ok {
		s = &TableStats{Calls: map[string]int64{}, ReadUnitsByOp: map[string]float64{}, WriteUnitsByOp: map[string]float64{}}
		d.stats[name] = s
	}
	return s
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
