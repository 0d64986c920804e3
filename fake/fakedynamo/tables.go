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

// CreateTable creates a table (ACTIVE at once). Only KeySchema, AttributeDefinitions,
// BillingMode and ProvisionedThroughput are honoured; secondary indexes are refused.
func (d *DB) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	name := aws.ToString(in.TableName)
	return serve(ctx, d, OpCreateTable, name, in, func() (*dynamodb.CreateTableOutput, error) { return d.createTable(in) })
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
	t := &table{name: name, arn: d.tableARN(name), items: map[string]*stored{}, created: d.now(), billing: in.BillingMode, throughput: in.ProvisionedThroughput}
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
	if err := checkStreamSpec(in.StreamSpecification); err != nil {
		return nil, err
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
	if sp := in.StreamSpecification; sp != nil && aws.ToBool(sp.StreamEnabled) {
		d.enableStream(t, sp.StreamViewType, now)
	}
	return &dynamodb.CreateTableOutput{TableDescription: t.describe(types.TableStatusActive)}, nil
}

func (t *table) describe(status types.TableStatus) *types.TableDescription {
	td := &types.TableDescription{
		TableName: aws.String(t.name), TableStatus: status, CreationDateTime: aws.Time(t.created),
		TableArn:  aws.String(t.arn),
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
	if s := t.stream; s != nil {
		td.LatestStreamArn, td.LatestStreamLabel = aws.String(s.arn), aws.String(s.label)
		if s.enabled {
			td.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: s.view}
		}
	}
	if t.throughput != nil {
		td.ProvisionedThroughput = &types.ProvisionedThroughputDescription{
			ReadCapacityUnits: t.throughput.ReadCapacityUnits, WriteCapacityUnits: t.throughput.WriteCapacityUnits,
		}
	}
	return td
}

// DescribeTable describes a table.
func (d *DB) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return serve(ctx, d, OpDescribeTable, aws.ToString(in.TableName), in, func() (*dynamodb.DescribeTableOutput, error) {
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
	return serve(ctx, d, OpUpdateTable, aws.ToString(in.TableName), in, func() (*dynamodb.UpdateTableOutput, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		t, err := d.tableLocked(in.TableName)
		if err != nil {
			return nil, err
		}
		if len(in.GlobalSecondaryIndexUpdates) > 0 {
			return nil, validation("fakedynamo: secondary indexes are not supported")
		}
		if err := d.updateStream(t, in.StreamSpecification); err != nil {
			return nil, err
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
	return serve(ctx, d, OpDeleteTable, aws.ToString(in.TableName), in, func() (*dynamodb.DeleteTableOutput, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		t, err := d.tableLocked(in.TableName)
		if err != nil {
			return nil, err
		}
		delete(d.tables, t.name)
		d.tick()
		d.disableStream(t.stream, d.now())
		return &dynamodb.DeleteTableOutput{TableDescription: t.describe(types.TableStatusDeleting)}, nil
	})
}

// checkStreamSpec checks a StreamSpecification (nil: none).
func checkStreamSpec(sp *types.StreamSpecification) error {
	if sp == nil {
		return nil
	}
	if sp.StreamEnabled == nil {
		return validation("1 validation error detected: Value null at 'streamSpecification.streamEnabled' failed to satisfy constraint: Member must not be null")
	}
	if !*sp.StreamEnabled {
		if sp.StreamViewType != "" {
			return validation("One or more parameter values were invalid: Disabled stream cannot have a StreamViewType")
		}
		return nil
	}
	if !slices.Contains(types.StreamViewType("").Values(), sp.StreamViewType) {
		return validation("One or more parameter values were invalid: Enabled stream must have a StreamViewType")
	}
	return nil
}

// updateStream enables or disables t's stream as UpdateTable's StreamSpecification asks (nil:
// leave it); d.mu is held. Enabling gives a new stream (a new label); disabling closes the
// open shards, which stay readable until trimmed.
func (d *DB) updateStream(t *table, sp *types.StreamSpecification) error {
	if sp == nil {
		return nil
	}
	if err := checkStreamSpec(sp); err != nil {
		return err
	}
	d.tick()
	on := t.stream != nil && t.stream.enabled
	switch {
	case *sp.StreamEnabled && on:
		return validation("Table already has an enabled stream: TableName: %s", t.name)
	case !*sp.StreamEnabled && !on:
		return validation("Table already has no enabled stream: TableName: %s", t.name)
	case *sp.StreamEnabled:
		d.enableStream(t, sp.StreamViewType, d.now())
	default:
		d.disableStream(t.stream, d.now())
	}
	return nil
}

// ListTables lists the tables in name order, paged by Limit (at most 100) and
// ExclusiveStartTableName.
func (d *DB) ListTables(ctx context.Context, in *dynamodb.ListTablesInput, _ ...func(*dynamodb.Options)) (*dynamodb.ListTablesOutput, error) {
	return serve(ctx, d, OpListTables, "", in, func() (*dynamodb.ListTablesOutput, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		limit, err := limitOf(in.Limit, 100)
		if err != nil {
			return nil, err
		}
		names := slices.Sorted(maps.Keys(d.tables))
		if start := aws.ToString(in.ExclusiveStartTableName); start != "" {
			names = slices.DeleteFunc(names, func(n string) bool { return n <= start })
		}
		out := &dynamodb.ListTablesOutput{TableNames: []string{}}
		if len(names) > limit {
			names = names[:limit]
			out.LastEvaluatedTableName = aws.String(names[limit-1])
		}
		out.TableNames = append(out.TableNames, names...)
		return out, nil
	})
}
