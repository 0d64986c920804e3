package esmapi

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/runner"
)

// RewindTool is the name of the rewind route's last segment (esm's operator routes: skip.go).
const RewindTool = "rewind"

// WorkerRewindPath is the rewind route on the --metrics-addr of esm run with a state directory
// (no lease table): the worker applies the rewind to its own store.
const WorkerRewindPath = "/esm/" + RewindTool

// WorkerRewindHandler serves WorkerRewindPath for a mapping whose rewinds are rewinds (loopback
// peers only, as WorkerSkipHandler).
func WorkerRewindHandler(rewinds *runner.LocalRewinds) http.Handler {
	return workerRoute(func(r *http.Request, w http.ResponseWriter, reqID string, body []byte) {
		serveRewindWith(r.Context(), w, r, reqID, body, func(ctx context.Context, q poller.RewindRequest, by string) (runner.RewindOutcome, error) {
			return rewinds.Rewind(ctx, q, by)
		})
	})
}

// RewindPath is the rewind route of the mapping uuid on esm serve's API.
func RewindPath(uuid string) string { return mappingsPath + "/" + uuid + "/esm/" + RewindTool }

// rewindTimeout bounds a rewind asked through the route (lease.Rewind waits 2 minutes at most
// for the workers to stop, then writes the leases); its answer is written within it.
const rewindTimeout = 4 * time.Minute

// RewindInput is the body of a rewind, as esm rewind's flags: ToTimestamp (move to the first
// record at or after it), or a window From..Until replayed, or SequenceNumbers (shard to
// sequence number); Shards limits a time's rewind to those shards (default every shard). Times
// are RFC 3339.
type RewindInput struct {
	Shards          []string          `json:"Shards,omitempty"`
	ToTimestamp     string            `json:"ToTimestamp,omitempty"`
	From            string            `json:"From,omitempty"`
	Until           string            `json:"Until,omitempty"`
	SequenceNumbers map[string]string `json:"SequenceNumbers,omitempty"`
}

// RewindOutput is the answer to a rewind applied.
type RewindOutput struct {
	Revision int64 `json:"Revision"`
	// Rewound are the shards moved, Reset their descendants, which wait for them again.
	Rewound []string `json:"Rewound"`
	Reset   []string `json:"Reset"`
	// Completed: a rewind found half applied (its asker gone) was completed instead.
	Completed          bool  `json:"Completed,omitempty"`
	StoppedAfterMillis int64 `json:"StoppedAfterMillis"`
	// Trimmed says which records of the rewind's time are gone (older than the retention).
	Trimmed string `json:"Trimmed,omitempty"`
}

// RewindFunc applies q to the mapping uuid of stream streamARN, asked by by: esm serve with a
// lease table calls runner.Rewind on the mapping's own table.
type RewindFunc func(ctx context.Context, uuid, streamARN string, q poller.RewindRequest, by string) (runner.RewindOutcome, error)

// WithRewinds gives esm's rewind route the rewinds of mappings whose progress is on lease
// tables. Without it each running mapping applies the rewinds itself, to the store of this
// process that keeps its progress (runner.LocalRewinds, as esm run on a state directory).
func WithRewinds(fn RewindFunc) Option { return func(o *options) { o.rewind = fn } }

// request is the rewind in asks for; the problems of its form are the request's fault, worded
// as esm rewind words its flags'.
func (in RewindInput) request() (poller.RewindRequest, *APIError) {
	q := poller.RewindRequest{Shards: in.Shards, Sequences: in.SequenceNumbers}
	at := func(field, s string) (time.Time, *APIError) {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return t, invalidParameter("%s %q: give an RFC 3339 time (2026-12-07T19:00:00Z)", field, s)
		}
		return t, nil
	}
	var e *APIError
	switch {
	case in.ToTimestamp != "" && (in.From != "" || in.Until != ""):
		return q, invalidParameter("ToTimestamp moves the position; From/Until replay a window: give one of them")
	case (in.From == "") != (in.Until == ""):
		return q, invalidParameter("a window needs both From and Until")
	case len(in.SequenceNumbers) > 0 && len(in.Shards) > 0:
		return q, invalidParameter("SequenceNumbers names its shards: leave Shards out")
	case in.ToTimestamp != "":
		q.Timestamp, e = at("ToTimestamp", in.ToTimestamp)
	case in.From != "":
		if q.Timestamp, e = at("From", in.From); e == nil {
			q.Until, e = at("Until", in.Until)
		}
	}
	return q, e
}

