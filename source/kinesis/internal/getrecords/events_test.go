package getrecords

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/schemas"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go/eventstream"
	"github.com/aws/smithy-go/transport/http/protocol/awsjson"
)

// message is one event stream message of a scripted subscription.
func message(headers map[string]string, payload string) []byte {
	msg := eventstream.Message{Payload: []byte(payload)}
	for k, v := range headers {
		msg.Headers.Set(k, eventstream.StringValue(v))
	}
	var b bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&b, msg); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// event is a SubscribeToShardEvent message with payload, as Kinesis sends it.
func event(payload string) []byte {
	return message(map[string]string{":message-type": "event", ":event-type": "SubscribeToShardEvent", ":content-type": "application/json"}, payload)
}

func exception(kind, payload string) []byte {
	return message(map[string]string{":message-type": "exception", ":exception-type": kind, ":content-type": "application/json"}, payload)
}

// sdkEvent is ev as the SDK's protocol serializes it.
func sdkEvent(ev *types.SubscribeToShardEvent) []byte {
	var b bytes.Buffer
	if err := awsjson.New11(schemas.Kinesis_20131202).SerializeEventMessage(schemas.SubscribeToShardEventStream,
		schemas.SubscribeToShardEventStream_SubscribeToShardEvent, ev, &b); err != nil {
		panic(err)
	}
	return b.Bytes()
}

var initialResponse = message(map[string]string{":message-type": "event", ":event-type": "initial-response", ":content-type": "application/json"}, "{}")

const idleEvent = `{"ContinuationSequenceNumber":"49654","MillisBehindLatest":0,"Records":[]}`

// streamCase is one scripted subscription: its messages after the initial response, and whether
// the connection is cut after them (and after cut bytes of the next message).
type streamCase struct {
	name     string
	messages [][]byte
	cut      []byte // written before the stream is cut; nil: the stream ends cleanly
	// noInitial starts the stream with its first event (kinesis-local): the lean path is compared
	// with the SDK reading the same stream with its initial response.
	noInitial bool
	// sdk: the lean path leaves the stream to the SDK (Take's Stream is nil).
	sdk bool
	// first is sent instead of the initial response.
	first []byte
}

