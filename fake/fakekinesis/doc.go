// Package fakekinesis is an in-memory Kinesis Data Streams for tests of code that reads a
// stream: the calls an event source mapping or any other consumer makes (ListShards,
// GetShardIterator, GetRecords, DescribeStreamSummary, and for enhanced fan-out
// RegisterStreamConsumer, DescribeStreamConsumer and SubscribeToShard), setup helpers that
// produce records and reshard the stream, and hooks that inject faults. It is for unit tests,
// fault injection, simulations and benchmarks; it does not replace tests against a Kinesis
// emulator or Kinesis itself.
//
// A *Fake satisfies any consumer-declared interface made of those methods: they have the
// signatures of *kinesis.Client's. Its behaviour follows real Kinesis where a consumer can tell:
//
//   - Shard ids look like shardId-000000000000. They increase across a stream
//     and are never reused.
//   - Sequence numbers are 56-digit decimal strings. They strictly increase per
//     stream and encode the shard they belong to, so a sequence number given
//     to the wrong shard is rejected as Kinesis rejects it. CompareSeq orders them.
//   - Put routes a record by the MD5 of its partition key into the open shard
//     whose hash key range contains it.
//   - Split, Merge and UpdateShardCount close shards. Reading a closed shard to its end returns
//     ChildShards and a nil NextShardIterator. Trim and TrimBefore remove what retention would.
//   - Iterators expire after the iterator TTL (default 5 minutes), measured
//     on the injected clock.
//   - Errors come back in the SDK's envelope: a *smithy.OperationError
//     around an *awshttp.ResponseError (HTTP 400, or 500 for server faults)
//     around the modelled exception, such as *types.ExpiredIteratorException.
//     Use errors.As, as with the real client.
//   - SubscribeToShard is served through the SDK's own client and event-stream decoder, so a
//     subscription has the real client's types and stream behaviour: the initial response
//     (WithoutInitialResponse omits it, as kinesis-local does), an event when records arrive or
//     every second, ChildShards at the end of a closed shard, the 5-minute lifetime and
//     ResourceInUseException for a second subscription within 5 seconds (WithSubscriptionTiming).
//
// Every method is safe for concurrent use. The setup helpers (CreateStream,
// Put, Split, Merge, Trim and so on) panic on misuse such as an unknown
// stream or shard, because misuse there is a bug in the test itself.
// The API methods never panic. They report errors as Kinesis does.
//
// # Injecting faults
//
// Inject installs one callback that runs at the start of every ListShards, GetShardIterator,
// GetRecords, DescribeStreamSummary and SubscribeToShard call (named by the Op constants) with
// the call's input, and before every event a subscription sends (OpSubscribeToShardEvent, with a
// *SubscriptionEvent). A nil result lets the call run; an error is the call's error, wrapped as
// the SDK wraps what Kinesis returns. ErrThrottled, ErrExpired and ErrInternal build the errors
// Kinesis returns for the read calls; ErrDropped cuts a subscription's connection. Calls counts
// each operation, so a callback can fail the first call only:
//
//	f.Inject(func(op string, in any) error {
//		if op == fakekinesis.OpGetRecords && f.Calls(op) == 1 {
//			return fakekinesis.ErrThrottled()
//		}
//		return nil
//	})
//
// The callback runs without the Fake's lock held, so it may call Put, Split and the other
// helpers (to reshard in the middle of a read, say), and it may block on a channel to hold a
// call until the test releases it. Per-shard rate limits are not emulated: inject ErrThrottled.
//
// # Virtual time
//
// The clock defaults to time.Now (WithClock replaces it), and the fake starts a goroutine only
// for each subscription, which ends with it. Created inside a testing/synctest bubble, the fake
// runs on the bubble's virtual time: iterator expiry, MillisBehindLatest, a subscription's
// heartbeat and lifetime, and the reader's own sleeps and backoffs all pass at once when every
// goroutine is durably blocked, so a test of minutes of retries runs in milliseconds and the
// same way every time.
//
// Not emulated: per-shard rate limits, DryRun, StreamId, writes through the API, and stream
// deletion.
package fakekinesis
