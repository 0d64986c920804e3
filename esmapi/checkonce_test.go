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

// TestAPIStartChecksOnce: the configuration a Create checked is what the mapping's start runs,
// and the poller takes it without checking it again (here a starting timestamp that a poller's
// clock an hour earlier would refuse); a mapping read back from the catalog is checked when it
// starts.
func TestAPIStartChecksOnce(t *testing.T) {
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
	m.mu.Lock()
	e := m.maps[v.UUID]
	checked := e.cfg
	started, err := m.mapping(e, nil)
	m.mu.Unlock()
	if checked == nil || err != nil {
		t.Fatalf("Create kept no checked configuration (%v)", err)
	}
	if started.Hooks.BlockedAfter != 7*time.Second {
		t.Fatalf("the start's BlockedAfter is %s, want WithBlockedAfter's 7s", started.Hooks.BlockedAfter)
	}
	if !reflect.DeepEqual(started.Config, *checked) {
		t.Fatalf("the start runs another configuration than the one Create checked:\n%+v\n%+v", started.Config, *checked)
	}
	earlier := poller.WithClock(func() time.Time { return ts.Add(-time.Hour) })
	if _, err := poller.New(kinesissrc.MustNew(kin, started.Source.Stream), started.Config, poller.NewMemoryStore(), inv, earlier); err != nil {
		t.Fatalf("the start's configuration is checked again: %v", err)
	}
	read, err := m.config(e) // as a catalog read gives it
	if err != nil {
		t.Fatal(err)
	}
	if _, err := poller.New(kinesissrc.MustNew(kin, started.Source.Stream), read, poller.NewMemoryStore(), inv, earlier); err == nil {
		t.Fatal("a configuration read back from the catalog was not checked")
	}
}
