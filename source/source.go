// Package source holds what a stream source and the engine (package poller) share: a stream's
// shards with their parents, positions in a shard, pages of records, the classification of read
// errors, a source's identity and limits, and the configuration error a source's ARN is refused
// with. The interface a source implements is poller.Source (and, where a source has them, its
// optional capabilities); the sources are its subpackages (source/kinesis,
// source/dynamostreams).
//
// This package imports nothing of the engine, so that a source, and the engine's own tests, can
// use it without a cycle.
package source

import (
	"errors"
	"time"
)

// Shard is one shard of a stream, as a listing or a shard's end shows it.
type Shard struct {
	ID string
	// Parents are the shards it follows: none, one (a split, or any DynamoDB Streams shard) or
	// two (a Kinesis merge). A shard is read once every parent is read to its end.
	Parents []string
	// StartingHashKey and EndingHashKey are its hash key range (Kinesis), for the lease table's
	// shard map; empty where a source has none.
	StartingHashKey, EndingHashKey string
	// StartingSequenceNumber and EndingSequenceNumber are the shard's range of sequence
	// numbers as a listing shows it; EndingSequenceNumber empty while the shard is open, both
	// empty where the listing gives none.
	StartingSequenceNumber, EndingSequenceNumber string
	// Closed: the shard has an end (a listing shows its ending sequence number). A closed shard
	// is read to that end and then finished.
	Closed bool
}

// PositionType is where in a shard a read opens, as Kinesis and DynamoDB Streams name it.
type PositionType string

// The position types. A source may refuse those it does not have (DynamoDB Streams has no
// AT_TIMESTAMP).
const (
	TrimHorizon         PositionType = "TRIM_HORIZON"
	Latest              PositionType = "LATEST"
	AtTimestamp         PositionType = "AT_TIMESTAMP"
	AtSequenceNumber    PositionType = "AT_SEQUENCE_NUMBER"
	AfterSequenceNumber PositionType = "AFTER_SEQUENCE_NUMBER"
)

// Position is where a read of a shard opens.
type Position struct {
	Type           PositionType
	SequenceNumber string    // with AT_SEQUENCE_NUMBER and AFTER_SEQUENCE_NUMBER
	Timestamp      time.Time // with AT_TIMESTAMP
}

// Identity is who a source is in the events and messages the function and the on-failure
// destination receive.
type Identity struct {
	// ARN is the event source's ARN: the events' eventSourceARN, the mapping's EventSourceArn,
	// the key of its checkpoints.
	ARN string
	// Name is the stream's name (Kinesis), the table's (DynamoDB Streams): for logs and traces.
	Name string
	// EventSource is the events' eventSource: aws:kinesis, aws:dynamodb.
	EventSource string
	// Partition, Region and Account are the ARN's.
	Partition, Region, Account string
	// InvokeIdentityARN is the events' invokeIdentityArn: the function's execution role.
	InvokeIdentityARN string
}

// Limits are a source's limits and pace.
type Limits struct {
	// MaxRecordsPerRead is the most records one read returns (Kinesis 10000, DynamoDB Streams
	// 1000).
	MaxRecordsPerRead int
	// MinPollSpacing is the least time between two reads of one shard while it is behind
	// (Kinesis allows five reads a second per shard).
	MinPollSpacing time.Duration
	// PollInterval is Lambda's pace of a caught-up shard's polls for the source (DynamoDB
	// Streams: four a second); 0: the engine's default, once a second (Kinesis).
	PollInterval time.Duration
}

// The classes of read errors. A source wraps each error of a read (opening a shard, reading a
// page, subscribing) that is one of these in it, so the engine classifies with errors.Is and
// nothing else: any other error is transient (a 5xx, the network) and retried with backoff.
var (
	// ErrNotFound: the stream does not exist. Run ends with it.
	ErrNotFound = errors.New("stream not found")
	// ErrThrottled: the source's read limit was hit (Kinesis'
	// ProvisionedThroughputExceededException, DynamoDB Streams' LimitExceededException). Backed
	// off, same iterator.
	ErrThrottled = errors.New("read throttled")
	// ErrExpired: the iterator expired (Kinesis after 5 minutes, DynamoDB Streams after 15). The
	// shard is opened again after its last record read.
	ErrExpired = errors.New("iterator expired")
	// ErrInvalidPosition: the position itself is invalid (a sequence number of another shard, a
	// malformed one). It ends the mapping.
	ErrInvalidPosition = errors.New("invalid position")
	// ErrInUse: a subscription to the shard is held by another subscriber. Backed off.
	ErrInUse = errors.New("subscription in use")
)

// ValidationError is a configuration field outside what Lambda accepts: one of the settings, or
// a source's ARN. Its message names the field, the value and what is allowed, in Lambda's own
// words where AWS recorded them. poller.ValidationError is this type.
type ValidationError struct {
	Field   string
	Message string
	// Err is the error the message was made from, when there is one: a filter pattern's
	// *filter.PatternError, the on-failure destination's error.
	Err error
}

func (e *ValidationError) Error() string { return e.Message }

// ErrInvalidConfig is wrapped by every configuration error (poller.ErrInvalidConfig).
var ErrInvalidConfig = errors.New("invalid configuration")

// Unwrap returns ErrInvalidConfig and, when there is one, the error behind the message.
func (e *ValidationError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalidConfig, e.Err}
	}
	return []error{ErrInvalidConfig}
}

// Record is one record of a shard as the engine handles it: batching, ordering, checkpoints,
// retries and ages go by these fields; what the function's event holds of it is the source's
// (its Events).
type Record struct {
	// SequenceNumber orders the records of a shard (decimal digits; the checkpoint).
	SequenceNumber string
	// ArrivalTime is when the record reached the stream (Kinesis' ApproximateArrivalTimestamp,
	// DynamoDB Streams' ApproximateCreationDateTime); zero when unknown. Record ages and the
	// iterator age go by it.
	ArrivalTime time.Time
	// PartitionKey is the key whose records stay in order (ParallelizationFactor's slots).
	PartitionKey string
	// Data is the record's payload as the source's events carry it.
	Data []byte
}

// Page is what one read of a shard gives.
type Page struct {
	Records []Record
	// Next is the iterator of the next read; "" once the shard ended (then Children).
	Next string
	// Children are the shards that follow the shard, at its end (Kinesis' ChildShards); none
	// where a source gives none (the engine then lists the shards).
	Children []Shard
	// MillisBehind is how far the read is behind the shard's tip, in milliseconds (Kinesis'
	// MillisBehindLatest); 0 when caught up or unknown.
	MillisBehind int64
}

// Subscription is one subscription to a shard, where a source pushes its records (Kinesis'
// enhanced fan-out): the events of the subscription, in order. The engine reads it from one
// goroutine and closes it.
type Subscription interface {
	// Next waits for the subscription's next event, as a Page: its records, MillisBehind, and
	// Next, the sequence number the shard continues at (a new subscription opens
	// AT_SEQUENCE_NUMBER there), "" at the shard's end (then Children). It returns io.EOF once
	// the source ended the subscription, and an error once the context the subscription was
	// made with ended or the subscription failed.
	Next() (Page, error)
	Close() error
}
