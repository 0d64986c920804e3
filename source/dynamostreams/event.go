package dynamostreams

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/kinesis-esm/esm/internal/epoch"
)

// The event Lambda sends for a DynamoDB stream (events.DynamoDBEvent): each record as
// GetRecords returned it, its keys in the order AWS's recording has them, plus eventSourceARN.
// eventVersion is the stream record's own ("1.1" from DynamoDB Streams today; AWS's recording has
// "1.1", the documentation's example "1.0"); a record without one gets "1.1".
type eventRecord struct {
	EventID        string        `json:"eventID"`
	EventName      string        `json:"eventName"`
	EventVersion   string        `json:"eventVersion"`
	EventSource    string        `json:"eventSource"`
	AWSRegion      string        `json:"awsRegion"`
	Change         streamRecord  `json:"dynamodb"`
	EventSourceARN string        `json:"eventSourceARN"`
	UserIdentity   *userIdentity `json:"userIdentity,omitempty"` // TTL deletes only
}

// streamRecord is the record's "dynamodb" object, keys in AWS's (alphabetical) order.
type streamRecord struct {
	ApproximateCreationDateTime *epochSeconds `json:"ApproximateCreationDateTime,omitempty"`
	Keys                        attributeMap  `json:"Keys,omitempty"`
	NewImage                    attributeMap  `json:"NewImage,omitempty"`
	OldImage                    attributeMap  `json:"OldImage,omitempty"`
	SequenceNumber              string        `json:"SequenceNumber"`
	SizeBytes                   int64         `json:"SizeBytes"`
	StreamViewType              string        `json:"StreamViewType"`
}

type userIdentity struct {
	Type        string `json:"type"`
	PrincipalID string `json:"principalId"`
}

// eventVersion is the version a stream record without one is given: DynamoDB Streams' current.
const eventVersion = "1.1"

// epochSeconds is ApproximateCreationDateTime as the event writes it: a JSON number of seconds
// (aws-lambda-go's SecondsEpochTime), whole seconds as DynamoDB Streams records them.
type epochSeconds time.Time

func (e epochSeconds) MarshalJSON() ([]byte, error) {
	return epoch.AppendSeconds(nil, time.Time(e)), nil
}

// attributeMap is an item image or its keys: each attribute in DynamoDB's JSON
// ({"S":"x"}, {"N":"101"}, {"B":"<base64>"}, …), attributes in name order.
type attributeMap map[string]types.AttributeValue

func (m attributeMap) MarshalJSON() ([]byte, error) {
	b, err := appendAttributeMap(nil, m)
	return b, err
}

func appendAttributeMap(b []byte, m map[string]types.AttributeValue) ([]byte, error) {
	b = append(b, '{')
	for i, name := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSON(b, name)
		b = append(b, ':')
		var err error
		if b, err = appendAttribute(b, m[name]); err != nil {
			return nil, fmt.Errorf("attribute %q: %w", name, err)
		}
	}
	return append(b, '}'), nil
}

