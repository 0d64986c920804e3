package httpinvoke

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/kinesis-esm/esm/invoke"
)

// Headers of Lambda's Invoke API.
const (
	headerFunctionError   = "X-Amz-Function-Error"
	headerExecutedVersion = "X-Amz-Executed-Version"
	headerRequestID       = "X-Amzn-RequestId"
)

// outcomeKind is what an invocation attempt amounted to.
type outcomeKind int

const (
	kindSuccess       outcomeKind = iota + 1 // the function ran and returned
	kindFunctionError                        // the function ran and failed
	kindThrottled                            // not invoked: 429
	kindUnavailable                          // not invoked: anything else
	kindAmbiguous                            // sent, then no answer: it may have run, may still run
)

func (k outcomeKind) String() string {
	switch k {
	case kindSuccess:
		return "success"
	case kindFunctionError:
		return "function error"
	case kindThrottled:
		return "throttled"
	case kindUnavailable:
		return "unavailable"
	case kindAmbiguous:
		return "ambiguous"
	}
	return fmt.Sprintf("outcomeKind(%d)", int(k))
}

// outcome is the classification of one attempt.
type outcome struct {
	kind outcomeKind
	// retry: the function was not reached and another attempt on the same endpoint right away
	// may succeed (a transport error, a 5xx).
	retry bool
	// resp is the result for kindSuccess and kindFunctionError.
	resp invoke.Response
	// reason says what the endpoint answered, for kindThrottled and kindUnavailable.
	reason string
	// busy: the attempt was sent and got no answer, so the endpoint may still be running the
	// invocation; sending it another now would overlap (and crash aws-lambda-rie).
	busy bool
	// err is the transport error, classified, for kindUnavailable and kindAmbiguous without an
	// answer.
	err error
}

// result turns the outcome into Invoke's return values.
func (o outcome) result(ep fmt.Stringer) (invoke.Response, error) {
	switch o.kind {
	case kindSuccess, kindFunctionError:
		return o.resp, nil
	case kindThrottled:
		return invoke.Response{}, fmt.Errorf("%w: %s: %s", invoke.ErrThrottled, ep, o.reason)
	}
	if o.err != nil {
		return invoke.Response{}, fmt.Errorf("%s: %w", ep, o.err)
	}
	return invoke.Response{}, fmt.Errorf("%w: %s: %s", invoke.ErrUnavailable, ep, o.reason)
}

// timedOutText is aws-lambda-rie's plain-text answer to an invocation that passed the function
// timeout (Lambda itself answers with a Sandbox.Timedout error document).
var timedOutText = regexp.MustCompile(`^Task timed out after ([0-9]+(?:\.[0-9]+)?) seconds$`)

// errorDocumentKeys are the keys Lambda's runtimes put in a function error's JSON document: Go,
// Python, Ruby (errorMessage, errorType, stackTrace, requestId), Node.js (trace), Java (cause).
var errorDocumentKeys = map[string]bool{
	"errorMessage": true, "errorType": true, "stackTrace": true, "trace": true, "requestId": true, "cause": true,
}