func streamCases() []streamCase {
	records := sdkEvent(&types.SubscribeToShardEvent{
		ContinuationSequenceNumber: aws.String("49700"), MillisBehindLatest: aws.Int64(12),
		Records: []types.Record{
			{SequenceNumber: aws.String("49690"), PartitionKey: aws.String("k"), Data: []byte("hello"), ApproximateArrivalTimestamp: aws.Time(time.Unix(1700000000, 500e6).UTC())},
			{SequenceNumber: aws.String("49691"), PartitionKey: aws.String("k2"), Data: []byte{0, 1, 2}, EncryptionType: types.EncryptionTypeKms, ApproximateArrivalTimestamp: aws.Time(time.Unix(1700000001, 0).UTC())},
		}})
	end := sdkEvent(&types.SubscribeToShardEvent{MillisBehindLatest: aws.Int64(0), Records: []types.Record{},
		ChildShards: []types.ChildShard{{ShardId: aws.String("shardId-000000000002"), ParentShards: []string{"shardId-000000000000"},
			HashKeyRange: &types.HashKeyRange{StartingHashKey: aws.String("0"), EndingHashKey: aws.String("99")}}}})
	big := sdkEvent(&types.SubscribeToShardEvent{ContinuationSequenceNumber: aws.String("49800"), MillisBehindLatest: aws.Int64(5),
		Records: []types.Record{{SequenceNumber: aws.String("49799"), PartitionKey: aws.String("k"), Data: bytes.Repeat([]byte("x"), 1<<20)}}})
	badCRC := event(idleEvent)
	badCRC[len(badCRC)-6] ^= 1 // a payload byte
	badPrelude := event(idleEvent)
	badPrelude[9] ^= 1
	withExtra := eventstream.Message{Payload: []byte(idleEvent)}
	withExtra.Headers.Set(":message-type", eventstream.StringValue("event"))
	withExtra.Headers.Set(":event-type", eventstream.StringValue("SubscribeToShardEvent"))
	withExtra.Headers.Set(":content-type", eventstream.StringValue("application/json"))
	withExtra.Headers.Set(":date", eventstream.TimestampValue(time.Unix(1700000000, 0)))
	var extra bytes.Buffer
	_ = eventstream.NewEncoder().Encode(&extra, withExtra)
	brokenInitial := bytes.Clone(initialResponse)
	brokenInitial[9] ^= 1
	withExtra.Headers.Set(":event-type", eventstream.StringValue("initial-response"))
	withExtra.Payload = []byte("{}")
	var extraInitial bytes.Buffer
	_ = eventstream.NewEncoder().Encode(&extraInitial, withExtra)
	return []streamCase{
		{name: "idle events", messages: [][]byte{event(idleEvent), event(idleEvent), event(`{"ContinuationSequenceNumber":"49655","MillisBehindLatest":0,"Records":[]}`)}},
		{name: "idle, the SDK's own encoding", messages: [][]byte{sdkEvent(&types.SubscribeToShardEvent{ContinuationSequenceNumber: aws.String("1"), MillisBehindLatest: aws.Int64(0), Records: []types.Record{}})}},
		{name: "members in another order, white space", messages: [][]byte{event(" {\n \"Records\" : [ ] , \"MillisBehindLatest\" : 3000 ,\"ContinuationSequenceNumber\":\"1\"}\n")}},
		{name: "records null, child shards null", messages: [][]byte{event(`{"ContinuationSequenceNumber":"1","MillisBehindLatest":0,"Records":null,"ChildShards":null}`)}},
		{name: "records missing", messages: [][]byte{event(`{"ContinuationSequenceNumber":"1","MillisBehindLatest":0}`)}},
		{name: "unknown members", messages: [][]byte{event(`{"Future":{"a":[1,2,{"b":null}]},"ContinuationSequenceNumber":"1","More":"x","MillisBehindLatest":0,"Records":[]}`)}},
		{name: "continuation missing", messages: [][]byte{event(`{"MillisBehindLatest":0,"Records":[]}`)}},
		{name: "millis behind missing", messages: [][]byte{event(`{"ContinuationSequenceNumber":"1","Records":[]}`)}},
		{name: "an escape in the continuation", messages: [][]byte{event(`{"ContinuationSequenceNumber":"4\u0039","MillisBehindLatest":0,"Records":[]}`)}},
		{name: "a fraction", messages: [][]byte{event(`{"ContinuationSequenceNumber":"1","MillisBehindLatest":1.5,"Records":[]}`)}},
		{name: "a member twice", messages: [][]byte{event(`{"ContinuationSequenceNumber":"1","ContinuationSequenceNumber":"2","MillisBehindLatest":0,"Records":[]}`)}},
		{name: "child shards empty", messages: [][]byte{event(`{"ContinuationSequenceNumber":"1","MillisBehindLatest":0,"Records":[],"ChildShards":[]}`)}},
		{name: "not JSON", messages: [][]byte{event(`{"ContinuationSequenceNumber":`)}},
		{name: "records", messages: [][]byte{event(idleEvent), records, event(idleEvent)}},
		{name: "a message longer than the lean reader takes", messages: [][]byte{event(idleEvent), big, event(idleEvent)}},
		{name: "the shard's end", messages: [][]byte{event(idleEvent), end}},
		{name: "another header", messages: [][]byte{extra.Bytes(), event(idleEvent)}},
		{name: "another content type", messages: [][]byte{message(map[string]string{":message-type": "event", ":event-type": "SubscribeToShardEvent", ":content-type": "text/plain"}, idleEvent)}},
		{name: "an unknown event", messages: [][]byte{message(map[string]string{":message-type": "event", ":event-type": "FutureEvent", ":content-type": "application/json"}, `{"a":1}`), event(idleEvent)}},
		{name: "an unknown message type", messages: [][]byte{event(idleEvent), message(map[string]string{":message-type": "future"}, "x")}},
		{name: "resource in use", messages: [][]byte{event(idleEvent), exception("ResourceInUseException", `{"message":"Another active subscription exists for this consumer"}`)}},
		{name: "resource not found", messages: [][]byte{exception("ResourceNotFoundException", `{"message":"gone"}`)}},
		{name: "KMS access denied", messages: [][]byte{exception("KMSAccessDeniedException", `{"message":"denied"}`)}},
		{name: "internal failure", messages: [][]byte{exception("InternalFailureException", `{"message":"oops"}`)}},
		{name: "an unknown exception", messages: [][]byte{exception("FutureException", `{"message":"?"}`)}},
		{name: "an error message", messages: [][]byte{event(idleEvent), message(map[string]string{":message-type": "error", ":error-code": "InternalError", ":error-message": "an error"}, "")}},
		{name: "a wrong checksum", messages: [][]byte{event(idleEvent), badCRC, event(idleEvent)}},
		{name: "a wrong prelude checksum", messages: [][]byte{event(idleEvent), badPrelude}},
		{name: "cut between messages", messages: [][]byte{event(idleEvent)}, cut: []byte{}},
		{name: "cut in a prelude", messages: [][]byte{event(idleEvent)}, cut: event(idleEvent)[:7]},
		{name: "cut in a message", messages: [][]byte{event(idleEvent)}, cut: event(idleEvent)[:40]},
		{name: "cut in a long message", messages: [][]byte{event(idleEvent)}, cut: big[:100000]},
		{name: "no initial response", noInitial: true, messages: [][]byte{event(idleEvent), records, event(idleEvent)}},
		{name: "no initial response, an exception first", noInitial: true, messages: [][]byte{exception("ResourceInUseException", `{"message":"in use"}`)}},
		{name: "a broken initial response", sdk: true, first: brokenInitial, messages: [][]byte{event(idleEvent)}},
		{name: "an initial response with another header", first: extraInitial.Bytes(), messages: [][]byte{event(idleEvent)}},
	}
}

