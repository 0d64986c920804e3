package redrive

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/source/dynamostreams"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// Message is one on-failure message of a Kinesis or DynamoDB Streams mapping, as Lambda (and esm)
// writes it to an SQS queue, an SNS topic or an S3 bucket.
type Message struct {
	// Condition is RetryAttemptsExhausted or RecordAgeExceeded.
	Condition   string
	RequestID   string
	FunctionARN string
	// InvokeCount is requestContext.approximateInvokeCount.
	InvokeCount int
	// FunctionError is responseContext.functionError ("" when null or absent).
	FunctionError string
	Timestamp     time.Time

	StreamARN, ShardID                     string
	StartSequenceNumber, EndSequenceNumber string
	FirstArrival, LastArrival              time.Time
	BatchSize                              int
	// Payload is the event the function was invoked with; only S3 objects carry it.
	Payload []byte
}

// maxSequenceDigits bounds a sequence number: Kinesis's are decimal strings of at most 128 digits.
const maxSequenceDigits = 128

// ErrInvalidMessage is wrapped by every ParseMessage error.
var ErrInvalidMessage = errors.New("not an on-failure message of a stream")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidMessage, fmt.Sprintf(format, args...))
}

type wireMessage struct {
	// An SNS notification delivered to SQS without raw message delivery wraps the message.
	Type    string  `json:"Type"`
	Message *string `json:"Message"`

	RequestContext *struct {
		RequestID              string `json:"requestId"`
		FunctionARN            string `json:"functionArn"`
		Condition              string `json:"condition"`
		ApproximateInvokeCount int    `json:"approximateInvokeCount"`
	} `json:"requestContext"`
	ResponseContext *struct {
		FunctionError *string `json:"functionError"`
	} `json:"responseContext"`
	Timestamp string `json:"timestamp"`
	// One of the two: a Kinesis stream's batch, or a DynamoDB stream's.
	Info    *batchInfo      `json:"KinesisBatchInfo"`
	DDBInfo *batchInfo      `json:"DDBStreamBatchInfo"`
	Payload json.RawMessage `json:"payload"`
}

type batchInfo struct {
	ShardID   string `json:"shardId"`
	Start     string `json:"startSequenceNumber"`
	End       string `json:"endSequenceNumber"`
	First     string `json:"approximateArrivalOfFirstRecord"`
	Last      string `json:"approximateArrivalOfLastRecord"`
	BatchSize int    `json:"batchSize"`
	StreamARN string `json:"streamArn"`
}

// ParseMessage reads an on-failure message: an SQS message body or SNS message, the same wrapped
// in an SNS notification (an SNS topic's queue subscription without raw delivery), or an S3
// object, whose payload is kept (as Lambda's escaped JSON string, or as an object). It checks
// what a redrive depends on: the shard, a range of decimal sequence numbers in order, a batch size
// of at least 1, the stream ARN of its batch info (a Kinesis stream in KinesisBatchInfo, a DynamoDB
// stream in DDBStreamBatchInfo), and for a payload, a Records array that starts and ends at
// the range's sequence numbers. Errors wrap ErrInvalidMessage.
func ParseMessage(b []byte) (Message, error) {
	var w wireMessage
	if err := json.Unmarshal(b, &w); err != nil {
		return Message{}, invalid("%v", err)
	}
	if w.Type == "Notification" && w.Message != nil && w.Info == nil && w.DDBInfo == nil {
		if err := json.Unmarshal([]byte(*w.Message), &w); err != nil {
			return Message{}, invalid("SNS notification: %v", err)
		}
	}
	ddb := w.DDBInfo != nil
	switch {
	case w.Info == nil && w.DDBInfo == nil:
		return Message{}, invalid("no KinesisBatchInfo or DDBStreamBatchInfo")
	case w.Info != nil && ddb:
		return Message{}, invalid("both KinesisBatchInfo and DDBStreamBatchInfo")
	case ddb:
		w.Info = w.DDBInfo
	}
	m := Message{
		StreamARN: w.Info.StreamARN, ShardID: w.Info.ShardID,
		StartSequenceNumber: w.Info.Start, EndSequenceNumber: w.Info.End, BatchSize: w.Info.BatchSize,
	}
	if rc := w.RequestContext; rc != nil {
		m.Condition, m.RequestID, m.FunctionARN, m.InvokeCount = rc.Condition, rc.RequestID, rc.FunctionARN, rc.ApproximateInvokeCount
	}
	if rc := w.ResponseContext; rc != nil && rc.FunctionError != nil {
		m.FunctionError = *rc.FunctionError
	}
	m.Timestamp, _ = time.Parse(time.RFC3339Nano, w.Timestamp)
	m.FirstArrival, _ = time.Parse(time.RFC3339Nano, w.Info.First)
	m.LastArrival, _ = time.Parse(time.RFC3339Nano, w.Info.Last)
	switch {
	case m.ShardID == "" || strings.ContainsAny(m.ShardID, "/: \t\n"):
		return Message{}, invalid("shardId %q", m.ShardID)
	case !isSequence(m.StartSequenceNumber):
		return Message{}, invalid("startSequenceNumber %q is not a sequence number", m.StartSequenceNumber)
	case !isSequence(m.EndSequenceNumber):
		return Message{}, invalid("endSequenceNumber %q is not a sequence number", m.EndSequenceNumber)
	case compareSeq(m.StartSequenceNumber, m.EndSequenceNumber) > 0:
		return Message{}, invalid("startSequenceNumber %s is after endSequenceNumber %s", m.StartSequenceNumber, m.EndSequenceNumber)
	case m.BatchSize < 1 || m.BatchSize > poller.MaxBatchSize:
		return Message{}, invalid("batchSize %d is outside 1-%d", m.BatchSize, poller.MaxBatchSize)
	}
	if err := checkStreamARN(m.StreamARN, ddb); err != nil {
		return Message{}, invalid("streamArn: %v", err)
	}
	if len(w.Payload) > 0 && !bytes.Equal(w.Payload, []byte("null")) {
		p, err := payloadOf(w.Payload)
		if err != nil {
			return Message{}, err
		}
		recs, err := payloadRecords(p)
		if err != nil {
			return Message{}, err
		}
		if len(recs) == 0 || recs[0].seq != m.StartSequenceNumber || recs[len(recs)-1].seq != m.EndSequenceNumber {
			return Message{}, invalid("the payload's records do not span %s-%s", m.StartSequenceNumber, m.EndSequenceNumber)
		}
		m.Payload = p
	}
	return m, nil
}

