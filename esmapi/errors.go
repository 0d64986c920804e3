package esmapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/kinesis-esm/esm/poller"
)

// Error types, as Lambda names them in the x-amzn-ErrorType header.
const (
	InvalidParameterValue = "InvalidParameterValueException"
	ResourceNotFound      = "ResourceNotFoundException"
	ResourceConflict      = "ResourceConflictException"
	ResourceInUse         = "ResourceInUseException"
	Validation            = "ValidationException"
	Serialization         = "SerializationException"
	UnknownOperation      = "UnknownOperationException"
	ServiceError          = "ServiceException"
	// Authentication failures (only with --api-credentials).
	MissingAuthenticationToken = "MissingAuthenticationTokenException"
	UnrecognizedClient         = "UnrecognizedClientException"
	InvalidSignature           = "InvalidSignatureException"
)

// Lambda's messages, as AWS recorded them.
const (
	msgNotFound           = "The resource you requested does not exist."
	msgFunctionNotFound   = "Function does not exist"
	msgUnrecognizedSource = "Unrecognized event source."
	msgOnSuccess          = "Unsupported DestinationConfig parameter for given event source mapping type."
)

// APIError is an error answer of the API: its HTTP status, type and message.
type APIError struct {
	Status  int
	Type    string
	Message string
}

func (e *APIError) Error() string { return e.Type + ": " + e.Message }

// tooLarge answers a request body past maxBody.
func tooLarge() *APIError {
	return &APIError{Status: http.StatusRequestEntityTooLarge, Type: "RequestTooLargeException", Message: "Request must be smaller than 1048576 bytes."}
}

func invalidParameter(format string, args ...any) *APIError {
	return &APIError{Status: http.StatusBadRequest, Type: InvalidParameterValue, Message: fmt.Sprintf(format, args...)}
}

func notFound() *APIError {
	return &APIError{Status: http.StatusNotFound, Type: ResourceNotFound, Message: msgNotFound}
}

func inUse(uuid, state string) *APIError {
	if state == StateDeleting {
		return &APIError{Status: http.StatusBadRequest, Type: ResourceInUse, Message: fmt.Sprintf(
			"Cannot update the event source mapping %s because it is being deleted.", uuid)}
	}
	return &APIError{Status: http.StatusBadRequest, Type: ResourceInUse, Message: fmt.Sprintf(
		"Cannot update the event source mapping %s because it is in use: its state is %s. Try again once it is Enabled or Disabled.", uuid, state)}
}

// changedElsewhere is the answer to a change made from a revision of the mapping that another
// worker has since replaced: Lambda's ResourceConflictException ("another operation is in
// progress"), in esm's words (AWS's text for this case is not recorded).
func changedElsewhere(uuid string) *APIError {
	return &APIError{Status: http.StatusConflict, Type: ResourceConflict, Message: fmt.Sprintf(
		"The event source mapping %s was changed by another request while this one was processed. Get it and try again.", uuid)}
}

func validation(format string, args ...any) *APIError {
	return &APIError{Status: http.StatusBadRequest, Type: Validation, Message: fmt.Sprintf(format, args...)}
}

// fromConfig turns a poller configuration error into Lambda's answer: the model's constraint
// failures ("1 validation error detected: …", ranges and enums) are ValidationException, except
// the missing StartingPosition, which AWS recorded as InvalidParameterValueException; Lambda's own
// checks are InvalidParameterValueException.
func fromConfig(err error) *APIError {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae
	}
	var ve *poller.ValidationError
	if !errors.As(err, &ve) {
		return &APIError{Status: http.StatusInternalServerError, Type: ServiceError, Message: err.Error()}
	}
	if strings.HasPrefix(ve.Message, "1 validation error detected:") && !strings.HasSuffix(ve.Message, "Member must not be null.") {
		return &APIError{Status: http.StatusBadRequest, Type: Validation, Message: ve.Message}
	}
	return &APIError{Status: http.StatusBadRequest, Type: InvalidParameterValue, Message: ve.Message}
}

// writeError sends e as Lambda does: the type in x-amzn-ErrorType and a JSON body. Lambda's own
// exceptions carry "Type": "User" and the message under "message", except ResourceNotFoundException,
// whose member is "Message" (both recorded from AWS); model validation errors carry the message
// alone.
func writeError(w http.ResponseWriter, requestID string, e *APIError) {
	if requestID == "" {
		requestID = uuid.NewString()
	}
	body := map[string]string{}
	switch e.Type {
	case ResourceNotFound:
		body["Type"], body["Message"] = "User", e.Message
	case Validation, Serialization, UnknownOperation, MissingAuthenticationToken, UnrecognizedClient, InvalidSignature:
		body["message"] = e.Message
	case ServiceError:
		body["Type"], body["message"] = "Service", e.Message
	default:
		body["Type"], body["message"] = "User", e.Message
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h["x-amzn-ErrorType"] = []string{e.Type} // AWS's spelling; header names are case-insensitive
	h["x-amzn-RequestId"] = []string{requestID}
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(body)
}
