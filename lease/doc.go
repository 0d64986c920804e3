// Package lease shares one mapping's shards among esm workers through a DynamoDB lease table:
// Dynamo is the mapping's poller.Coordinator and its poller.Store, whose checkpoints only the
// lease's holder can write. lease/DESIGN.md gives the protocol and why; a single process keeps
// its progress in package checkpoint instead.
package lease