// classifyHTTP classifies one HTTP attempt at invoking a function, sent with request ID reqID.
// It is the only place that decides; the rules, in order:
//
//  1. a transport error (a.err, classified by invoke.SendTrace): before the request was written,
//     not invoked and retried; after it (a reset, an EOF, a timeout), ambiguous: the endpoint may
//     still be running the invocation, so it is not retried and the endpoint is marked busy;
//  2. a function error: the X-Amz-Function-Error header (Lambda), a plain "Task timed out after
//     N seconds" body (aws-lambda-rie's timeout, rewritten into Lambda's Sandbox.Timedout
//     document), or an error document ({"errorType", "errorMessage", ...}) with status 2xx (the
//     handler returned an error) or 502 (the runtime crashed or panicked, and aws-lambda-rie
//     restarts it on the next invoke). Never retried;
//  3. 429: throttled, not retried here;
//  4. 2xx: success, unless the body passes Lambda's 6 MB response limit (a function error, as on
//     Lambda);
//  5. any other 5xx: not invoked, retried;
//  6. anything else (4xx, 3xx): not invoked, and retrying at once would not help.
//
// A body that merely looks like an error document counts as one: an endpoint that does not send
// X-Amz-Function-Error (aws-lambda-rie) leaves no other way to tell.
func classifyHTTP(reqID string, a attempt) outcome {
	if a.err != nil {
		if errors.Is(a.err, invoke.ErrAmbiguous) {
			return outcome{kind: kindAmbiguous, busy: true, reason: a.err.Error(), err: a.err}
		}
		return outcome{kind: kindUnavailable, retry: true, reason: a.err.Error(), err: a.err}
	}
	resp := invoke.Response{
		StatusCode:      http.StatusOK, // what Lambda's Invoke API answers for anything the function did
		ExecutedVersion: invoke.ExecutedVersionLatest,
		Payload:         a.body,
		RequestID:       reqID,
	}
	if v := a.header.Get(headerExecutedVersion); v != "" {
		resp.ExecutedVersion = v
	}
	if v := a.header.Get(headerRequestID); v != "" {
		resp.RequestID = v
	}
	success := a.status >= 200 && a.status < 300

	if m := timedOutText.FindSubmatch(bytes.TrimSpace(a.body)); m != nil {
		t := invoke.TimedOutAfter(resp.RequestID, string(m[1]))
		resp.FunctionError, resp.Payload = t.FunctionError, t.Payload
		return outcome{kind: kindFunctionError, resp: resp}
	}
	if a.header.Get(headerFunctionError) != "" ||
		((success || a.status == http.StatusBadGateway) && isErrorDocument(a.body)) {
		resp.FunctionError = invoke.FunctionErrorUnhandled
		return outcome{kind: kindFunctionError, resp: resp}
	}
	switch {
	case a.status == http.StatusTooManyRequests:
		return outcome{kind: kindThrottled, reason: statusReason(a)}
	case success && len(a.body) > invoke.MaxPayloadBytes:
		resp.FunctionError = invoke.FunctionErrorUnhandled
		resp.Payload = invoke.ErrorDocument{
			ErrorType:    "Function.ResponseSizeTooLarge",
			ErrorMessage: fmt.Sprintf("Response payload size exceeded maximum allowed payload size (%d bytes).", invoke.MaxPayloadBytes),
		}.Marshal()
		return outcome{kind: kindFunctionError, resp: resp}
	case success:
		return outcome{kind: kindSuccess, resp: resp}
	case a.status >= 500:
		return outcome{kind: kindUnavailable, retry: true, reason: statusReason(a)}
	default:
		return outcome{kind: kindUnavailable, reason: statusReason(a)}
	}
}

// isErrorDocument reports whether body is a JSON object made only of the keys runtimes use for
// a function error, with a string errorType or errorMessage among them.
func isErrorDocument(body []byte) bool {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' || !bytes.Contains(trimmed, []byte(`"error`)) {
		return false // the common success bodies cost no parse
	}
	var doc map[string]json.RawMessage
	if json.Unmarshal(trimmed, &doc) != nil {
		return false
	}
	found := false
	for k, v := range doc {
		if !errorDocumentKeys[k] {
			return false
		}
		if k == "errorType" || k == "errorMessage" {
			var s string
			if json.Unmarshal(v, &s) != nil {
				return false
			}
			found = true
		}
	}
	return found
}

// statusReason describes an answer that did not reach the function: its status and the start of
// its body.
func statusReason(a attempt) string {
	const max = 200
	body := strings.TrimSpace(string(a.body))
	if len(body) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(body[cut]) {
			cut--
		}
		body = body[:cut] + "…"
	}
	if body == "" {
		return fmt.Sprintf("status %d", a.status)
	}
	return fmt.Sprintf("status %d: %s", a.status, body)
}
