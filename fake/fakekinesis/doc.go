// Package fakekinesis is an in-memory fake of the three Kinesis Data Streams
// read calls an event source mapping makes: ListShards, GetShardIterator and
// GetRecords. It exists for unit tests (fault injection, resharding, iterator
// expiry) and for benchmarks. It does not replace the kinesis-local emulator
// tests. DescribeStreamSummary reports the retention period SetRetention sets.
//
// A *Fake satisfies any consumer-declared interface made of those three
// methods with the signatures of *kinesis.Client. Its behaviour follows
// real Kinesis where the tests care about it:
//
//   - Shard ids look like shardId-000000000000. They increase across a stream
//     and are never reused.
//   - Sequence numbers are 56-digit decimal strings. They strictly increase per
//     stream and encode the shard they belong to, so a sequence number given
//     to the wrong shard is rejected as Kinesis rejects it. CompareSeq orders them.
//   - Put routes a record by the MD5 of its partition key into the open shard
//     whose hash key range contains it.
//   - Split and Merge close shards. Reading a closed shard to its end returns
//     ChildShards and a nil NextShardIterator.
//   - Iterators expire after the iterator TTL (default 5 minutes), measured
//     on the injected clock.
//   - Errors come back in the SDK's envelope: a *smithy.OperationError
//     around an *awshttp.ResponseError (HTTP 400, or 500 for server faults)
//     around the modelled exception, such as *types.ExpiredIteratorException.
//     Use errors.As, as with the real client.
//
// Every method is safe for concurrent use. The setup helpers (CreateStream,
// Put, Split, Merge, Trim and so on) panic on misuse such as an unknown
// stream or shard, because misuse there is a bug in the test itself.
// The three API methods never panic. They report errors as Kinesis does.
//
// Enhanced fan-out: RegisterConsumer, RegisterStreamConsumer,
// DescribeStreamConsumer and SubscribeToShard (see subscribe.go), served
// through the SDK's own client and event-stream decoder.
//
// Not emulated: per-shard rate limits (inject ErrThrottled instead), DryRun,
// StreamId, writes through the API, and stream deletion.
package fakekinesis
