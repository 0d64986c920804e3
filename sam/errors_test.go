package sam

import (
	"errors"
	"testing"

	"github.com/kinesis-esm/esm/filter"
	"github.com/kinesis-esm/esm/poller"
)

// TestErrorKeepsTheValidationCause: a template's filter pattern that Lambda refuses gives an
// *Error with poller's *ValidationError and the filter's *PatternError behind it.
func TestErrorKeepsTheValidationCause(t *testing.T) {
	_, err := Parse("t.yaml", []byte(eventTemplate("FilterCriteria:\n  Filters:\n    - Pattern: '{\"data\": 1}'")), WithClock(fixedNow))
	var se *Error
	var ve *poller.ValidationError
	var pe *filter.PatternError
	if !errors.As(err, &se) || !errors.As(err, &ve) || ve.Field != "FilterCriteria" || !errors.Is(err, poller.ErrInvalidConfig) {
		t.Fatalf("err = %#v", err)
	}
	if !errors.As(err, &pe) || pe.Index != 0 {
		t.Fatalf("the filter's PatternError is lost: %v", err)
	}
}
