// Package fakedynamo is an in-memory DynamoDB with DynamoDB Streams for unit tests, fault
// injection, benchmarks and simulations, and, served over HTTP (Handler, the ddb-local command),
// for emulator tests. Its methods have the signatures of *dynamodb.Client's and
// *dynamodbstreams.Client's, so a *DB satisfies any consumer-declared interface made of GetItem,
// BatchGetItem, PutItem, UpdateItem, DeleteItem, BatchWriteItem, TransactWriteItems, Query,
// Scan, CreateTable, DescribeTable, UpdateTable, DeleteTable, ListTables, and of the streams
// API's ListStreams, DescribeStream, GetShardIterator and GetRecords. It is never a replacement
// for the emulator tests (dynalite).
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
//
//   - Paging: Scan (in hash order of the partition key) and Query (in range-key order)
//     return at most Limit items and stop once 1 MB was evaluated, with LastEvaluatedKey;
//     ExclusiveStartKey continues.
//
//   - Capacity, as DynamoDB bills it (ItemSize computes item sizes): a strongly consistent
//     read costs one unit per 4 KB (at least one; Scan and Query pages sum their items'
//     sizes first), an eventually consistent one half that; a write one unit per KB of the
//     larger of the old and new item, charged even when its condition fails. ConsumedCapacity
//     is returned when ReturnConsumedCapacity asks for it, and Stats counts everything per
//     table and operation.
//
//   - Throttling: token buckets per table (WithTableCapacity; an on-demand table's 40,000
//     read and write units by default, or its provisioned throughput) and per partition
//     (WithPartitionCapacity, 3,000 read and 1,000 write units; items are hashed over
//     WithPartitions partitions), refilled on an injectable clock (WithClock; time.Now by
//     default, which is virtual time inside a testing/synctest bubble). A request is admitted
//     while both buckets hold anything and may overdraw them; a refused one is a
//     *types.ProvisionedThroughputExceededException. ThrottleUntil makes a throttle burst.
//
//   - Faults: see below.
//
//   - Latency: WithLatency makes each call wait on a timer, so that a synctest bubble sees
//     the caller durably blocked.
//
//   - Batches and transactions: BatchWriteItem (up to 25 puts and deletes, a throttled one
//     returned in UnprocessedItems) and TransactWriteItems (up to 100 Put, Update, Delete and
//     ConditionCheck actions on distinct items, all or none; a failed condition is a
//     *types.TransactionCanceledException with one CancellationReason per action).
//
//   - Streams: see below.
//
// Errors are wrapped in *smithy.OperationError like the SDK's, so errors.As finds the typed
// exception. There are no secondary indexes or TTL; eventually consistent reads see the latest
// write. Numbers are computed exactly: the HTTP decoder refuses what DynamoDB refuses (more than
// 38 significant digits, magnitudes beyond 1E-130 to 9.99…E+125); in-process callers must pass
// valid numbers.
//
// # Streams
//
// A table created or updated with a StreamSpecification gets a stream (LatestStreamArn
// arn:aws:dynamodb:REGION:ACCOUNT:table/T/stream/LABEL, the label its creation time); enabling
// it again later makes a new stream. Every write that changes an item (PutItem, UpdateItem,
// DeleteItem, each write of BatchWriteItem and TransactWriteItems) appends a record, as AWS's
// GetRecords returns it: eventID, eventName INSERT, MODIFY or REMOVE, eventVersion "1.1",
// eventSource "aws:dynamodb", awsRegion, and dynamodb{ApproximateCreationDateTime (whole
// seconds), Keys, NewImage and OldImage as the StreamViewType says, SequenceNumber (21 digits,
// increasing along the stream), SizeBytes (keys and images sent), StreamViewType}. A write that
// changes nothing (an identical put, a delete of nothing, a failed condition) writes no record.
//
// A stream has one open shard (WithStreamShards for more, items spread by partition). Every
// rotation period (WithShardRotation, DefaultShardRotation: four hours; 0 never) the open shard
// closes and a child opens with it as ParentShardId; disabling the stream or deleting the table
// closes the open shards. Records are trimmed after WithStreamRetention (24 h), and closed
// shards and disabled streams go with their last records (GetRecords from an iterator of a
// shard trimmed away since is a TrimmedDataAccessException, GetShardIterator of it a
// ResourceNotFoundException). RotateStream and TrimStream do the same at a time of the
// caller's choosing, for schedules. All of this happens on the DB's clock
// when a call looks (no goroutine), so it runs on virtual time inside a synctest bubble.
//
// The streams API: ListStreams and DescribeStream paged (at most 100; ShardFilter CHILD_SHARDS
// lists a shard's children), GetShardIterator TRIM_HORIZON, LATEST, AT_SEQUENCE_NUMBER,
// AFTER_SEQUENCE_NUMBER and AT_TIMESTAMP, GetRecords (at most 1,000 records and 1 MB; a closed
// shard read to its end answers a null NextShardIterator). Iterators expire after
// WithIteratorTTL (15 minutes: ExpiredIteratorException); a position trimmed since is a
// TrimmedDataAccessException; WithShardReadRate limits GetRecords per shard
// (LimitExceededException), and a Throttle fault or ThrottleUntil on the table does the same.
// Where AWS's answer is not documented (a sequence number outside the shard: here a
// ValidationException) the fake says so in its method's comment.
//
// # Served over HTTP
//
// Handler serves both APIs with DynamoDB's JSON 1.0 protocol (X-Amz-Target
// DynamoDB_20120810.* and DynamoDBStreams_20120810.*) for the SDK's clients, the AWS CLI or
// any other; fake/cmd/ddb-local listens with it on 127.0.0.1.
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
