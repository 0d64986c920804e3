package esmapi

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"time"

	"github.com/google/uuid"

	"github.com/kinesis-esm/esm/poller"
)

// esm's operator routes, an extension of Lambda's API (Lambda has no such operation). Each acts
// on one mapping: under the mapping, POST /2015-03-31/event-source-mappings/{UUID}/esm/{tool},
// signed and authorised as every other route of esm serve; and on a worker's own --metrics-addr
// (esm run, one mapping per process), POST /esm/{tool}, taken from loopback peers only. Bodies and
// answers are JSON with Lambda's capitalised field names; errors are Lambda's error shapes.

// SkipTool is the name of the skip route's last segment.
const SkipTool = "skip"

// WorkerSkipPath is the skip route on a worker's --metrics-addr.
const WorkerSkipPath = "/esm/" + SkipTool

// SkipPath is the skip route of the mapping uuid on esm serve's API.
func SkipPath(uuid string) string { return mappingsPath + "/" + uuid + "/esm/" + SkipTool }

// SkipInput is the body of a skip: the shard whose blocked batch goes to the on-failure
// destination, and optionally the batch's first and last sequence numbers as the operator saw
// them (a skip then never skips another batch).
type SkipInput struct {
	ShardId             string `json:"ShardId"`
	FirstSequenceNumber string `json:"FirstSequenceNumber,omitempty"`
	LastSequenceNumber  string `json:"LastSequenceNumber,omitempty"`
}

// SkipOutput is the answer to a skip that happened.
type SkipOutput struct {
	ShardId             string `json:"ShardId"`
	FirstSequenceNumber string `json:"FirstSequenceNumber"`
	LastSequenceNumber  string `json:"LastSequenceNumber"`
	Records             int    `json:"Records"`
	FailedAttempts      int    `json:"FailedAttempts"`
	// Destination is the on-failure destination the batch's failure record went to; "" when the
	// mapping has none and the records were dropped.
	Destination string `json:"Destination"`
	SkippedAt   string `json:"SkippedAt"` // RFC 3339, milliseconds
}

// Kinesis's patterns for a shard id and a sequence number.
var (
	shardIDPattern  = regexp.MustCompile(`^[a-zA-Z0-9_.\-]{1,128}$`)
	sequencePattern = regexp.MustCompile(`^(0|[1-9][0-9]{0,128})$`)
)

// Validate checks the fields as Kinesis constrains them.
func (in SkipInput) Validate() *APIError {
	switch {
	case in.ShardId == "":
		return invalidParameter("ShardId is required: the shard whose blocked batch to skip (esm status lists the blocked shards).")
	case !shardIDPattern.MatchString(in.ShardId):
		return invalidParameter("ShardId %q is not a shard id: 1 to 128 letters, digits, '_', '.' or '-', such as shardId-000000000000.", in.ShardId)
	}
	for _, f := range []struct{ name, v string }{{"FirstSequenceNumber", in.FirstSequenceNumber}, {"LastSequenceNumber", in.LastSequenceNumber}} {
		if f.v != "" && !sequencePattern.MatchString(f.v) {
			return invalidParameter("%s %q is not a sequence number: up to 129 decimal digits, as esm status shows a blocked batch's.", f.name, f.v)
		}
	}
	return nil
}

// skipTimeout bounds how long a skip request waits for the batch to take its order: the
// invocation in flight, if any, ends first.
const skipTimeout = 2 * time.Minute

// SkipFunc asks the fleet running mapping uuid to skip q's batch, asked by by (esm serve with
// a lease table: lease.AskSkip on the mapping's own table, whose worker holding the shard does
// it); the owner may take it up until deadline, ctx bounds the wait for its answer.
type SkipFunc func(ctx context.Context, uuid string, q poller.SkipRequest, by string, deadline time.Time) (poller.Skipped, error)

// WithTableSkips lets a skip of a shard this replica does not read reach the worker that does,
// through the mapping's lease table (default: such a skip is answered 404).
func WithTableSkips(fn SkipFunc) Option { return func(o *options) { o.tableSkip = fn } }

// skipOwnerMargin is how long before the request's own end the owner must have taken a skip up
// through the table: the rest is for the skip to complete and its answer to be read.
const skipOwnerMargin = 30 * time.Second

// serveMappingSkip is the skip route of mapping id: done here when this replica reads the shard,
// else, with WithTableSkips, by the worker that does.
func (m *Manager) serveMappingSkip(ctx context.Context, w http.ResponseWriter, r *http.Request, reqID, id string, body []byte) {
	skips, e := m.skipsOf(id)
	if e != nil {
		writeError(w, reqID, e)
		return
	}
	remote := m.o.tableSkip
	if remote == nil {
		serveSkip(ctx, w, reqID, skips, body)
		return
	}
	by := askedBy(r)
	doSkip(ctx, w, reqID, body, func(ctx context.Context, q poller.SkipRequest) (poller.Skipped, error) {
		if skips != nil {
			res, err := skips.Skip(ctx, q)
			if !errors.Is(err, poller.ErrSkipNotHere) {
				return res, err
			}
		}
		dl, _ := ctx.Deadline()
		return remote(ctx, id, q, by, dl.Add(-skipOwnerMargin))
	})
}

