package sam

import (
	"cmp"
	"errors"
	"fmt"
	"strings"

	"github.com/kinesis-esm/esm/poller"
)

// Error is a template that cannot be read, resolved or run: it names the file, the line (when
// known), the property path and what is wrong. It wraps poller.ErrInvalidConfig, and the
// *poller.ValidationError behind it when Lambda's own validation failed.
type Error struct {
	File string
	Line int
	// Path is the property, e.g. Resources.Fn.Properties.Events.Stream.Properties.BatchSize.
	Path    string
	Message string
	// Err is the validation error behind the message, if any.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// Unwrap returns poller.ErrInvalidConfig and the validation error behind e, if any.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{poller.ErrInvalidConfig, e.Err}
	}
	return []error{poller.ErrInvalidConfig}
}

// ErrNoMapping is wrapped when a template declares no Kinesis event source.
var ErrNoMapping = errors.New("no Kinesis event source mapping in the template")

// SelectionError is returned by Template.Select when the selector names none or several mappings.
// Its message lists the mappings there are.
type SelectionError struct {
	File     string
	Selector string
	// NoMatch is set when the selector named no mapping; Candidates then lists them all.
	NoMatch bool
	// Candidates are the IDs of the mappings the selector could mean.
	Candidates []string

	name string // what the message calls the selector (WithInputNames)
}

func (e *SelectionError) Error() string {
	list := strings.Join(e.Candidates, ", ")
	sel := cmp.Or(e.name, InputSelector.String())
	switch {
	case len(e.Candidates) == 0 && e.Selector != "":
		return fmt.Sprintf("%s: %s %q: %v", e.File, sel, e.Selector, ErrNoMapping)
	case len(e.Candidates) == 0:
		return fmt.Sprintf("%s: %v: add an event of Type: Kinesis to an AWS::Serverless::Function, or an AWS::Lambda::EventSourceMapping on a Kinesis stream", e.File, ErrNoMapping)
	case e.NoMatch:
		return fmt.Sprintf("%s: %s %q matches no Kinesis mapping; the template has: %s", e.File, sel, e.Selector, list)
	case e.Selector == "":
		return fmt.Sprintf("%s has %d Kinesis mappings; choose one with %s: %s", e.File, len(e.Candidates), sel, list)
	default:
		return fmt.Sprintf("%s: %s %q matches %d Kinesis mappings; choose one of: %s", e.File, sel, e.Selector, len(e.Candidates), list)
	}
}

// Unwrap returns poller.ErrInvalidConfig (and ErrNoMapping when there is none).
func (e *SelectionError) Unwrap() []error {
	if len(e.Candidates) == 0 {
		return []error{poller.ErrInvalidConfig, ErrNoMapping}
	}
	return []error{poller.ErrInvalidConfig}
}
