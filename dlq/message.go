// Package dlq delivers on-failure records (DestinationConfig.OnFailure) to SQS, SNS or S3 in
// the exact shape Lambda uses for a Kinesis or DynamoDB Streams event source mapping: metadata
// only for SQS and SNS, metadata plus the invocation payload for S3.
package dlq

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/google/uuid"

	"github.com/kinesis-esm/esm/poller"
)

// The message's fields in the order Lambda writes them.
type message struct {
	RequestContext  requestContext   `json:"requestContext"`
	ResponseContext *responseContext `json:"responseContext,omitempty"`
	Version         string           `json:"version"`
	Timestamp       string           `json:"timestamp"`
	// One of the two is set: the batch info of a Kinesis stream, or of a DynamoDB stream.
	KinesisBatchInfo   *batchInfo `json:"KinesisBatchInfo,omitempty"`
	DDBStreamBatchInfo *batchInfo `json:"DDBStreamBatchInfo,omitempty"`
	// Payload is set for S3 only: the invocation event as an escaped JSON string, as Lambda's
	// documentation describes it.
	Payload *string `json:"payload,omitempty"`
}

type requestContext struct {
	RequestID              string `json:"requestId"`
	FunctionARN            string `json:"functionArn"`
	Condition              string `json:"condition"`
	ApproximateInvokeCount int    `json:"approximateInvokeCount"`
}

type responseContext struct {
	StatusCode      int     `json:"statusCode"`
	ExecutedVersion string  `json:"executedVersion"`
	FunctionError   *string `json:"functionError"` // null when the function returned normally
}

type batchInfo struct {
	ShardID                         string `json:"shardId"`
	StartSequenceNumber             string `json:"startSequenceNumber"`
	EndSequenceNumber               string `json:"endSequenceNumber"`
	ApproximateArrivalOfFirstRecord string `json:"approximateArrivalOfFirstRecord"`
	ApproximateArrivalOfLastRecord  string `json:"approximateArrivalOfLastRecord"`
	BatchSize                       int    `json:"batchSize"`
	StreamARN                       string `json:"streamArn"`
}

// timeLayout is ISO 8601 in UTC with milliseconds, as in Lambda's Kinesis failure records and
// the top-level timestamp of every record.
const timeLayout = "2006-01-02T15:04:05.000Z"

// ddbArrivalLayout is the arrival times of DDBStreamBatchInfo: whole seconds, as AWS recorded
// them ("2022-07-13T13:48:01Z"), while the message's timestamp keeps its milliseconds.
const ddbArrivalLayout = "2006-01-02T15:04:05Z"

func stamp(t time.Time) string { return t.UTC().Format(timeLayout) }

// fromDynamoDBStream reports whether streamARN is a DynamoDB stream's
// (arn:aws:dynamodb:<region>:<account>:table/<table>/stream/<label>): its failure records carry
// DDBStreamBatchInfo instead of KinesisBatchInfo.
func fromDynamoDBStream(streamARN string) bool {
	a, err := arn.Parse(streamARN)
	return err == nil && a.Service == "dynamodb"
}

func build(f poller.FailureRecord) message {
	m := message{
		RequestContext: requestContext{RequestID: f.RequestID, FunctionARN: f.FunctionARN, Condition: f.Condition,
			ApproximateInvokeCount: max(f.ApproximateInvokeCount, 1)},
		Version:   "1.0",
		Timestamp: stamp(f.Timestamp),
	}
	info := &batchInfo{
		ShardID: f.ShardID, StartSequenceNumber: f.StartSequenceNumber, EndSequenceNumber: f.EndSequenceNumber,
		ApproximateArrivalOfFirstRecord: stamp(f.FirstArrival), ApproximateArrivalOfLastRecord: stamp(f.LastArrival),
		BatchSize: f.BatchSize, StreamARN: f.StreamARN,
	}
	if fromDynamoDBStream(f.StreamARN) {
		info.ApproximateArrivalOfFirstRecord = f.FirstArrival.UTC().Format(ddbArrivalLayout)
		info.ApproximateArrivalOfLastRecord = f.LastArrival.UTC().Format(ddbArrivalLayout)
		m.DDBStreamBatchInfo = info
	} else {
		m.KinesisBatchInfo = info
	}
	if f.Response != nil {
		rc := &responseContext{StatusCode: f.Response.StatusCode, ExecutedVersion: f.Response.ExecutedVersion}
		if f.Response.FunctionError != "" {
			fe := f.Response.FunctionError
			rc.FunctionError = &fe
		}
		m.ResponseContext = rc
	}
	return m
}

// marshal renders m without HTML escaping (Lambda writes <, > and & as they are).
func marshal(m message) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil { // only strings and numbers: cannot happen
		panic(fmt.Sprintf("dlq: marshal failure record: %v", err))
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// Message renders the SQS message body / SNS message of a failure record.
func Message(f poller.FailureRecord) []byte { return marshal(build(f)) }

// S3Object renders the S3 object of a failure record: the message plus the payload, an escaped
// JSON string. AWS's recorded object has its keys in sorted order at every level (KinesisBatchInfo
// or DDBStreamBatchInfo, payload, requestContext, responseContext, timestamp, version), unlike the SQS and SNS message;
// encoding/json writes a map's keys sorted, so the message goes through one.
func S3Object(f poller.FailureRecord) []byte {
	m := build(f)
	p := string(f.Payload)
	m.Payload = &p
	var sorted map[string]any
	dec := json.NewDecoder(bytes.NewReader(marshal(m)))
	dec.UseNumber()
	if err := dec.Decode(&sorted); err != nil { // our own encoding: cannot happen
		panic(fmt.Sprintf("dlq: re-read failure record: %v", err))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(sorted); err != nil {
		panic(fmt.Sprintf("dlq: marshal failure record: %v", err))
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// S3Key is where Lambda puts a failure record in the bucket:
// aws/lambda/<mapping UUID>/<shard id>/YYYY/MM/DD/YYYY-MM-DDTHH.MM.SS-<random UUID>, from the
// record's timestamp in UTC.
func S3Key(mappingUUID string, f poller.FailureRecord) string {
	t := f.Timestamp.UTC()
	return fmt.Sprintf("aws/lambda/%s/%s/%s/%s-%s", mappingUUID, f.ShardID, t.Format("2006/01/02"), t.Format("2006-01-02T15.04.05"), uuid.NewString())
}