// serveSkip skips with skips what body names and answers; skips nil: the mapping does not run
// here.
func serveSkip(ctx context.Context, w http.ResponseWriter, reqID string, skips *poller.Skips, body []byte) {
	if skips == nil {
		doSkip(ctx, w, reqID, body, nil)
		return
	}
	doSkip(ctx, w, reqID, body, skips.Skip)
}

// doSkip skips what body names with skip and answers; skip nil: the mapping does not run here.
func doSkip(ctx context.Context, w http.ResponseWriter, reqID string, body []byte, skip func(context.Context, poller.SkipRequest) (poller.Skipped, error)) {
	var in SkipInput
	if e := decodeBody(body, &in); e != nil {
		writeError(w, reqID, e)
		return
	}
	if e := in.Validate(); e != nil {
		writeError(w, reqID, e)
		return
	}
	if skip == nil {
		writeError(w, reqID, &APIError{Status: http.StatusConflict, Type: ResourceConflict,
			Message: "The event source mapping is not running here (disabled, starting, or stopped): nothing to skip."})
		return
	}
	answerWithin(w, skipTimeout)
	ctx, cancel := context.WithTimeout(ctx, skipTimeout)
	defer cancel()
	res, err := skip(ctx, poller.SkipRequest{ShardID: in.ShardId, First: in.FirstSequenceNumber, Last: in.LastSequenceNumber})
	if err != nil {
		writeError(w, reqID, skipError(err))
		return
	}
	reply(w, reqID, http.StatusOK, SkipOutput{ShardId: res.ShardID, FirstSequenceNumber: res.First, LastSequenceNumber: res.Last,
		Records: res.Records, FailedAttempts: res.Attempts, Destination: res.Destination,
		SkippedAt: res.At.UTC().Format("2006-01-02T15:04:05.000Z07:00")}, nil)
}

// skipError is the API's answer to a refused or failed skip: the request's fault (400, 409)
// apart from the engine's (500); a shard another worker reads is 404, so that a client asking
// every worker knows to ask the next.
func skipError(err error) *APIError {
	switch {
	case errors.Is(err, poller.ErrSkipUnknownShard):
		return invalidParameter("%s", err.Error())
	case errors.Is(err, poller.ErrSkipNotHere):
		return &APIError{Status: http.StatusNotFound, Type: ResourceNotFound, Message: err.Error()}
	case errors.Is(err, poller.ErrSkipNotBlocked), errors.Is(err, poller.ErrSkipBatchChanged), errors.Is(err, poller.ErrSkipAmbiguous):
		return &APIError{Status: http.StatusConflict, Type: ResourceConflict, Message: err.Error()}
	}
	return &APIError{Status: http.StatusInternalServerError, Type: ServiceError, Message: err.Error()}
}

// WorkerSkipHandler serves WorkerSkipPath for a worker whose mapping's skips are skips: only to
// loopback peers, and only JSON bodies (a page in a browser cannot post one without asking).
func WorkerSkipHandler(skips *poller.Skips) http.Handler {
	return workerRoute(func(r *http.Request, w http.ResponseWriter, reqID string, body []byte) {
		serveSkip(r.Context(), w, reqID, skips, body)
	})
}

// workerRoute serves one of esm's operator routes on a worker's --metrics-addr: to loopback
// peers only, a POSTed JSON body handed to serve.
func workerRoute(serve func(r *http.Request, w http.ResponseWriter, reqID string, body []byte)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqID := uuid.NewString()
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err != nil || !net.ParseIP(host).IsLoopback() {
			writeError(w, reqID, &APIError{Status: http.StatusForbidden, Type: "AccessDeniedException",
				Message: "esm's operator routes on --metrics-addr answer loopback clients only: run esm on the worker's host, or use esm serve's signed API."})
			return
		}
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			writeError(w, reqID, &APIError{Status: http.StatusBadRequest, Type: InvalidParameterValue, Message: "POST a JSON body (Content-Type: application/json)."})
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			writeError(w, reqID, tooLarge())
			return
		}
		serve(r, w, reqID, body)
	})
}

// skipsOf is where the skips of mapping id go: nil while no poller of it runs here.
func (m *Manager) skipsOf(id string) (*poller.Skips, *APIError) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.maps[id]
	if !ok {
		return nil, notFound()
	}
	if e.run == nil {
		return nil, nil
	}
	return e.skips, nil
}
