package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"

	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/sam"
)

const tpl = `Transform: AWS::Serverless-2016-10-31
Parameters:
  StreamName: {Type: String, Default: orders}
Resources:
  Stream:
    Type: AWS::Kinesis::Stream
    Properties: {Name: !Ref StreamName, ShardCount: 1}
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: consumer
      Timeout: 12
      Events:
        K:
          Type: Kinesis
          Properties:
            Stream: !GetAtt Stream.Arn
            StartingPosition: AT_TIMESTAMP
            StartingPositionTimestamp: 1700000000
            BatchSize: 10
            MaximumBatchingWindowInSeconds: 5
            Enabled: false
`

// load parses args as RunFlags (as inproc.Run does) and loads them.
func load(t *testing.T, args ...string) (*Config, error) {
	t.Helper()
	var f RunFlags
	p, err := kong.New(&f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f.Load(context.Background(), io.Discard, nil)
}

// TestLoadPrecedence: flags and ESM_* variables override the template, which overrides the
// defaults; the stream is looked up by name when the template declares it.
func TestLoadPrecedence(t *testing.T) {
	path := filepath.Join(t.TempDir(), "template.yaml")
	if err := os.WriteFile(path, []byte(tpl), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"--template", path, "--endpoint-url", "http://127.0.0.1:1"}

	c, err := load(t, base...)
	if err != nil {
		t.Fatal(err)
	}
	mc := c.Run.Config
	if c.Run.Source.Stream != "orders" || c.Run.Function.Name != "consumer" || c.Run.Function.Timeout != 12*time.Second ||
		mc.BatchSize != 10 || mc.MaximumBatchingWindow != 5*time.Second || !mc.Disabled || mc.StartingPosition != poller.AtTimestamp ||
		mc.StartingPositionTimestamp.Unix() != 1700000000 || c.Run.Function.ARN != "arn:aws:lambda:us-east-1:000000000000:function:consumer" {
		t.Fatalf("template not applied: %+v %+v", c.Run, mc)
	}

	t.Setenv("ESM_BATCH_SIZE", "20")
	c, err = load(t, append(base, "--parameter-overrides", "StreamName=payments", "--timeout", "2s", "--enabled",
		"--starting-position", "LATEST", "--function-name", "other", "--maximum-batching-window", "0")...)
	if err != nil {
		t.Fatal(err)
	}
	mc = c.Run.Config
	if c.Run.Source.Stream != "payments" || c.Run.Function.Timeout != 2*time.Second || mc.BatchSize != 20 || mc.Disabled ||
		mc.StartingPosition != poller.Latest || !mc.StartingPositionTimestamp.IsZero() || mc.MaximumBatchingWindow != 0 ||
		c.Run.Function.Name != "other" || c.Run.Function.ARN != "" {
		t.Fatalf("flags and environment do not override the template: %+v %+v", c.Run, mc)
	}

	c, err = load(t, append(base, "--stream", "arn:aws:kinesis:us-east-1:000000000000:stream/x")...)
	if err != nil || c.Run.Source.Stream != "arn:aws:kinesis:us-east-1:000000000000:stream/x" {
		t.Fatalf("--stream does not override the template: %v %+v", err, c)
	}
}

func TestLoadWithoutTemplate(t *testing.T) {
	t.Chdir(t.TempDir())
	_, err := load(t)
	if ExitCode(err) != 2 || err.Error() != "no template.yaml here: pass --template FILE, or --stream NAME to run without a template" {
		t.Fatalf("no template, no stream: %v (exit code %d)", err, ExitCode(err))
	}
	c, err := load(t, "--stream", "s", "--batch-size", "7")
	if err != nil || c.Mapping != nil || c.Run.Source.Stream != "s" || c.Run.Config.BatchSize != 7 ||
		c.Run.Config.StartingPosition != poller.TrimHorizon || c.Run.Function.Name != "example" {
		t.Fatalf("flag-only mode: %v %+v", err, c)
	}
	if c.SDKGetRecords {
		t.Fatal("the SDK's GetRecords without --sdk-getrecords")
	}
	if c, err := load(t, "--stream", "s", "--sdk-getrecords"); err != nil || !c.SDKGetRecords {
		t.Fatalf("--sdk-getrecords: %v %+v", err, c)
	}
	_, err = load(t, "--stream", "s", "--batch-size", "0")
	if !errors.Is(err, poller.ErrInvalidConfig) || ExitCode(err) != 2 {
		t.Fatalf("--batch-size 0: %v", err)
	}
	_, err = load(t, "--template", "missing.yaml")
	if ExitCode(err) != 2 {
		t.Fatalf("a --template that does not exist: %v", err)
	}
	var se *sam.SelectionError
	if errors.As(err, &se) {
		t.Fatal("a missing template is not a selection error")
	}
}

func TestInvokerTargets(t *testing.T) {
	c := &Config{Logger: nil}
	for _, tt := range []struct {
		targets []string
		ok      bool
	}{
		{nil, true},
		{[]string{"http://127.0.0.1:9001", "http://127.0.0.1:9002"}, true},
		{[]string{"http://127.0.0.1:9001 http://127.0.0.1:9002"}, true}, // ESM_INVOKE="a b"
		{[]string{"lambda:fn"}, true},
		{[]string{"lambda:fn", "http://127.0.0.1:9001"}, false},
		{[]string{"lambda:"}, false},
		{[]string{"127.0.0.1:9001"}, false},
		{[]string{"http://127.0.0.1:9001", "http://127.0.0.1:9001"}, false}, // the same endpoint twice
	} {
		c.Invoke = tt.targets
		c.Run.Function.Timeout = 3 * time.Second
		c.Logger = discardLogger()
		targets, err := ParseTargets(c.Invoke)
		var inv poller.Invoker
		if err == nil {
			var closeInvoker func() error
			inv, closeInvoker, err = c.invoker(targets)
			_ = closeInvoker()
		}
		if (err == nil) != tt.ok {
			t.Errorf("--invoke %q: %v", tt.targets, err)
		}
		if err != nil && ExitCode(err) != 2 {
			t.Errorf("--invoke %q: exit code %d, want 2", tt.targets, ExitCode(err))
		}
		if tt.ok && (inv == nil) != (len(tt.targets) == 0) {
			t.Errorf("--invoke %q: invoker %v", tt.targets, inv)
		}
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestNoAccountLookupUnlessNeeded: without an endpoint, a template that never names
// AWS::AccountId resolves without asking STS for the caller's account (STS points at a closed
// port here, so a call would fail the test); one that names it does ask.
func TestNoAccountLookupUnlessNeeded(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL_STS", "http://127.0.0.1:1")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDLOCAL")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "local")
	t.Setenv("AWS_REGION", "us-east-1")
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain.yaml")
	if err := os.WriteFile(plain, []byte(tpl), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := (TemplateFlags{Template: plain}).Resolve(context.Background(), true); err != nil {
		t.Fatalf("a template without AWS::AccountId needed an account lookup: %v", err)
	}
	named := filepath.Join(dir, "named.yaml")
	if err := os.WriteFile(named, []byte(tpl+"Outputs:\n  Account: {Value: !Ref AWS::AccountId}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := (TemplateFlags{Template: named}).Resolve(context.Background(), true); err == nil {
		t.Fatal("a template naming AWS::AccountId resolved without looking the account up")
	}
}

// TestOnDestinationFailure: block by default; drop from the flag or ESM_ON_DESTINATION_FAILURE;
// anything else is a usage error.
func TestOnDestinationFailure(t *testing.T) {
	t.Chdir(t.TempDir()) // no template.yaml: flag-only mode
	base := []string{"--stream", "s", "--endpoint-url", "http://127.0.0.1:1"}
	c, err := load(t, base...)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Run.Config.OnDestinationFailure; got != poller.DestinationFailureBlock {
		t.Fatalf("default %q, want block", got)
	}
	if c, err = load(t, append(base, "--on-destination-failure", "drop")...); err != nil || c.Run.Config.OnDestinationFailure != poller.DestinationFailureDrop {
		t.Fatalf("--on-destination-failure drop: %v, %+v", err, c)
	}
	t.Setenv("ESM_ON_DESTINATION_FAILURE", "drop")
	if c, err = load(t, base...); err != nil || c.Run.Config.OnDestinationFailure != poller.DestinationFailureDrop {
		t.Fatalf("ESM_ON_DESTINATION_FAILURE=drop: %v, %+v", err, c)
	}
	var f RunFlags
	p, _ := kong.New(&f)
	if _, err := p.Parse(append(base, "--on-destination-failure", "retry")); err == nil {
		t.Fatal("--on-destination-failure retry accepted")
	}
}

// TestStopped: only a cancellation caused by the stop signal is a clean stop.
func TestStopped(t *testing.T) {
	stopped, stop := context.WithCancel(context.Background())
	stop()
	live := context.Background()
	cancelled := fmt.Errorf("describe lease table t: %w", context.Canceled)
	failed := errors.New("describe lease table t: StatusCode: 500")
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want error
	}{
		{"stopped while a call was cancelled", stopped, cancelled, nil},
		{"stopped after a failure", stopped, failed, failed},
		{"a cancellation the signal did not cause", live, cancelled, cancelled},
		{"a failure", live, failed, failed},
		{"no error", stopped, nil, nil},
	} {
		if got := Stopped(c.ctx, c.err); got != c.want {
			t.Errorf("%s: Stopped = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestBlockedAfter: --blocked-after reaches the runner, zero leaves the poller's default (which
// the flag's help states), a negative one is refused.
func TestBlockedAfter(t *testing.T) {
	t.Chdir(t.TempDir())
	base := []string{"--stream", "s", "--endpoint-url", "http://127.0.0.1:1"}
	c, err := load(t, append(base, "--blocked-after", "90s")...)
	if err != nil || c.Run.Hooks.BlockedAfter != 90*time.Second {
		t.Fatalf("--blocked-after 90s: %v, %v", err, c)
	}
	if c, err = load(t, base...); err != nil || c.Run.Hooks.BlockedAfter != 0 {
		t.Fatalf("no --blocked-after: %v, %v", err, c)
	}
	if _, err := load(t, append(base, "--blocked-after=-1s")...); err == nil {
		t.Fatal("--blocked-after -1s accepted")
	}
	for _, tt := range []struct { // esm serve has it too (issue 40)
		arg  string
		want time.Duration
		err  bool
	}{{"--blocked-after=90s", 90 * time.Second, false}, {"--blocked-after=-1s", 0, true}} {
		var f ServeFlags
		p, err := kong.New(&f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Parse([]string{tt.arg}); err != nil {
			t.Fatalf("esm serve %s: %v", tt.arg, err)
		}
		if got, err := f.blockedAfter(); got != tt.want || (err != nil) != tt.err || (err != nil && ExitCode(err) != 2) {
			t.Fatalf("esm serve %s: %s, %v", tt.arg, got, err)
		}
	}
	field, _ := reflect.TypeFor[RunFlags]().FieldByName("BlockedAfter")
	if want := "(default " + strings.TrimSuffix(poller.DefaultBlockedAfter.String(), "0s") + ")"; !strings.Contains(field.Tag.Get("help"), want) {
		t.Fatalf("--blocked-after's help %q does not state the default %s", field.Tag.Get("help"), want)
	}
}

// TestEmptyStreamNamesTheFlag: an empty --stream is refused in the flags' terms before anything
// runs (the runner's own refusal names its Mapping field).
func TestEmptyStreamNamesTheFlag(t *testing.T) {
	t.Chdir(t.TempDir()) // no template.yaml
	_, err := load(t, "--stream", "")
	var ve *poller.ValidationError
	if !errors.As(err, &ve) || ve.Field != "Stream" || !strings.Contains(ve.Message, "--stream or ESM_STREAM") || !errors.Is(err, poller.ErrInvalidConfig) {
		t.Fatalf("err = %v, want the Stream ValidationError naming --stream", err)
	}
}

// TestPollGrid: --poll-grid (or ESM_POLL_GRID) reaches esm run's mapping and esm serve's base;
// without it the poller's default applies (which the help states), also with a --poll-interval
// shorter than that default; a grid longer than --poll-interval is refused in the poller's terms.
func TestPollGrid(t *testing.T) {
	t.Chdir(t.TempDir()) // no template.yaml: flag-only mode
	base := []string{"--stream", "s", "--endpoint-url", "http://127.0.0.1:1"}
	c, err := load(t, append(base, "--poll-grid", "100ms")...)
	if err != nil || c.Run.Config.PollGrid != 100*time.Millisecond {
		t.Fatalf("--poll-grid 100ms: %v, %+v", err, c)
	}
	for _, tt := range []struct {
		args     []string
		wantGrid time.Duration
	}{
		{nil, poller.DefaultPollGrid},
		{[]string{"--poll-interval", "20ms"}, 20 * time.Millisecond},
	} {
		c, err := load(t, append(base, tt.args...)...)
		if err != nil || c.Run.Config.PollGrid != 0 {
			t.Fatalf("%v: %v, PollGrid %s; want it left to the poller", tt.args, err, c.Run.Config.PollGrid)
		}
		err = c.Run.Config.Validate("")
		if checked := c.Run.Config.Defaults(); err != nil || checked.PollGrid != tt.wantGrid {
			t.Fatalf("%v: the poller's PollGrid %s, %v; want %s", tt.args, checked.PollGrid, err, tt.wantGrid)
		}
	}
	c, err = load(t, append(base, "--poll-interval", "20ms", "--poll-grid", "50ms")...)
	if err != nil {
		t.Fatal(err)
	}
	var ve *poller.ValidationError
	if err := c.Run.Config.Validate(""); !errors.As(err, &ve) || ve.Field != "PollGrid" {
		t.Fatalf("--poll-grid 50ms above --poll-interval 20ms: %v, want a PollGrid error", err)
	}
	serve := ServeFlags{PollFlags: PollFlags{PollInterval: time.Second, PollGrid: 200 * time.Millisecond}}
	if got := serve.base().PollGrid; got != 200*time.Millisecond {
		t.Fatalf("esm serve's base PollGrid %s, want 200ms", got)
	}
	field, _ := reflect.TypeFor[PollFlags]().FieldByName("PollGrid")
	if want := "(default " + poller.DefaultPollGrid.String() + ","; !strings.Contains(field.Tag.Get("help"), want) {
		t.Fatalf("--poll-grid's help %q does not state the default %s", field.Tag.Get("help"), poller.DefaultPollGrid)
	}
	t.Setenv("ESM_POLL_GRID", "250ms")
	if c, err = load(t, base...); err != nil || c.Run.Config.PollGrid != 250*time.Millisecond {
		t.Fatalf("ESM_POLL_GRID=250ms: %v, %+v", err, c)
	}
}
