// Package status reports a mapping's progress: every shard of its stream with its lineage, its
// state (pending, reading, finished), its checkpoint and, where known, the worker holding its
// lease and what a running esm says of it live (its state, iterator age and enhanced fan-out
// subscription).
//
// A Reader joins three sources: the stream's shards (ListShards), the mapping's stored progress
// (a state directory, read without writing, or a DynamoDB lease table) and, optionally, the
// Prometheus metrics of a running esm. Report.Render draws the result as a lineage tree; a Report
// marshals to the JSON that esm status --json prints.
//
// Nothing in the package writes: it is safe to run beside the esm that owns the mapping, except
// that a state directory held by a running esm cannot be read (its lock is exclusive) and is then
// reported as such, or skipped when the live view of WithMetricsAddr stands in for it.
package status
