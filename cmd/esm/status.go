package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesis-esm/esm/checkpoint"
	"github.com/kinesis-esm/esm/cmd/esm/internal/cli"
	"github.com/kinesis-esm/esm/runner"
	"github.com/kinesis-esm/esm/status"
)

type statusCmd struct {
	cli.TemplateFlags `embed:""`
	Stream            *string       `help:"Kinesis stream name or ARN (overrides the template's)." env:"ESM_STREAM"`
	FunctionName      *string       `help:"Function name (default: the template's, else example)." env:"ESM_FUNCTION_NAME"`
	StateDir          string        `help:"Directory of the checkpoint store." default:".esm" env:"ESM_STATE_DIR"`
	LeaseTable        string        `help:"Read progress and owners from this DynamoDB lease table (workers sharing the mapping) instead of the state directory." env:"ESM_LEASE_TABLE"`
	MetricsAddr       []string      `help:"A running esm's --metrics-addr: adds each shard's live state, iterator age, owner and, for a blocked shard, its error, and lets status run while that esm holds the state directory. Repeat it (or separate by commas) for several workers: every one is read. With --lease-table, the addresses the workers publish there are read too." env:"ESM_METRICS_ADDR" sep:"," placeholder:"HOST:PORT"`
	All               bool          `help:"With --metrics-addr of a running esm serve: every mapping it runs, each as a lineage tree with its uuid (live states and iterator ages; the checkpoints are in the state it holds)." env:"ESM_ALL"`
	JSON              bool          `help:"Print the shards as JSON." env:"ESM_JSON"`
	Watch             bool          `help:"Redraw the view every --interval until interrupted: the summary, the blocked shards and the top shards, as many as the terminal's height allows." env:"ESM_WATCH"`
	Interval          time.Duration `help:"Refresh interval of --watch." default:"1s" env:"ESM_INTERVAL"`
}

// run shows the mapping's shards (package status): with --all every mapping of the esm serve at
// --metrics-addr, else the one the template and flags name. --watch redraws until interrupted.
func (s *statusCmd) run(ctx context.Context, e env) error {
	every := s.Interval // how often --watch redraws; 0: once
	if !s.Watch {
		every = 0
	}
	if s.All {
		if len(s.MetricsAddr) == 0 {
			return cli.Usage(errors.New("--all needs --metrics-addr: the address of a running esm serve's metrics"))
		}
		cfg, err := runner.AWSConfig(ctx, s.Region, s.EndpointURL)
		if err != nil {
			return err
		}
		r := status.New(kinesis.NewFromConfig(cfg), append(s.metricsAddrs(), status.WithDynamoDBStreams(dynamodbstreams.NewFromConfig(cfg)))...)
		return status.Show(ctx, e.stdout, s.JSON, every, func(ctx context.Context) (status.View, error) {
			v, err := r.All(ctx)
			return s.fit(v, e.stdout), err
		})
	}
	c, err := s.Target(ctx, s.Stream, s.FunctionName, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	cfg := c.AWS // its BaseEndpoint is --endpoint-url
	opts := append([]status.Option{status.WithStateDir(s.StateDir), status.WithDynamoDBStreams(dynamodbstreams.NewFromConfig(cfg))}, s.metricsAddrs()...)
	if s.LeaseTable != "" {
		opts = append(opts, status.WithLeaseTable(dynamodb.NewFromConfig(cfg), s.LeaseTable))
	}
	kin := kinesis.NewFromConfig(cfg)
	run, err := runner.New(cfg, runner.WithKinesis(kin))
	if err != nil {
		return err
	}
	found, err := run.Resolve(ctx, c.Run) // the mapping's ARNs, as esm run names them
	if err != nil {
		return err
	}
	r := status.New(kin, opts...)
	arn, fn := found.StreamARN, found.FunctionARN
	return status.Show(ctx, e.stdout, s.JSON, every, func(ctx context.Context) (status.View, error) {
		rep, err := r.Mapping(ctx, arn, fn)
		if errors.Is(err, checkpoint.ErrLocked) {
			err = fmt.Errorf("%w (esm status reads checkpoints when no esm process runs on that directory; --metrics-addr gives a running one's live view)", cli.StateDirInUse(err))
		}
		return s.fit(rep, e.stdout), err
	})
}

// metricsAddrs are the --metrics-addr options.
func (s *statusCmd) metricsAddrs() []status.Option {
	var opts []status.Option
	for _, a := range s.MetricsAddr {
		opts = append(opts, status.WithMetricsAddr(strings.TrimSpace(a)))
	}
	return opts
}

// fit cuts what --watch draws to the terminal's height (24 lines when out is not a terminal).
func (s *statusCmd) fit(v status.View, out io.Writer) status.View {
	if !s.Watch || s.JSON {
		return v
	}
	rows := 24
	if f, ok := out.(*os.File); ok {
		if _, h, err := term.GetSize(int(f.Fd())); err == nil && h > 4 {
			rows = h
		}
	}
	return status.Brief(v, rows-2) // Redraw's blank line and clock
}
