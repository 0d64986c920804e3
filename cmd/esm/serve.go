package main

import (
	"context"

	"github.com/kinesis-esm/esm/cmd/esm/internal/cli"
	"github.com/kinesis-esm/esm/example"
)

type serveCmd struct {
	cli.ServeFlags `embed:""`
}

func (s *serveCmd) run(ctx context.Context, e env) error {
	return s.Serve(ctx, e.stdout, e.stderr, example.Handle)
}
