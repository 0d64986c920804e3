package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesis-esm/esm/checkpoint"
	"github.com/kinesis-esm/esm/internal/cli"
	"github.com/kinesis-esm/esm/runner"
	"github.com/kinesis-esm/esm/status"
)

type statusCmd struct {
	cli.TemplateFlags `embed:""`
	Stream            *string       `help:"Kinesis stream name or ARN (overrides the template's)." env:"ESM_STREAM"`
	FunctionName      *string       `help:"Function name (default: the template's, else example)." env:"ESM_FUNCTION_NAME"`
	StateDir          string        `help:"Directory of the checkpoint store." default:".esm" env:"ESM_STATE_DIR"`
	LeaseTable        string        `help:"Read progress and owners from this DynamoDB lease table (workers sharing the mapping) instead of the state directory." env:"ESM_LEASE_TABLE"`
	MetricsAddr       string        `help:"A running esm's --metrics-addr: adds each shard's live state and iterator age, and lets status run while that esm holds the state directory." env:"ESM_METRICS_ADDR" placeholder:"HOST:PORT"`
	All               bool          `help:"With --metrics-addr of a running esm serve: every mapping it runs, each as a lineage tree with its uuid (live states and iterator ages; the checkpoints are in the state it holds)." env:"ESM_ALL"`
	JSON              bool          `help:"Print the shards as JSON." env:"ESM_JSON"`
	Watch             bool          `help:"Redraw the view every --interval until interrupted." env:"ESM_WATCH"`
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
		if s.MetricsAddr == "" {
			return cli.Usage(errors.New("--all needs --metrics-addr: the address of a running esm serve's metrics"))
		}
		cfg, err := runner.AWSConfig(ctx, s.Region, s.EndpointURL)
		if err != nil {
			return err
		}
		r := status.New(kinesis.NewFromConfig(cfg), status.WithMetricsAddr(s.MetricsAddr))
		return status.Show(ctx, e.stdout, s.JSON, every, func(ctx context.Context) (status.View, error) { return r.All(ctx) })
	}
	c, err := s.Target(ctx, s.Stream, s.FunctionName, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	cfg := c.AWS // its BaseEndpoint is --endpoint-url
	opts := []status.Option{status.WithStateDir(s.StateDir), status.WithMetricsAddr(s.MetricsAddr)}
	if s.LeaseTable != "" {
		opts = append(opts, status.WithLeaseTable(dynamodb.NewFromConfig(cfg), s.LeaseTable))
	}
	r := status.New(kinesis.NewFromConfig(cfg), opts...)
	arn, fn, err := r.Resolve(ctx, c.Run.Source.Stream, cmp.Or(c.Run.Config.FunctionARN, c.Run.Function.Name))
	if err != nil {
		return err
	}
	return status.Show(ctx, e.stdout, s.JSON, every, func(ctx context.Context) (status.View, error) {
		rep, err := r.Mapping(ctx, arn, fn)
		if errors.Is(err, checkpoint.ErrLocked) {
			err = fmt.Errorf("%w (esm status reads checkpoints when no esm process runs on that directory; --metrics-addr gives a running one's live view)", cli.StateDirInUse(err))
		}
		return rep, err
	})
}