// payloadOf returns the event an S3 object carries: its payload string (Lambda's form), or the
// payload object itself, compacted.
func payloadOf(raw json.RawMessage) ([]byte, error) {
	var s string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, invalid("payload: %v", err)
		}
		return []byte(s), nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, invalid("payload: %v", err)
	}
	return buf.Bytes(), nil
}

// payloadRecord is one record of an event payload: its JSON as the function received it, and the
// identifiers a redrive needs.
type payloadRecord struct {
	raw json.RawMessage
	seq string
}

// checkStreamARN checks the batch info's streamArn: a DynamoDB stream's in DDBStreamBatchInfo, a
// Kinesis stream's in KinesisBatchInfo.
func checkStreamARN(s string, ddb bool) error {
	if ddb {
		_, err := dynamostreams.ParseStreamARN(s)
		return err
	}
	_, err := kinesissrc.ParseStreamARN(s)
	return err
}

// payloadRecords lists the records of an event payload (a KinesisEvent or KinesisTimeWindowEvent,
// a DynamoDBEvent or DynamoDBTimeWindowEvent): a record's sequence number is its
// kinesis.sequenceNumber or its dynamodb.SequenceNumber.
func payloadRecords(payload []byte) ([]payloadRecord, error) {
	var ev struct {
		Records []json.RawMessage `json:"Records"`
	}
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, invalid("payload is not an event: %v", err)
	}
	out := make([]payloadRecord, 0, len(ev.Records))
	for i, raw := range ev.Records {
		var r struct {
			Kinesis struct {
				SequenceNumber string `json:"sequenceNumber"`
			} `json:"kinesis"`
			DynamoDB struct {
				SequenceNumber string `json:"SequenceNumber"`
			} `json:"dynamodb"`
		}
		err := json.Unmarshal(raw, &r)
		seq := r.Kinesis.SequenceNumber
		if seq == "" {
			seq = r.DynamoDB.SequenceNumber
		}
		if err != nil || !isSequence(seq) {
			return nil, invalid("payload record %d has no sequence number", i)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return nil, invalid("payload record %d: %v", i, err)
		}
		out = append(out, payloadRecord{raw: buf.Bytes(), seq: seq})
	}
	return out, nil
}

// isSequence reports whether s is a sequence number (Kinesis', DynamoDB Streams'): 1 to 128
// decimal digits.
func isSequence(s string) bool {
	if s == "" || len(s) > maxSequenceDigits {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// compareSeq orders two sequence numbers (decimal strings) numerically.
func compareSeq(a, b string) int {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}
