package esmapi

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/runner"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// TestAPIStartRunsWhatCreateChecked: the configuration a Create validated (defaults applied) is
// what the mapping's start runs, rebuilt from the stored record as any start is, with the
// Manager's hooks; the start checks it again (poller.New), a Config keeping no mark of a check.
func TestAPIStartRunsWhatCreateChecked(t *testing.T) {
	ctx := context.Background()
	kin := fakekinesis.New()
	arn := kin.CreateStream("s", 1)
	r, err := runner.New(aws.Config{Region: "us-east-1"}, runner.WithKinesis(kin), runner.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	inv := inprocess.New(func() error { return nil })
	m, err := Open(ctx, r, FileCatalog{Dir: t.TempDir()}, ProgressFuncs{
		StoreFunc:  func(context.Context, string) (poller.Store, error) { return poller.NewMemoryStore(), nil },
		DeleteFunc: func(context.Context, string) error { return nil },
	}, WithFunctions(Function{Name: "fn", Invoker: inv}), WithBlockedAfter(7*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ts := time.Now().Add(-time.Second).Truncate(time.Millisecond)
	v, aerr := m.Create(ctx, fmt.Appendf(nil, `{"FunctionName":"fn","EventSourceArn":%q,"StartingPosition":"AT_TIMESTAMP","StartingPositionTimestamp":%d.%03d}`,
		arn, ts.Unix(), ts.Nanosecond()/1e6))
	if aerr != nil {
		t.Fatal(aerr)
	}
	req, aerr := parseCreate(fmt.Appendf(nil, `{"FunctionName":"fn","EventSourceArn":%q,"StartingPosition":"AT_TIMESTAMP","StartingPositionTimestamp":%d.%03d}`,
		arn, ts.Unix(), ts.Nanosecond()/1e6))
	if aerr != nil {
		t.Fatal(aerr)
	}
	created, aerr := m.checkCreate(req)
	if aerr != nil {
		t.Fatal(aerr)
	}
	checked := created.Config
	m.mu.Lock()
	started := m.mapping(m.maps[v.UUID], nil)
	m.mu.Unlock()
	if started.Hooks.BlockedAfter != 7*time.Second {
		t.Fatalf("the start's BlockedAfter is %s, want WithBlockedAfter's 7s", started.Hooks.BlockedAfter)
	}
	if got := started.Config.Defaults(); !reflect.DeepEqual(normal(got), normal(checked)) {
		t.Fatalf("the start runs another configuration than the one Create checked:\n%+v\n%+v", got, checked)
	}
	if started.Function.ARN != v.FunctionArn || started.Function.ARN != created.Function.ARN {
		t.Fatalf("the start names its function %q, Create %q, and the API reports %q: want one ARN",
			started.Function.ARN, created.Function.ARN, v.FunctionArn)
	}
	earlier := poller.WithClock(func() time.Time { return ts.Add(-time.Hour) })
	if _, err := poller.New(kinesissrc.MustNew(kin, started.Source.Stream), started.Config, poller.NewMemoryStore(), inv, earlier); err == nil {
		t.Fatal("the start's configuration was not checked by the poller")
	}
}