// rewindOf is the mapping id's stream, and how to rewind it here.
func (m *Manager) rewindOf(id string) (string, RewindFunc, *APIError) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.maps[id]
	if !ok {
		return "", nil, notFound()
	}
	if m.o.rewind != nil {
		return e.rec.Mapping.EventSourceArn, m.o.rewind, nil
	}
	// Progress in this process's state directory: the running mapping applies the rewind itself,
	// as esm run on a state directory does (runner.LocalRewinds).
	if e.run == nil || e.rewinds == nil {
		return "", nil, &APIError{Status: http.StatusConflict, Type: ResourceConflict,
			Message: "The event source mapping is not running here (disabled, starting, or stopped): nothing to rewind. Enable it first; it keeps its progress in this esm serve's state directory, which only its running poller rewinds."}
	}
	local := e.rewinds
	return e.rec.Mapping.EventSourceArn, func(ctx context.Context, _, _ string, q poller.RewindRequest, by string) (runner.RewindOutcome, error) {
		return local.Rewind(ctx, q, by)
	}, nil
}

// serveRewind applies the rewind body asks of mapping id and answers.
func (m *Manager) serveRewind(ctx context.Context, w http.ResponseWriter, r *http.Request, reqID, id string, body []byte) {
	serveRewindWith(ctx, w, r, reqID, body, func(ctx context.Context, q poller.RewindRequest, by string) (runner.RewindOutcome, error) {
		arn, rewind, e := m.rewindOf(id)
		if e != nil {
			return runner.RewindOutcome{}, e
		}
		return rewind(ctx, id, arn, q, by)
	})
}

// serveRewindWith applies the rewind body asks with apply and answers.
func serveRewindWith(ctx context.Context, w http.ResponseWriter, r *http.Request, reqID string, body []byte,
	apply func(ctx context.Context, q poller.RewindRequest, by string) (runner.RewindOutcome, error)) {
	var in RewindInput
	if e := decodeBody(body, &in); e != nil {
		writeError(w, reqID, e)
		return
	}
	q, e := in.request()
	if e != nil {
		writeError(w, reqID, e)
		return
	}
	answerWithin(w, rewindTimeout)
	ctx, cancel := context.WithTimeout(ctx, rewindTimeout)
	defer cancel()
	res, err := apply(ctx, q, askedBy(r))
	if err != nil {
		writeError(w, reqID, rewindError(err))
		return
	}
	reply(w, reqID, http.StatusOK, RewindOutput{Revision: res.Revision, Rewound: res.Rewound, Reset: res.Reset, Completed: res.Completed,
		StoppedAfterMillis: res.Stopped.Milliseconds(), Trimmed: res.Trimmed}, nil)
}

// askedBy names who asked for an operator's request through the API, for the logs.
func askedBy(r *http.Request) string {
	by := "esm serve API"
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		by += " client " + host
	}
	return by
}

// rewindError is the API's answer to a rewind refused or failed: the request's fault (what esm
// rewind exits 2 for) is InvalidParameterValueException with the same text; a rewind refused
// with nothing changed is a conflict; the rest is the engine's.
func rewindError(err error) *APIError {
	var v *poller.ValidationError
	var ae *APIError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &v):
		return invalidParameter("%s", v.Message)
	case errors.Is(err, lease.ErrRewindRefused):
		return &APIError{Status: http.StatusConflict, Type: ResourceConflict, Message: err.Error()}
	}
	return &APIError{Status: http.StatusInternalServerError, Type: ServiceError, Message: err.Error()}
}

// answerWithin lets a long operator request (a rewind waits for the fleet to stop, a skip for
// the invocation in flight) answer past the server's write timeout, within d and a margin: its
// answer, a refusal included, then reaches the client instead of a closed connection.
func answerWithin(w http.ResponseWriter, d time.Duration) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d + 10*time.Second)) // unsupported: the server's stands
}
