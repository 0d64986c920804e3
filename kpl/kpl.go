// Package kpl decodes Kinesis records that the Kinesis Producer Library (KPL) aggregated: one
// Kinesis record that carries many user records. A handler reading a stream whose producers
// aggregate calls Deaggregate on each record of its event (Lambda, like esm, delivers aggregates
// as they are unless the mapping reads through an enhanced fan-out consumer).
//
// The aggregated format, as the KPL documents it: the 4 magic bytes 0xF3 0x89 0x9A 0xC2, then a
// protobuf AggregatedRecord message, then the MD5 digest (16 bytes) of that message's bytes.
//
//	message AggregatedRecord {
//	  repeated string partition_key_table     = 1;
//	  repeated string explicit_hash_key_table = 2;
//	  repeated Record records                 = 3;
//	}
//	message Record {
//	  required uint64 partition_key_index     = 1;
//	  optional uint64 explicit_hash_key_index = 2;
//	  required bytes  data                    = 3;
//	  repeated Tag    tags                    = 4;
//	}
//	message Tag { required string key = 1; optional string value = 2; }
//
// Data that does not start with the magic bytes, or whose digest does not match, is not an
// aggregate: it is one user record, as the KPL's own de-aggregators treat it.
package kpl

import (
	"bytes"
	"crypto/md5"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
	"google.golang.org/protobuf/encoding/protowire"
)

// Magic is how an aggregated record's data begins.
var Magic = []byte{0xF3, 0x89, 0x9A, 0xC2}

const digestLen = md5.Size

// ErrNotAggregated is returned by Decode for data that is not an aggregate: no magic bytes, too
// short, or a digest that does not match the message.
var ErrNotAggregated = errors.New("kpl: not an aggregated record")

// Record is one user record of an aggregate.
type Record struct {
	// PartitionKey is the user record's own partition key (from the aggregate's table).
	PartitionKey string
	// ExplicitHashKey is its explicit hash key, "" when it has none.
	ExplicitHashKey string
	// Data is the user record's data; it aliases the aggregate's bytes.
	Data []byte
	// SubSequenceNumber is its index in the aggregate, from 0: with the Kinesis record's sequence
	// number it identifies the user record, as the KCL's UserRecord does.
	SubSequenceNumber int64
}

// IsAggregated reports whether data is a KPL aggregate: the magic bytes and a matching digest.
// The message itself may still be malformed (Decode says so).
func IsAggregated(data []byte) bool {
	_, ok := message(data)
	return ok
}

// message returns the protobuf message of an aggregate.
func message(data []byte) ([]byte, bool) {
	if len(data) < len(Magic)+digestLen || !bytes.HasPrefix(data, Magic) {
		return nil, false
	}
	msg := data[len(Magic) : len(data)-digestLen]
	sum := md5.Sum(msg)
	return msg, bytes.Equal(sum[:], data[len(data)-digestLen:])
}