// appendAttribute appends one attribute value as DynamoDB's JSON writes it: a one-key object
// whose key is the type; numbers stay strings, binaries are base64.
func appendAttribute(b []byte, v types.AttributeValue) ([]byte, error) {
	var err error
	switch t := v.(type) {
	case *types.AttributeValueMemberS:
		b = appendJSON(append(b, `{"S":`...), t.Value)
	case *types.AttributeValueMemberN:
		b = appendJSON(append(b, `{"N":`...), t.Value)
	case *types.AttributeValueMemberB:
		b = appendJSON(append(b, `{"B":`...), t.Value) // []byte: base64
	case *types.AttributeValueMemberBOOL:
		b = appendJSON(append(b, `{"BOOL":`...), t.Value)
	case *types.AttributeValueMemberNULL:
		b = appendJSON(append(b, `{"NULL":`...), t.Value)
	case *types.AttributeValueMemberSS:
		b = appendJSON(append(b, `{"SS":`...), nonNil(t.Value))
	case *types.AttributeValueMemberNS:
		b = appendJSON(append(b, `{"NS":`...), nonNil(t.Value))
	case *types.AttributeValueMemberBS:
		b = appendJSON(append(b, `{"BS":`...), nonNil(t.Value)) // each element base64
	case *types.AttributeValueMemberM:
		b, err = appendAttributeMap(append(b, `{"M":`...), t.Value)
	case *types.AttributeValueMemberL:
		b = append(b, `{"L":[`...)
		for i, e := range t.Value {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendAttribute(b, e); err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
		}
		b = append(b, ']')
	default:
		return nil, fmt.Errorf("unknown attribute value type %T", v)
	}
	if err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// appendJSON appends v as encoding/json writes it, without its HTML-safe escapes: Lambda writes
// <, > and & as they are (AWS's recording of the event has "<region>" as it is).
func appendJSON(b []byte, v any) []byte {
	buf := bytes.NewBuffer(b)
	if err := encode(buf, v); err != nil { // strings, booleans and slices of them: cannot happen
		panic(fmt.Sprintf("dynamostreams: marshal %T: %v", v, err))
	}
	return buf.Bytes()
}

// encode writes v's JSON to buf without HTML-safe escapes and without a newline after it.
func encode(buf *bytes.Buffer, v any) error {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	buf.Truncate(buf.Len() - 1) // Encode's newline
	return nil
}

// toEvent is the event record of one stream record, read from the stream streamARN.
func toEvent(r *types.Record, streamARN string) eventRecord {
	e := eventRecord{
		EventID: deref(r.EventID), EventName: string(r.EventName), EventVersion: deref(r.EventVersion),
		EventSource: deref(r.EventSource), AWSRegion: deref(r.AwsRegion), EventSourceARN: streamARN,
	}
	if e.EventVersion == "" {
		e.EventVersion = eventVersion
	}
	if e.EventSource == "" {
		e.EventSource = "aws:dynamodb"
	}
	if d := r.Dynamodb; d != nil {
		e.Change = streamRecord{Keys: d.Keys, NewImage: d.NewImage, OldImage: d.OldImage,
			SequenceNumber: deref(d.SequenceNumber), StreamViewType: string(d.StreamViewType)}
		if d.ApproximateCreationDateTime != nil {
			e.Change.ApproximateCreationDateTime = (*epochSeconds)(d.ApproximateCreationDateTime)
		}
		if d.SizeBytes != nil {
			e.Change.SizeBytes = *d.SizeBytes
		}
	}
	if u := r.UserIdentity; u != nil {
		e.UserIdentity = &userIdentity{Type: deref(u.Type), PrincipalID: deref(u.PrincipalId)}
	}
	return e
}

// appendRecord appends the event's JSON object of one stream record.
func appendRecord(b []byte, r *types.Record, streamARN string) ([]byte, error) {
	buf := bytes.NewBuffer(b)
	if err := encode(buf, toEvent(r, streamARN)); err != nil {
		return nil, fmt.Errorf("record %s: %w", sequenceNumber(r), err)
	}
	return buf.Bytes(), nil
}

// Event renders recs, read from the stream streamARN, as the events.DynamoDBEvent Lambda sends.
func Event(recs []types.Record, streamARN string) ([]byte, error) {
	b := []byte(`{"Records":[`)
	for i := range recs {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendRecord(b, &recs[i], streamARN); err != nil {
			return nil, err
		}
	}
	return append(b, "]}"...), nil
}

// sequenceNumber is the record's SequenceNumber: its place in the shard, the checkpoint and the
// itemIdentifier of a partial batch response.
func sequenceNumber(r *types.Record) string {
	if r.Dynamodb == nil {
		return ""
	}
	return deref(r.Dynamodb.SequenceNumber)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
