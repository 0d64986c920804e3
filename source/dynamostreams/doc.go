// Package dynamostreams is the DynamoDB Streams source of an event source mapping: a table's
// stream read as Lambda reads it, behind poller.Source, with the SDK's service/dynamodbstreams.
// Everything the engine must know of DynamoDB Streams is here; the reader, batching, the failure
// rules, leases and checkpoints are the engine's, the same as for Kinesis.
//
// # What differs from Kinesis
//
//   - Identity: the ARN is arn:aws:dynamodb:<region>:<account>:table/<table>/stream/<label>
//     (ParseStreamARN; a table's ARN and a consumer's are refused with messages that say so), the
//     events' eventSource is aws:dynamodb, and a DynamoDB event has no invokeIdentityArn.
//   - Lineage: DescribeStream lists the shards, 100 a page; each has at most one ParentShardId
//     (DynamoDB never merges shards). GetRecords has no ChildShards: a closed shard ends with a null
//     NextShardIterator, and Read then asks DescribeStream for its children with ShardFilter
//     CHILD_SHARDS (none yet: the engine's next listing finds them).
//   - Positions: Lambda accepts TRIM_HORIZON and LATEST only; AT_TIMESTAMP is refused with Lambda's
//     "Unsupported starting position for arn type: <arn>" (poller.CheckStartingPosition), although the
//     API has it since 2026-10, where Open uses it to resume a LATEST start that read nothing yet.
//     A position before the 24-hour trim point (TrimmedDataAccessException) opens at TRIM_HORIZON
//     with a warning: the records between are gone.
//   - Limits and pace: at most 1,000 records (and 1 MB) a read; Lambda polls each shard four times
//     a second (PollInterval, also the least spacing of reads); iterators expire after 15 minutes
//     (ExpiredIteratorException, and TrimmedDataAccessException on a read, are source.ErrExpired:
//     the engine opens the shard again after its last record read); LimitExceededException is
//     source.ErrThrottled, backed off. A ValidationException (a sequence number of another shard)
//     is source.ErrInvalidPosition. More than two readers of one shard are throttled by the
//     service: a third reader in the process is warned about once (readers.go).
//   - Retention is a fixed 24 hours; there is no MillisBehindLatest (the records' creation times
//     give the iterator age).
//   - No enhanced fan-out: a consumer is refused (RefuseConsumer).
//
// # The event
//
// A record's source.Record.Data is its object in the Lambda event (events.DynamoDBEvent): eventID,
// eventName, eventVersion ("1.1", the stream record's), eventSource, awsRegion, dynamodb
// (ApproximateCreationDateTime in epoch seconds, Keys, NewImage, OldImage in DynamoDB's typed JSON,
// SequenceNumber, SizeBytes, StreamViewType), eventSourceARN and, on TTL deletes, userIdentity:
// byte for byte AWS's recording (testdata/aws-recorded-event.json), without HTML escapes. Its
// partition key (ParallelizationFactor's slots) is its Keys' JSON, so the changes of one item stay
// in order; its SequenceNumber is the checkpoint and the itemIdentifier of a partial batch
// response. Filters match the whole record object (filter.Filters.MatchDocument): eventName and
// the dynamodb key, as AWS's recorded DynamoDB filters use both.
//
// # Templates
//
// A table a template declares gets a stream ARN with the label TemplateStreamLabel
// (1970-01-01T00:00:00.000): the real label is the time the stream was enabled. Resolve turns it
// into the table's LatestStreamArn (DescribeTable) when the mapping starts.
package dynamostreams