// Decode returns the user records of an aggregate in order. Data that is not an aggregate gives
// ErrNotAggregated; an aggregate whose message is malformed (a wire error, a missing required
// field, a table index out of range) gives an error naming the problem.
func Decode(data []byte) ([]Record, error) {
	msg, ok := message(data)
	if !ok {
		return nil, ErrNotAggregated
	}
	var keys, hashKeys []string
	type raw struct {
		pk, ehk     uint64
		hasPK, hasE bool
		data        []byte
		hasData     bool
	}
	var recs []raw
	err := fields(msg, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch num {
		case 1, 2, 3:
			if typ != protowire.BytesType {
				return fmt.Errorf("field %d has wire type %d, want bytes", num, typ)
			}
		default:
			return nil // unknown fields are skipped, as protobuf does
		}
		switch num {
		case 1:
			keys = append(keys, string(v))
		case 2:
			hashKeys = append(hashKeys, string(v))
		case 3:
			var r raw
			if err := fields(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
				switch num {
				case 1, 2:
					if typ != protowire.VarintType {
						return fmt.Errorf("record field %d has wire type %d, want varint", num, typ)
					}
					n, _ := protowire.ConsumeVarint(v)
					if num == 1 {
						r.pk, r.hasPK = n, true
					} else {
						r.ehk, r.hasE = n, true
					}
				case 3:
					if typ != protowire.BytesType {
						return fmt.Errorf("record field 3 has wire type %d, want bytes", typ)
					}
					r.data, r.hasData = v, true
				case 4:
					if typ != protowire.BytesType {
						return fmt.Errorf("record field 4 has wire type %d, want bytes", typ)
					}
				}
				return nil
			}); err != nil {
				return fmt.Errorf("record %d: %w", len(recs), err)
			}
			recs = append(recs, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kpl: decode aggregate: %w", err)
	}
	out := make([]Record, len(recs))
	for i, r := range recs {
		if !r.hasPK || !r.hasData {
			return nil, fmt.Errorf("kpl: decode aggregate: record %d lacks its partition_key_index or data", i)
		}
		if r.pk >= uint64(len(keys)) {
			return nil, fmt.Errorf("kpl: decode aggregate: record %d: partition_key_index %d out of range (%d keys)", i, r.pk, len(keys))
		}
		out[i] = Record{PartitionKey: keys[r.pk], Data: r.data, SubSequenceNumber: int64(i)}
		if r.hasE {
			if r.ehk >= uint64(len(hashKeys)) {
				return nil, fmt.Errorf("kpl: decode aggregate: record %d: explicit_hash_key_index %d out of range (%d keys)", i, r.ehk, len(hashKeys))
			}
			out[i].ExplicitHashKey = hashKeys[r.ehk]
		}
	}
	return out, nil
}

// fields calls fn with each field of a protobuf message: its number, wire type and value (the
// varint's bytes, or the bytes field's content).
func fields(b []byte, fn func(protowire.Number, protowire.Type, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		switch typ {
		case protowire.BytesType:
			val, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return protowire.ParseError(m)
			}
			v, n = val, m
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			v = b[:n]
		}
		if err := fn(num, typ, v); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// UserRecord is one user record of a Kinesis event record, with what identifies it.
type UserRecord struct {
	Record
	// SequenceNumber is the Kinesis record's sequence number (shared by every user record of an
	// aggregate).
	SequenceNumber string
	// Aggregated is false for a record that was not an aggregate (then Record is the whole
	// record: its partition key and data, SubSequenceNumber 0).
	Aggregated bool
}

// Deaggregate returns the user records of one record of a Kinesis event: those of the aggregate
// it carries, or the record itself when it is not one. A malformed aggregate is an error.
func Deaggregate(r events.KinesisRecord) ([]UserRecord, error) {
	recs, err := Decode(r.Data)
	if errors.Is(err, ErrNotAggregated) {
		return []UserRecord{{Record: Record{PartitionKey: r.PartitionKey, Data: r.Data}, SequenceNumber: r.SequenceNumber}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("record %s: %w", r.SequenceNumber, err)
	}
	out := make([]UserRecord, len(recs))
	for i, rec := range recs {
		out[i] = UserRecord{Record: rec, SequenceNumber: r.SequenceNumber, Aggregated: true}
	}
	return out, nil
}

// Encode aggregates records into one Kinesis record's data, in the format Decode reads (each
// distinct partition key and explicit hash key once in its table; SubSequenceNumber is ignored):
// for producers without the KPL, and for tests.
func Encode(records []Record) []byte {
	var msg []byte
	keyIndex, hashIndex := map[string]uint64{}, map[string]uint64{}
	var keys, hashKeys []string
	index := func(m map[string]uint64, table *[]string, s string) uint64 {
		i, ok := m[s]
		if !ok {
			i = uint64(len(*table))
			m[s], *table = i, append(*table, s)
		}
		return i
	}
	var body []byte
	for _, r := range records {
		var rec []byte
		rec = protowire.AppendTag(rec, 1, protowire.VarintType)
		rec = protowire.AppendVarint(rec, index(keyIndex, &keys, r.PartitionKey))
		if r.ExplicitHashKey != "" {
			rec = protowire.AppendTag(rec, 2, protowire.VarintType)
			rec = protowire.AppendVarint(rec, index(hashIndex, &hashKeys, r.ExplicitHashKey))
		}
		rec = protowire.AppendTag(rec, 3, protowire.BytesType)
		rec = protowire.AppendBytes(rec, r.Data)
		body = protowire.AppendTag(body, 3, protowire.BytesType)
		body = protowire.AppendBytes(body, rec)
	}
	for _, k := range keys {
		msg = protowire.AppendTag(msg, 1, protowire.BytesType)
		msg = protowire.AppendString(msg, k)
	}
	for _, k := range hashKeys {
		msg = protowire.AppendTag(msg, 2, protowire.BytesType)
		msg = protowire.AppendString(msg, k)
	}
	msg = append(msg, body...)
	sum := md5.Sum(msg)
	out := append(append([]byte{}, Magic...), msg...)
	return append(out, sum[:]...)
}
