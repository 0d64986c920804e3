package esmapi

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// API paths (the 2015-03-31 mappings API and the 2017-03-31 tags API).
const (
	mappingsPath = "/2015-03-31/event-source-mappings"
	tagsPath     = "/2017-03-31/tags/"
)

// Handler answers Lambda's event source mapping REST API.
func (m *Manager) Handler() http.Handler {
	return http.HandlerFunc(m.serveHTTP)
}

func (m *Manager) serveHTTP(w http.ResponseWriter, r *http.Request) {
	reqID := uuid.NewString()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, reqID, tooLarge())
		return
	}
	path := r.URL.Path
	switch {
	case path == mappingsPath || path == mappingsPath+"/":
		switch r.Method {
		case http.MethodPost:
			v, e := m.Create(r.Context(), body)
			reply(w, reqID, http.StatusAccepted, v, e)
		case http.MethodGet:
			in, e := listInput(r)
			if e != nil {
				writeError(w, reqID, e)
				return
			}
			list, next, e := m.List(in)
			out := struct {
				EventSourceMappings []EventSourceMapping `json:"EventSourceMappings"`
				NextMarker          string               `json:"NextMarker,omitempty"`
			}{list, next}
			reply(w, reqID, http.StatusOK, out, e)
		default:
			unknownOperation(w, reqID)
		}
	case strings.HasPrefix(path, mappingsPath+"/") && strings.HasSuffix(path, "/esm/"+SkipTool):
		id := strings.TrimSuffix(path[len(mappingsPath)+1:], "/esm/"+SkipTool)
		if r.Method != http.MethodPost || strings.Contains(id, "/") {
			unknownOperation(w, reqID)
			return
		}
		m.serveMappingSkip(r.Context(), w, r, reqID, id, body)
	case strings.HasPrefix(path, mappingsPath+"/") && strings.HasSuffix(path, "/esm/"+RewindTool):
		id := strings.TrimSuffix(path[len(mappingsPath)+1:], "/esm/"+RewindTool)
		if r.Method != http.MethodPost || strings.Contains(id, "/") {
			unknownOperation(w, reqID)
			return
		}
		m.serveRewind(r.Context(), w, r, reqID, id, body)
	case strings.HasPrefix(path, mappingsPath+"/") && !strings.Contains(path[len(mappingsPath)+1:], "/"):
		id := path[len(mappingsPath)+1:]
		switch r.Method {
		case http.MethodGet:
			v, e := m.Get(id)
			reply(w, reqID, http.StatusOK, v, e)
		case http.MethodPut:
			v, e := m.Update(r.Context(), id, body)
			reply(w, reqID, http.StatusAccepted, v, e)
		case http.MethodDelete:
			v, e := m.Delete(r.Context(), id)
			reply(w, reqID, http.StatusAccepted, v, e)
		default:
			unknownOperation(w, reqID)
		}
	case strings.HasPrefix(path, tagsPath) && len(path) > len(tagsPath):
		m.serveTags(w, r, reqID, path[len(tagsPath):], body)
	default:
		unknownOperation(w, reqID)
	}
}

func (m *Manager) serveTags(w http.ResponseWriter, r *http.Request, reqID, arn string, body []byte) {
	switch r.Method {
	case http.MethodGet:
		tags, e := m.Tags(arn)
		reply(w, reqID, http.StatusOK, struct {
			Tags map[string]string `json:"Tags"`
		}{tags}, e)
	case http.MethodPost:
		var in struct {
			Tags map[string]string `json:"Tags"`
		}
		if e := decodeBody(body, &in); e != nil {
			writeError(w, reqID, e)
			return
		}
		if in.Tags == nil {
			writeError(w, reqID, nullError("tags"))
			return
		}
		reply(w, reqID, http.StatusNoContent, nil, m.SetTags(r.Context(), arn, in.Tags, nil))
	case http.MethodDelete:
		keys := r.URL.Query()["tagKeys"]
		if len(keys) == 0 {
			writeError(w, reqID, nullError("tagKeys"))
			return
		}
		reply(w, reqID, http.StatusNoContent, nil, m.SetTags(r.Context(), arn, nil, keys))
	default:
		unknownOperation(w, reqID)
	}
}

func unknownOperation(w http.ResponseWriter, reqID string) {
	writeError(w, reqID, &APIError{Status: http.StatusNotFound, Type: UnknownOperation, Message: "esm serves Lambda's event source mapping API only"})
}

// reply writes v with status, or the error e.
func reply(w http.ResponseWriter, reqID string, status int, v any, e *APIError) {
	if e != nil {
		writeError(w, reqID, e)
		return
	}
	h := w.Header()
	h["x-amzn-RequestId"] = []string{reqID}
	if v == nil {
		w.WriteHeader(status)
		return
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func listInput(r *http.Request) (ListInput, *APIError) {
	q := r.URL.Query()
	in := ListInput{EventSourceArn: q.Get("EventSourceArn"), FunctionName: q.Get("FunctionName"), Marker: q.Get("Marker")}
	if s := q.Get("MaxItems"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return in, &APIError{Status: http.StatusBadRequest, Type: Serialization, Message: "MaxItems " + strconv.Quote(s) + " is not an integer"}
		}
		if n == 0 { // explicit 0 is out of range, not the default
			return in, validation("1 validation error detected: Value '0' at 'maxItems' failed to satisfy constraint: Member must have value greater than or equal to 1")
		}
		in.MaxItems = n
	}
	return in, nil
}

// cursor is a position in ListEventSourceMappings' order: creation time, then UUID. It stays
// valid when the mapping it names is deleted.
type cursor struct {
	created time.Time
	uuid    string
}

func cursorOf(e *entry) cursor { return cursor{e.rec.Created, e.rec.Mapping.UUID} }

func (c cursor) compare(d cursor) int {
	return cmp.Or(c.created.Compare(d.created), strings.Compare(c.uuid, d.uuid))
}

func (c cursor) before(d cursor) bool { return c.compare(d) < 0 }

func (c cursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.created.UnixNano(), 10) + ":" + c.uuid))
}

func parseCursor(s string) (cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, err
	}
	ns, id, ok := strings.Cut(string(b), ":")
	if !ok {
		return cursor{}, errors.New("no separator")
	}
	n, err := strconv.ParseInt(ns, 10, 64)
	if err != nil {
		return cursor{}, err
	}
	return cursor{time.Unix(0, n), id}, nil
}
