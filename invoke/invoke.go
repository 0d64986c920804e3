// Package invoke turns a batch (an already-marshalled event) into one invocation of the user's
// function and classifies the outcome exactly once:
//
//   - success: the function ran and returned; Response.Payload holds what it returned;
//   - function error: the function ran and failed (returned an error, panicked, timed out);
//     Response.FunctionError is "Unhandled" and Response.Payload holds Lambda's error document;
//   - not invoked: the function could not be reached (throttled, unavailable, misconfigured);
//     Invoke returns a non-nil error wrapping ErrThrottled or ErrUnavailable.
//
// Lambda counts function errors toward MaximumRetryAttempts and does not count the third kind;
// keeping the three apart at this boundary is what lets the poller apply Lambda's rules.
package invoke

import (
	"encoding/json"
	"errors"
)

// ErrThrottled is wrapped by Invoke errors when the function was not invoked because of a
// concurrency limit (Lambda's 429 TooManyRequestsException). Retried, never counted.
var ErrThrottled = errors.New("invoke throttled")

// ErrUnavailable is wrapped by Invoke errors when the function could not be reached at all:
// transport failures, 5xx from the invoke endpoint, missing function. Retried, never counted.
var ErrUnavailable = errors.New("function unavailable")

// FunctionErrorUnhandled is the value Lambda puts in X-Amz-Function-Error (and in the on-failure
// record's responseContext.functionError) when the function threw, crashed or timed out.
const FunctionErrorUnhandled = "Unhandled"

// Response is the outcome of an invocation that reached the function.
type Response struct {
	// StatusCode is the HTTP status Lambda's Invoke API would have answered: 200 for anything the
	// function itself returned, function errors included.
	StatusCode int
	// ExecutedVersion is the function version that ran ("$LATEST" unless an alias or version was
	// invoked).
	ExecutedVersion string
	// FunctionError is "" on success and FunctionErrorUnhandled when the function failed.
	FunctionError string
	// Payload is the function's JSON response, or Lambda's error document when FunctionError is set.
	Payload []byte
}

// Failed reports whether the function ran and failed.
func (r Response) Failed() bool { return r.FunctionError != "" }

// ErrorDocument is the JSON body Lambda returns for a function error.
type ErrorDocument struct {
	ErrorMessage string   `json:"errorMessage"`
	ErrorType    string   `json:"errorType"`
	StackTrace   []string `json:"stackTrace,omitempty"`
}

// Marshal renders the document as Lambda does.
func (d ErrorDocument) Marshal() []byte {
	b, err := json.Marshal(d)
	if err != nil { // only strings: cannot happen
		return []byte(`{"errorMessage":"error document","errorType":"Runtime.MarshalError"}`)
	}
	return b
}
