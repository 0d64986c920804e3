// Package chaos runs esm workers as processes on kinesis-local and dynalite under the faults of
// the real world, and judges the run by the invariants of the simulation.
//
// Each worker ("esm run --lease-table") reaches Kinesis, DynamoDB and its function through its own
// fault proxy on 127.0.0.1, which routes each request by its X-Amz-Target (or, for the function,
// the Lambda Invoke path) and, from a seeded source, answers with AWS-shaped 5xx and throttling
// errors, drops connections before or after forwarding (the answer lost), and cuts the worker off
// from DynamoDB, Kinesis, both, or its function while the others see everything. The workers are
// also killed (SIGKILL), paused past their lease (SIGSTOP), and stopped (SIGTERM, also while they
// start), while a producer writes records with per-key sequence numbers and the stream is split,
// merged and rescaled (UpdateShardCount).
//
// The function is served by this process as a Lambda-Invoke-compatible endpoint (behind each
// worker's proxy) and records every invocation's start and end, shard and records. [Judge] then
// checks: every record delivered, first deliveries in order per partition key, no invocation of
// a shard starting before every invocation of its ancestors ended, no two invocations of one
// shard overlapping, no child shard waiting more than 15 s once its parents are done, SIGTERM
// exiting 0 and no worker exiting on its own, and that faults landed while invocations ran.
//
// With SourceDynamoDB ("make chaos SOURCE=dynamodb") the stream is a DynamoDB table's
// (NEW_AND_OLD_IMAGES) on a private ddb-local whose shards rotate every few seconds, in place of
// the reshards (DynamoDB Streams has none); the producer writes puts, updates, deletes, batches and
// transactions (verify.DDBProducer), each item carrying its key's change counter, so that the
// change is "key:n" as a Kinesis record's data is; the workers reach DynamoDB Streams through
// their proxies as they reach Kinesis, and one of them is killed or paused mid-invocation just
// before four of the rotations. The function decodes events.DynamoDBEvent, which does not name
// its shard: the run reads the stream afterwards to place each record. The same judge applies
// (the lineage from DescribeStream's ParentShardId), with more verdicts: each invocation holds
// one shard's records, every change arrives as AWS sends it, the stream holds each change written
// once, and the run exercised the path (enough parent→child pairs with invocations of both, a
// SIGKILL, changes).
//
// "make chaos SEEDS=… DURATION=… SOURCE=…" runs it; "go test" runs one short seed of each source
// (25 s of Kinesis, 15 s of DynamoDB).
package chaos
