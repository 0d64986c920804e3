package fakedynamo

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// GetItem reads one item: 1 read unit per 4 KB (at least one) strongly consistent, half that
// eventually consistent. Eventually consistent reads see the latest write.
func (d *DB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return serve(ctx, d, OpGetItem, aws.ToString(in.TableName), in, func() (*dynamodb.GetItemOutput, error) {
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
	return serve(ctx, d, OpBatchGetItem, first, in, func() (*dynamodb.BatchGetItemOutput, error) { return d.batchGet(in) })
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
	return serve(ctx, d, OpScan, aws.ToString(in.TableName), in, func() (*dynamodb.ScanOutput, error) { return d.scan(in) })
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
	return serve(ctx, d, OpQuery, aws.ToString(in.TableName), in, func() (*dynamodb.QueryOutput, error) { return d.query(in) })
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
