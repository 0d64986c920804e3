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
package esmapi
