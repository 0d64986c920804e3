// Package esmapi serves Lambda's event source mapping REST API (2015-03-31) and runs, one poller
// each, the Kinesis mappings created through it.
//
// Manager keeps the mappings (a Catalog persists them, progress is keyed by mapping UUID) and
// answers CreateEventSourceMapping, GetEventSourceMapping, UpdateEventSourceMapping,
// DeleteEventSourceMapping, ListEventSourceMappings and the tag operations in AWS's shapes, status
// codes and errors. Updates apply live: the mapping's poller is stopped gracefully and started
// again with the new settings from its stored checkpoints. RequireSigV4 guards the API when it is
// reachable beyond loopback.
//
// Workers sharing a catalog (DynamoCatalog) apply each other's changes every sync interval
// (Sync). Every write of a mapping's record is conditional on the revision the worker read
// (Record.Revision), so one revision has one content; a change made from a revision another
// worker replaced or deleted fails with ErrConflict, and is answered, once the catalog has been
// read again, as Lambda answers a conflicting change.
//
// A catalog holds at most one mapping of an event source (a stream, or an enhanced fan-out
// consumer) to a function, whichever workers write it: Put refuses a record that would give a
// mapping the source and function of another (PairTakenError), and the API answers that as Lambda
// does, 409 ResourceConflictException naming the other mapping's UUID, on Create and on an Update
// that changes the function. A DynamoCatalog keeps the rule with a guard item per pair and
// single-item conditional writes only (see pairs.go for the protocol and its crash cases).
// EnsureMapping, a template's start, adopts the mapping another worker made first, so N workers
// started with one template run one mapping.
//
// esm's own operator routes extend the API (skip.go): under a mapping,
// POST /2015-03-31/event-source-mappings/{UUID}/esm/{tool}, signed and authorised as the rest;
// on a worker's --metrics-addr, POST /esm/{tool} for loopback clients. The first is skip: the
// blocked batch of a shard goes to the on-failure destination (condition OperatorSkipped) and
// the shard moves on.
package esmapi
