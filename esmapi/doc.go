// Package esmapi serves Lambda's event source mapping REST API (2015-03-31) and runs, one poller
// each, the Kinesis mappings created through it.
//
// Manager keeps the mappings (a Catalog persists them, progress is keyed by mapping UUID) and
// answers CreateEventSourceMapping, GetEventSourceMapping, UpdateEventSourceMapping,
// DeleteEventSourceMapping, ListEventSourceMappings and the tag operations in AWS's shapes, status
// codes and errors. Updates apply live: the mapping's poller is stopped gracefully and started
// again with the new settings from its stored checkpoints. RequireSigV4 guards the API when it is
// reachable beyond loopback.
package esmapi