// streamServer answers each SubscribeToShard with the case its ShardId names.
func streamServer(t *testing.T, h2 bool, cases []streamCase) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ ShardId string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		var i int
		var initial bool
		if _, err := fmt.Sscanf(in.ShardId, "case-%d-%t", &i, &initial); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c := cases[i]
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		w.WriteHeader(http.StatusOK)
		switch {
		case c.first != nil:
			_, _ = w.Write(c.first)
		case initial:
			_, _ = w.Write(initialResponse)
		}
		for _, m := range c.messages {
			_, _ = w.Write(m)
			w.(http.Flusher).Flush()
		}
		if c.cut != nil {
			_, _ = w.Write(c.cut)
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // the connection (HTTP/1.1) or the stream (HTTP/2) is cut
		}
	}))
	if h2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

// readout is what a subscription gave its reader.
type readout struct {
	callErr string
	events  []types.SubscribeToShardEventStream
	endErr  string // the error the stream ended with; "" for its clean end
	endType string
}

func errText(err error) (string, string) {
	if err == nil {
		return "", ""
	}
	// HTTP/2 stream IDs differ between two calls of one connection
	text := regexp.MustCompile(`stream ID \d+`).ReplaceAllString(err.Error(), "stream ID N")
	return text, fmt.Sprintf("%T", errors.Unwrap(err)) + fmt.Sprintf("/%T", err)
}

// subscribeSDK reads the subscription with the SDK's event stream.
func subscribeSDK(ctx context.Context, kin *kinesis.Client, shard string) readout {
	out, err := kin.SubscribeToShard(ctx, subscribeInput(shard))
	if err != nil {
		s, _ := errText(err)
		return readout{callErr: s}
	}
	es := out.GetStream()
	defer es.Close()
	var r readout
	for ev := range es.Events() {
		r.events = append(r.events, ev)
	}
	r.endErr, r.endType = errText(es.Err())
	return r
}

// subscribeLean reads it with Take. taken reports whether the lean path had the stream.
func subscribeLean(ctx context.Context, kin *kinesis.Client, shard string) (r readout, taken bool) {
	take := &Take{}
	out, err := kin.SubscribeToShard(ctx, subscribeInput(shard), take.Option)
	if err != nil {
		if st := take.Stream(); st != nil {
			_ = st.Close()
		}
		s, _ := errText(err)
		return readout{callErr: s}, false
	}
	st := take.Stream()
	if st == nil {
		es := out.GetStream()
		defer es.Close()
		for ev := range es.Events() {
			r.events = append(r.events, ev)
		}
		r.endErr, r.endType = errText(es.Err())
		return r, false
	}
	defer st.Close()
	if _, open := <-out.GetStream().Events(); open {
		r.callErr = "the SDK's event stream had an event"
	}
	for {
		ev, err := st.Next()
		if errors.Is(err, io.EOF) {
			return r, true
		}
		if err != nil {
			r.endErr, r.endType = errText(err)
			return r, true
		}
		r.events = append(r.events, ev)
	}
}

