// Package fakedynamo is an in-memory DynamoDB for unit tests, fault injection, benchmarks and
// simulations. Its methods have the signatures of *dynamodb.Client's, so a *DB satisfies any
// consumer-declared interface made of GetItem, BatchGetItem, PutItem, UpdateItem, DeleteItem,
// Query, Scan, CreateTable, DescribeTable, UpdateTable and DeleteTable. It is never a
// replacement for the emulator tests (dynalite).
//
// # What it models
//
//   - Expressions: condition, filter, update (SET with + and -, if_not_exists, list_append;
//     REMOVE; ADD; DELETE), projection and key-condition expressions, with expression
//     attribute names and values (unused ones are a ValidationException, as in DynamoDB),
//     document paths (a.b[1].c), comparisons, BETWEEN, IN, AND, OR, NOT and the functions
//     attribute_exists, attribute_not_exists, attribute_type, begins_with, contains and size.
//     A failed condition is a *types.ConditionalCheckFailedException carrying the item when
//     ReturnValuesOnConditionCheckFailure is ALL_OLD. ReturnValues works as in DynamoDB.
//   - Paging: Scan (in hash order of the partition key) and Query (in range-key order)
//     return at most Limit items and stop once 1 MB was evaluated, with LastEvaluatedKey;
//     ExclusiveStartKey continues.
//   - Capacity, as DynamoDB bills it (ItemSize computes item sizes): a strongly consistent
//     read costs one unit per 4 KB (at least one; Scan and Query pages sum their items'
//     sizes first), an eventually consistent one half that; a write one unit per KB of the
//     larger of the old and new item, charged even when its condition fails. ConsumedCapacity
//     is returned when ReturnConsumedCapacity asks for it, and Stats counts everything per
//     table and operation.
//   - Throttling: token buckets per table (WithTableCapacity; an on-demand table's 40,000
//     read and write units by default, or its provisioned throughput) and per partition
//     (WithPartitionCapacity, 3,000 read and 1,000 write units; items are hashed over
//     WithPartitions partitions), refilled on an injectable clock (WithClock; time.Now by
//     default, which is virtual time inside a testing/synctest bubble). A request is admitted
//     while both buckets hold anything and may overdraw them; a refused one is a
//     *types.ProvisionedThroughputExceededException. ThrottleUntil makes a throttle burst.
//   - Faults: see below.
//   - Latency: WithLatency makes each call wait on a timer, so that a synctest bubble sees
//     the caller durably blocked.
//
// Errors are wrapped in *smithy.OperationError like the SDK's, so errors.As finds the typed
// exception. There are no secondary indexes, transactions, streams or TTL; eventually
// consistent reads see the latest write.
//
// # Injecting faults
//
// A FaultFunc (WithFaults at New, SetFaults later; nil removes it) is called once per API call,
// after any WithLatency wait, with the operation (the Op constants), the table and the call's
// input, and decides what becomes of the call: NoFault runs it; Throttle fails it with a
// *types.ProvisionedThroughputExceededException and ServerError with a
// *types.InternalServerError (HTTP 500), both without effect; LoseResponse runs it (a write takes
// effect) and then fails it with an error wrapping ErrResponseLost, as a connection reset after
// the request reached DynamoDB does; LoseResponseRetried runs it, loses the response and runs
// the same call again, returning the second outcome, as the SDK's retryer does, so that a
// conditional write usually fails on its own effect. TableStats counts the faults. The FaultFunc
// runs with no lock held and may block, on a channel say, to hold a call until the test
// releases it:
//
//	db.SetFaults(func(ctx context.Context, c fakedynamo.Call) fakedynamo.Fault {
//		if c.Op == fakedynamo.OpUpdateItem && c.Table == "leases" {
//			return fakedynamo.LoseResponse // the renewal lands, its caller sees an error
//		}
//		return fakedynamo.NoFault
//	})
//
// ThrottleUntil throttles every call on a table until a time (a burst), and SetCapacity changes a
// table's capacity, so that throttling follows from the load.
//
// # Use
//
//	db := fakedynamo.New(fakedynamo.WithTableCapacity(40000, 4000))
//	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
//		TableName:            aws.String("leases"),
//		BillingMode:          types.BillingModePayPerRequest,
//		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("leaseKey"), KeyType: types.KeyTypeHash}},
//		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("leaseKey"), AttributeType: types.ScalarAttributeTypeS}},
//	})
//	// pass db wherever a DynamoDB client interface is expected, then:
//	st := db.TableStats("leases") // ReadUnits, WriteUnits, ConditionFailures, Throttled, ...
//
// Inside testing/synctest.Test, create the DB inside the bubble (its clock is then virtual).
// The DB starts no goroutines; a FaultFunc may block a call on a channel.
package fakedynamo
