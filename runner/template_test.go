package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/kinesis-esm/esm/poller"
)

const ordersTemplate = `Transform: AWS::Serverless-2016-10-31
Parameters:
  StreamName: {Type: String, Default: not-this-one}
Resources:
  Stream:
    Type: AWS::Kinesis::Stream
    Properties: {Name: !Ref StreamName, ShardCount: 1}
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Handler: bootstrap
      Runtime: provided.al2023
      CodeUri: .
      Timeout: 7
      ReservedConcurrentExecutions: 2
      Environment:
        Variables:
          RUNNER_TEST_FROM_TEMPLATE: from the template
          RUNNER_TEST_SET_ALREADY: from the template
      Events:
        K:
          Type: Kinesis
          Properties:
            Stream: !GetAtt Stream.Arn
            StartingPosition: LATEST
            BatchSize: 2
`

// TestTemplateMapping: a template's mapping becomes the Mapping esm run runs (its stream by name,
// its function's name and timeout, its settings, ARNs in the emulators' account with an endpoint
// URL), the stream and function name given override it, and without a template a stream alone
// is a mapping with Lambda's defaults; with neither it is ErrNoTemplate, a configuration error.
func TestTemplateMapping(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // no template.yaml here
	path := filepath.Join(dir, "orders.yaml")
	if err := os.WriteFile(path, []byte(ordersTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg := aws.Config{Region: "eu-west-1"}
	const endpoint = "http://127.0.0.1:1" // never called
	params := map[string]string{"StreamName": "orders"}

	tm, err := Template{Path: path, ParameterOverrides: params, EndpointURL: endpoint, LookupAccount: true}.Mapping(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := tm.Mapping
	if tm.Template == nil || tm.Template.Function.LogicalID != "Fn" || m.Source.Stream != "orders" || m.Source.Consumer != "" ||
		m.Function.Name != tm.Template.Function.FunctionName || m.Function.Timeout != 7*time.Second ||
		m.Config.BatchSize != 2 || m.Config.StartingPosition != poller.Latest ||
		tm.Template.EventSourceArn != "arn:aws:kinesis:eu-west-1:"+EmulatorAccountID+":stream/orders" {
		t.Fatalf("the template's mapping: %+v (template %+v)", m, tm.Template)
	}

	stream, name := "other", "renamed"
	tm, err = Template{Path: path, ParameterOverrides: params, EndpointURL: endpoint, Stream: &stream, FunctionName: &name}.Mapping(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if m := tm.Mapping; m.Source.Stream != "other" || m.Function.Name != "renamed" || m.Function.ARN != "" || m.Config.BatchSize != 2 {
		t.Fatalf("with the stream and the function name given: %+v", m)
	}

	tm, err = Template{Stream: &stream}.Mapping(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if m := tm.Mapping; tm.Template != nil || m.Source.Stream != "other" || m.Function.Name != DefaultFunctionName ||
		m.Function.Timeout != 3*time.Second || m.Config.StartingPosition != poller.TrimHorizon {
		t.Fatalf("a stream without a template: %+v", m)
	}

	for _, tt := range []struct {
		name    string
		t       Template
		want    string
		missing bool // ErrNoTemplate
	}{
		{"no template, no stream", Template{}, "template.yaml does not exist: give a template, or a stream to run without one", true},
		{"a mapping selected without a template", Template{Function: "Fn", Stream: &stream}, "function Fn selects a mapping of a template, and there is none", true},
		{"a template that does not exist", Template{Path: filepath.Join(dir, "nope.yaml")}, "template " + filepath.Join(dir, "nope.yaml") + ": stat", false},
		{"an unknown parameter", Template{Path: path, ParameterOverrides: map[string]string{"Nope": "x"}, EndpointURL: endpoint}, "[Nope] do not exist", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.t.Mapping(ctx, cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Mapping: %v; want an error containing %q", err, tt.want)
			}
			if !errors.Is(err, poller.ErrInvalidConfig) || errors.Is(err, ErrNoTemplate) != tt.missing {
				t.Errorf("%v: wraps ErrInvalidConfig %t, ErrNoTemplate %t; want true, %t", err,
					errors.Is(err, poller.ErrInvalidConfig), errors.Is(err, ErrNoTemplate), tt.missing)
			}
		})
	}
}

// TestTemplateMappingFunction: the template's function gives the mapping its reserved
// concurrency, which holds a handler run in this process to it (two invocations at once, the
// third waits), and the template's environment is left for the program to set: a library writes
// no process environment.
func TestTemplateMappingFunction(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "orders.yaml")
	if err := os.WriteFile(path, []byte(ordersTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RUNNER_TEST_FROM_TEMPLATE", "")
	os.Unsetenv("RUNNER_TEST_FROM_TEMPLATE") // t.Setenv restores it (unset) after the test
	tm, err := Template{Path: path, EndpointURL: "http://127.0.0.1:1"}.Mapping(context.Background(), aws.Config{Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, set := os.LookupEnv("RUNNER_TEST_FROM_TEMPLATE"); set {
		t.Error("Template.Mapping set the process's environment")
	}
	if got := tm.Template.Function.Environment["RUNNER_TEST_FROM_TEMPLATE"]; got != "from the template" {
		t.Errorf("the template's environment has RUNNER_TEST_FROM_TEMPLATE=%q", got)
	}
	f := tm.Mapping.Function
	if f.ReservedConcurrency == nil || *f.ReservedConcurrency != 2 {
		t.Fatalf("ReservedConcurrency %v, want the template's 2", f.ReservedConcurrency)
	}
	release, running := make(chan struct{}), make(chan struct{}, 3)
	f.Handler = func(context.Context, any) error {
		running <- struct{}{}
		<-release
		return nil
	}
	f.Timeout = time.Minute
	inv, err := f.Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := inv.Invoke(context.Background(), []byte(`{}`))
			done <- err
		}()
	}
	<-running
	<-running
	select {
	case <-running:
		t.Fatal("a third invocation ran beside two, with a reserved concurrency of 2")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