func subscribeInput(shard string) *kinesis.SubscribeToShardInput {
	return &kinesis.SubscribeToShardInput{ConsumerARN: aws.String("arn:aws:kinesis:eu-west-1:123456789012:stream/s/consumer/c:1"),
		ShardId: aws.String(shard), StartingPosition: &types.StartingPosition{Type: types.ShardIteratorTypeLatest}}
}

// TestEventsSameAsSDK reads scripted subscriptions through the SDK's event stream and through Take
// (the lean path: the pump reads the body itself), over HTTP/1.1 and over HTTP/2, and compares
// every event (deeply) and the error each stream ended with (its text and types): idle events in
// every shape the lean decoder takes, and everything it leaves to the SDK (records, the shard's
// end, exceptions, error messages, unknown events and messages, wrong checksums, long messages,
// cut connections). A stream without an initial response (kinesis-local) must read as the same
// stream with one does through the SDK. Each case also asserts which path read it.
//
// It runs over HTTP/2, as Kinesis serves SubscribeToShard; over HTTP/1.1 the SDK keeps the
// stream (TestEventsOverHTTP1StayWithTheSDK).
func TestEventsSameAsSDK(t *testing.T) {
	cases := streamCases()
	srv := streamServer(t, true, cases)
	var ops atomic.Int64
	kin := sdkClient(srv.URL, &ops, trusting(srv))
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			want := subscribeSDK(ctx, kin, fmt.Sprintf("case-%d-true", i))
			got, taken := subscribeLean(ctx, kin, fmt.Sprintf("case-%d-%t", i, !c.noInitial))
			if taken == c.sdk {
				t.Errorf("taken by the lean path: %t, want %t", taken, !c.sdk)
			}
			if want.callErr == "" && len(want.events) == 0 && want.endErr == "" && c.cut == nil {
				t.Fatalf("the SDK's read of the case shows nothing to compare: %+v", want)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("lean path:\n%s\nSDK:\n%s", show(got), show(want))
			}
		})
	}
}

// TestEventsOverHTTP1StayWithTheSDK: over HTTP/1.1 (an emulator on plain HTTP) Take leaves the
// stream to the SDK, whose events are the stream's.
func TestEventsOverHTTP1StayWithTheSDK(t *testing.T) {
	cases := []streamCase{{messages: [][]byte{event(idleEvent), event(idleEvent)}}}
	srv := streamServer(t, false, cases)
	var ops atomic.Int64
	kin := sdkClient(srv.URL, &ops)
	ctx := bounded(t)
	got, taken := subscribeLean(ctx, kin, "case-0-true")
	if taken {
		t.Fatal("the lean path took a stream over HTTP/1.1")
	}
	if want := subscribeSDK(ctx, kin, "case-0-true"); len(want.events) != 2 || !reflect.DeepEqual(got, want) {
		t.Fatalf("through Take:\n%s\nSDK:\n%s", show(got), show(want))
	}
}

func show(r readout) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  call error %q\n", r.callErr)
	for _, ev := range r.events {
		j := must(json.Marshal(ev))
		if len(j) > 300 {
			j = append(j[:300:300], "…"...)
		}
		fmt.Fprintf(&b, "  %T %s\n", ev, j)
	}
	fmt.Fprintf(&b, "  end %q (%s)", r.endErr, r.endType)
	return b.String()
}

func must(b []byte, _ error) []byte { return b }

// idleStream is an EventStream over n idle events.
func idleStream(n int) *EventStream {
	var b bytes.Buffer
	for range n {
		b.Write(event(idleEvent))
	}
	return &EventStream{body: io.NopCloser(&b)}
}

