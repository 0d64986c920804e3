package kpl

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// golden is an aggregate written out byte by byte from the published format (not by Encode):
// partition keys "pk1" and "pk2", explicit hash key "123", and three user records: "hello" (pk1),
// "world" (pk2, hash key 0, one tag "k"="v"), "" (pk1).
func golden(t *testing.T) []byte {
	t.Helper()
	msg := []byte{
		0x0a, 0x03, 'p', 'k', '1', // field 1 (partition_key_table), length 3
		0x0a, 0x03, 'p', 'k', '2',
		0x12, 0x03, '1', '2', '3', // field 2 (explicit_hash_key_table)
		// field 3 (records), length 9: partition_key_index 0, data "hello"
		0x1a, 0x09, 0x08, 0x00, 0x1a, 0x05, 'h', 'e', 'l', 'l', 'o',
		// record: partition_key_index 1, explicit_hash_key_index 0, data "world", tag {k, v}
		0x1a, 0x13, 0x08, 0x01, 0x10, 0x00, 0x1a, 0x05, 'w', 'o', 'r', 'l', 'd',
		0x22, 0x06, 0x0a, 0x01, 'k', 0x12, 0x01, 'v',
		// record: partition_key_index 0, empty data
		0x1a, 0x04, 0x08, 0x00, 0x1a, 0x00,
	}
	sum := md5.Sum(msg)
	return append(append([]byte{0xF3, 0x89, 0x9A, 0xC2}, msg...), sum[:]...)
}

func TestDecodeGolden(t *testing.T) {
	data := golden(t)
	if !IsAggregated(data) {
		t.Fatal("golden aggregate not recognised")
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	want := []Record{
		{PartitionKey: "pk1", Data: []byte("hello"), SubSequenceNumber: 0},
		{PartitionKey: "pk2", ExplicitHashKey: "123", Data: []byte("world"), SubSequenceNumber: 1},
		{PartitionKey: "pk1", Data: []byte{}, SubSequenceNumber: 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", got, want)
	}
	// Encode writes the same records the same way (it writes no tags).
	re := Encode(want)
	back, err := Decode(re)
	if err != nil || !reflect.DeepEqual(back, want) {
		t.Fatalf("Encode round trip: %+v, %v\n%s", back, err, hex.Dump(re))
	}
}

func TestDecodeRejects(t *testing.T) {
	good := golden(t)
	flipped := append([]byte{}, good...)
	flipped[len(flipped)-1] ^= 1 // digest no longer matches
	for _, tt := range []struct {
		name string
		data []byte
	}{{"plain data", []byte("hello")}, {"magic only", []byte{0xF3, 0x89, 0x9A, 0xC2}}, {"bad digest", flipped}} {
		if _, err := Decode(tt.data); !errors.Is(err, ErrNotAggregated) {
			t.Errorf("%s: %v, want ErrNotAggregated", tt.name, err)
		}
	}
	// A matching digest over a malformed message: index out of range, missing data, bad wire.
	for _, msg := range [][]byte{
		{0x0a, 0x01, 'a', 0x1a, 0x04, 0x08, 0x05, 0x1a, 0x00}, // partition_key_index 5 of 1
		{0x0a, 0x01, 'a', 0x1a, 0x02, 0x08, 0x00},             // no data
		{0x0a, 0x01, 'a', 0x1a, 0x04, 0x08, 0x00, 0x10, 0x00}, // hash key index 0 of none, no data
		{0x0a, 0x05, 'a'}, // truncated
		{0x08, 0x01},      // partition_key_table as a varint
	} {
		sum := md5.Sum(msg)
		data := append(append(append([]byte{}, Magic...), msg...), sum[:]...)
		if _, err := Decode(data); err == nil || errors.Is(err, ErrNotAggregated) {
			t.Errorf("% x: %v, want a decode error", msg, err)
		}
	}
}

func TestDeaggregate(t *testing.T) {
	got, err := Deaggregate(events.KinesisRecord{PartitionKey: "pk1", SequenceNumber: "49", Data: golden(t)})
	if err != nil || len(got) != 3 || !got[2].Aggregated || got[2].SequenceNumber != "49" || got[2].SubSequenceNumber != 2 {
		t.Fatalf("%+v, %v", got, err)
	}
	plain, err := Deaggregate(events.KinesisRecord{PartitionKey: "k", SequenceNumber: "50", Data: []byte("x")})
	want := []UserRecord{{Record: Record{PartitionKey: "k", Data: []byte("x")}, SequenceNumber: "50"}}
	if err != nil || !reflect.DeepEqual(plain, want) {
		t.Fatalf("plain record: %+v, %v", plain, err)
	}
}

// FuzzDecode: Decode never panics; whatever it accepts, Encode writes again to the same records.
func FuzzDecode(f *testing.F) {
	f.Add(golden(&testing.T{}))
	f.Add(Encode([]Record{{PartitionKey: "a", Data: []byte("x")}, {PartitionKey: "b", ExplicitHashKey: "7", Data: nil}}))
	f.Add([]byte("plain"))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := Decode(data)
		if err != nil {
			return
		}
		back, err := Decode(Encode(recs))
		if err != nil {
			t.Fatalf("re-encoded aggregate does not decode: %v", err)
		}
		if len(back) != len(recs) {
			t.Fatalf("%d records, %d after re-encoding", len(recs), len(back))
		}
		for i := range recs {
			if back[i].PartitionKey != recs[i].PartitionKey || back[i].ExplicitHashKey != recs[i].ExplicitHashKey || !bytes.Equal(back[i].Data, recs[i].Data) {
				t.Fatalf("record %d: %+v, %+v after re-encoding", i, recs[i], back[i])
			}
		}
	})
}
