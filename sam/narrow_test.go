package sam

import (
	"errors"
	"strings"
	"testing"
)

const twoStreams = `Transform: AWS::Serverless-2016-10-31
Resources:
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Events:
        A:
          Type: Kinesis
          Properties: {Stream: arn:aws:kinesis:us-east-1:123456789012:stream/a, StartingPosition: LATEST}
        B:
          Type: Kinesis
          Properties: {Stream: arn:aws:kinesis:us-east-1:123456789012:stream/b, StartingPosition: LATEST}
  Other:
    Type: AWS::Serverless::Function
    Properties:
      Events:
        C:
          Type: Kinesis
          Properties: {Stream: arn:aws:kinesis:us-east-1:123456789012:stream/c, StartingPosition: LATEST}
`

func TestNarrowAndSelectFunction(t *testing.T) {
	load := func(src string) *Template {
		t.Helper()
		tpl, err := Parse("t.yaml", []byte(src), WithClock(fixedNow))
		if err != nil {
			t.Fatal(err)
		}
		return tpl
	}
	tpl := load(twoStreams)
	if err := tpl.Narrow(""); err != nil || len(tpl.Mappings) != 3 {
		t.Fatalf("Narrow(\"\"): %v, %d mappings; want all 3 kept", err, len(tpl.Mappings))
	}
	var se *SelectionError
	if err := tpl.Narrow("nothing"); !errors.As(err, &se) || len(tpl.Mappings) != 3 {
		t.Fatalf("Narrow(nothing): %v, %d mappings; want a SelectionError, the template unchanged", err, len(tpl.Mappings))
	}
	if err := tpl.Narrow("Fn/B"); err != nil || len(tpl.Mappings) != 1 || tpl.Mappings[0].ID != "Fn/B" {
		t.Fatalf("Narrow(Fn/B): %v, %+v", err, tpl.Mappings)
	}
	tpl = load(twoStreams)
	tpl.Warnings = []string{"resource X is not a Kinesis stream"}
	if err := tpl.Narrow("Nope"); !errors.As(err, &se) || !strings.HasSuffix(err.Error(), " (resource X is not a Kinesis stream)") {
		t.Errorf("a failed selection does not end with the warnings: %v", err)
	}

	if _, err := load(twoStreams).SelectFunction(""); !errors.As(err, &se) {
		t.Errorf("SelectFunction(\"\") of two functions: %v, want a SelectionError", err)
	}
	oneFunction := twoStreams[:strings.Index(twoStreams, "  Other:")]
	m, err := load(oneFunction).SelectFunction("")
	if err != nil || m.ID != "Fn/A" {
		t.Errorf("SelectFunction(\"\") of one function with two mappings: %v, %v; want its first mapping", m, err)
	}
	if m, err := load(twoStreams).SelectFunction("Other"); err != nil || m.ID != "Other/C" {
		t.Errorf("SelectFunction(Other): %v, %v", m, err)
	}
	if _, err := load(oneFunction).SelectFunction("Fn"); !errors.As(err, &se) {
		t.Errorf("SelectFunction(Fn) names two mappings: %v, want a SelectionError", err)
	}
}
