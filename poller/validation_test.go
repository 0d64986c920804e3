package poller

import (
	"errors"
	"testing"

	"github.com/kinesis-esm/esm/filter"
)

// TestValidationErrorKeepsItsCause: a filter pattern's *filter.PatternError is behind the
// ValidationError, next to ErrInvalidConfig.
func TestValidationErrorKeepsItsCause(t *testing.T) {
	err := Config{StreamARN: "arn:aws:kinesis:us-east-1:123456789012:stream/s", StartingPosition: Latest,
		FilterPatterns: []string{`{"data": {"a": ["x"]}}`, `{"data": 1}`}}.Validate()
	var ve *ValidationError
	var pe *filter.PatternError
	if !errors.As(err, &ve) || ve.Field != "FilterCriteria" || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("err = %v, want a FilterCriteria ValidationError wrapping ErrInvalidConfig", err)
	}
	if !errors.As(err, &pe) || pe.Index != 1 || ve.Err != error(pe) {
		t.Fatalf("the PatternError is not kept: %#v", ve)
	}
	if err := (&ValidationError{Field: "X", Message: "m"}); !errors.Is(err, ErrInvalidConfig) || len(err.Unwrap()) != 1 {
		t.Fatalf("a ValidationError without a cause unwraps to %v", err.Unwrap())
	}
}