// TestIdleEventsWithoutTheSDK: idle events are decoded where they are read, without the SDK's
// protocol, in at most three allocations each (the event, its continuation's pointer and its
// MillisBehindLatest); the continuation's string is shared while it stays the same.
func TestIdleEventsWithoutTheSDK(t *testing.T) {
	st := idleStream(1 + 201) // AllocsPerRun runs once more than asked
	first, err := st.Next()
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := st.Next(); err != nil {
			t.Fatal(err)
		}
	})
	if st.sdk != nil {
		t.Error("an idleEvent event went to the SDK's protocol")
	}
	if allocs > 3 {
		t.Errorf("%.1f allocations per idleEvent event, want at most 3", allocs)
	}
	if _, err := st.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last event: %v, want io.EOF", err)
	}
	if c := first.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent).Value.ContinuationSequenceNumber; *c != "49654" {
		t.Fatalf("continuation %q", *c)
	}
}

// TestTakeCloseEndsNext: closing the stream from another goroutine ends a Next that waits for the
// next message (the pump renews a subscription so).
func TestTakeCloseEndsNext(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(initialResponse)
		_, _ = w.Write(event(idleEvent))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	defer close(release)
	var ops atomic.Int64
	kin := sdkClient(srv.URL, &ops, trusting(srv))
	take := &Take{}
	if _, err := kin.SubscribeToShard(bounded(t), subscribeInput("s"), take.Option); err != nil {
		t.Fatal(err)
	}
	st := take.Stream()
	if st == nil {
		t.Fatal("the lean path did not take the stream")
	}
	if _, err := st.Next(); err != nil {
		t.Fatal(err)
	}
	reading := make(chan struct{}, 1)
	st.body = readSignal{ReadCloser: st.body, reading: reading}
	done := make(chan error, 1)
	go func() {
		_, err := st.Next()
		done <- err
	}()
	<-reading // Next waits in the body's Read: the server sends nothing more
	_ = st.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Next returned an event after Close")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the waiting Next")
	}
}

// readSignal signals each Read as it starts.
type readSignal struct {
	io.ReadCloser
	reading chan<- struct{}
}

func (r readSignal) Read(p []byte) (int, error) {
	select {
	case r.reading <- struct{}{}:
	default:
	}
	return r.ReadCloser.Read(p)
}

// FuzzIdleEventSameAsSDK: any payload of a SubscribeToShardEvent message reads as the SDK's
// protocol reads it, whether the lean decoder takes it or not.
func FuzzIdleEventSameAsSDK(f *testing.F) {
	for _, c := range streamCases() {
		for _, m := range c.messages {
			if len(m) < 4096 {
				f.Add(m[preludeLen+binary32(m[4:]) : len(m)-4])
			}
		}
	}
	f.Add([]byte(`{"ContinuationSequenceNumber":"","MillisBehindLatest":0,"Records":[]}`))
	f.Add([]byte(`{"ContinuationSequenceNumber":"1","MillisBehindLatest":0123,"Records":[]}`))
	f.Add([]byte(`{"ContinuationSequenceNumber":"1","MillisBehindLatest":-1,"Records":[]}`))
	f.Add([]byte(`{"ContinuationSequenceNumber":"1","MillisBehindLatest":999999999999999999999,"Records":[]}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		msg := event(string(payload))
		st := &EventStream{body: io.NopCloser(bytes.NewReader(msg))}
		got, gotErr := st.Next()
		v, wantErr := awsjson.New11(schemas.Kinesis_20131202).DeserializeEventMessage(schemas.SubscribeToShardEventStream, kinesis.TypeRegistry, bytes.NewReader(msg))
		var want types.SubscribeToShardEventStream
		if e, ok := v.(*types.SubscribeToShardEvent); ok {
			want = &types.SubscribeToShardEventStreamMemberSubscribeToShardEvent{Value: *e}
		}
		ge, _ := errText(gotErr)
		we, _ := errText(wantErr)
		if ge != we || !reflect.DeepEqual(got, want) {
			t.Fatalf("payload %q:\nlean %#v %v\nSDK  %#v %v", payload, got, gotErr, want, wantErr)
		}
	})
}

func binary32(b []byte) int { return int(b[0])<<24 | int(b[1])<<16 | int(b[2])<<8 | int(b[3]) }
