package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesis-esm/esm/cmd/esm/internal/cli"
	"github.com/kinesis-esm/esm/esmapi"
	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/runner"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

type rewindCmd struct {
	cli.AWSFlags  `embed:""`
	Stream        string        `help:"Kinesis stream name or ARN of the mapping (with --lease-table)." env:"ESM_STREAM"`
	LeaseTable    string        `help:"The mapping's DynamoDB lease table: its workers stop, the leases are moved, the workers go on from there." env:"ESM_LEASE_TABLE"`
	MetricsAddr   string        `help:"Instead of --lease-table: the --metrics-addr of the esm run that keeps the mapping's progress in its --state-dir (on this host: the route answers loopback clients only); it stops, applies the rewind to its store and goes on." env:"ESM_METRICS_ADDR" placeholder:"HOST:PORT"`
	Shard         []string      `help:"A shard to rewind (repeatable); default every shard. Its descendants (children of a split or merge) wait for it again." placeholder:"SHARD-ID" env:"ESM_SHARD"`
	ToTimestamp   string        `name:"to-timestamp" help:"Move to the first record that arrived at or after this time: RFC 3339, or a duration meaning that long ago (1h)." placeholder:"TIME" env:"ESM_TO_TIMESTAMP"`
	From          string        `help:"Replay the window [--from, --until): its records are invoked again, then the mapping goes on from where it was. RFC 3339 or a duration ago." placeholder:"TIME" env:"ESM_FROM"`
	Until         string        `help:"The window's end (exclusive); see --from." placeholder:"TIME" env:"ESM_UNTIL"`
	Sequence      []string      `help:"Move SHARD to its record SEQ (AT_SEQUENCE_NUMBER), repeatable." placeholder:"SHARD=SEQ" env:"ESM_SEQUENCE"`
	Wait          time.Duration `help:"How long to wait for the workers to stop before the rewind is refused (nothing changed)." default:"2m" env:"ESM_WAIT"`
	LeaseDuration time.Duration `help:"The workers' --lease-duration: a worker whose heartbeat stood still this long counts as stopped." default:"10s" env:"ESM_LEASE_DURATION"`
	JSON          bool          `help:"Print the result as JSON." env:"ESM_JSON"`
}

// request is the rewind the flags ask for; a usage error says which flag to fix.
func (c *rewindCmd) request(now time.Time) (poller.RewindRequest, error) {
	q := poller.RewindRequest{Shards: c.Shard}
	at := func(flag, s string) (time.Time, error) {
		if d, err := time.ParseDuration(s); err == nil {
			if d < 0 {
				return time.Time{}, cli.Usage(fmt.Errorf("--%s %s: a duration means that long ago; give it without a sign", flag, s))
			}
			return now.Add(-d), nil
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return time.Time{}, cli.Usage(fmt.Errorf("--%s %q: give an RFC 3339 time (2026-12-07T19:00:00Z) or a duration ago (1h)", flag, s))
		}
		return t, nil
	}
	var err error
	switch {
	case c.ToTimestamp != "" && (c.From != "" || c.Until != ""):
		return q, cli.Usage(errors.New("--to-timestamp moves the position; --from/--until replay a window: give one of them"))
	case c.From != "" && c.Until == "", c.From == "" && c.Until != "":
		return q, cli.Usage(errors.New("a window needs both --from and --until"))
	case c.ToTimestamp != "":
		q.Timestamp, err = at("to-timestamp", c.ToTimestamp)
	case c.From != "":
		if q.Timestamp, err = at("from", c.From); err == nil {
			q.Until, err = at("until", c.Until)
		}
	}
	if err != nil {
		return q, err
	}
	if len(c.Sequence) > 0 {
		if len(c.Shard) > 0 {
			return q, cli.Usage(errors.New("--sequence names its shard (SHARD=SEQ): leave --shard out"))
		}
		q.Sequences = map[string]string{}
		for _, s := range c.Sequence {
			id, seq, ok := strings.Cut(s, "=")
			if !ok || id == "" || seq == "" {
				return q, cli.Usage(fmt.Errorf("--sequence %q: give SHARD=SEQ", s))
			}
			if _, dup := q.Sequences[id]; dup {
				return q, cli.Usage(fmt.Errorf("--sequence names shard %s twice", id))
			}
			q.Sequences[id] = seq
		}
	}
	return q, nil
}

func (c *rewindCmd) run(ctx context.Context, e env) error {
	now := time.Now()
	q, err := c.request(now)
	if err != nil {
		return err
	}
	switch {
	case (c.LeaseTable == "") == (c.MetricsAddr == ""):
		return cli.Usage(errors.New("say where the mapping's progress is: --lease-table (with --stream) for a fleet, or --metrics-addr of the esm run that keeps it in its --state-dir"))
	case c.MetricsAddr != "":
		res, err := c.viaWorker(ctx, q)
		if err != nil {
			return err
		}
		return c.print(e, res)
	case c.Stream == "":
		return cli.Usage(errors.New("--lease-table needs --stream: the mapping's stream"))
	}
	cfg, err := runner.AWSConfig(ctx, c.Region, c.EndpointURL)
	if err != nil {
		return err
	}
	kin := kinesis.NewFromConfig(cfg)
	arn, err := kinesissrc.ResolveStreamARN(ctx, kin, c.Stream)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(e.stderr, nil))
	res, err := runner.Rewind(ctx, kin, dynamodb.NewFromConfig(cfg), arn, c.LeaseTable, q, now, lease.RewindOptions{
		By: asker(), Wait: c.Wait, LeaseDuration: c.LeaseDuration, Log: log,
	})
	if err != nil {
		return err
	}
	return c.print(e, res)
}

// print prints the rewind applied.
func (c *rewindCmd) print(e env, res runner.RewindOutcome) error {
	if c.JSON {
		return json.NewEncoder(e.stdout).Encode(map[string]any{"revision": res.Revision, "rewound": res.Rewound, "reset": res.Reset,
			"stoppedAfter": res.Stopped.String(), "trimmed": res.Trimmed})
	}
	_, err := fmt.Fprintf(e.stdout, "rewind %d applied after the workers stopped (%s): rewound %s; waiting for them again: %s\n",
		res.Revision, res.Stopped.Round(time.Millisecond), strings.Join(res.Rewound, " "), cmpOr(strings.Join(res.Reset, " "), "none"))
	return err
}

// viaWorker asks the esm run at --metrics-addr to apply q to its own store.
func (c *rewindCmd) viaWorker(ctx context.Context, q poller.RewindRequest) (runner.RewindOutcome, error) {
	in := esmapi.RewindInput{Shards: q.Shards, SequenceNumbers: q.Sequences}
	rfc := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	switch {
	case !q.Until.IsZero():
		in.From, in.Until = rfc(q.Timestamp), rfc(q.Until)
	case !q.Timestamp.IsZero():
		in.ToTimestamp = rfc(q.Timestamp)
	}
	body, _ := json.Marshal(in)
	ctx, cancel := context.WithTimeout(ctx, c.Wait+time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+c.MetricsAddr+esmapi.WorkerRewindPath, bytes.NewReader(body))
	if err != nil {
		return runner.RewindOutcome{}, cli.Usage(fmt.Errorf("--metrics-addr %q: %w", c.MetricsAddr, err))
	}
	req.Header.Set("Content-Type", "application/json")
	out, ref, err := post[esmapi.RewindOutput](req)
	if err != nil {
		return runner.RewindOutcome{}, fmt.Errorf("worker %s: %w", c.MetricsAddr, err)
	}
	if err := refused(ref, "rewind", c.MetricsAddr); err != nil {
		return runner.RewindOutcome{}, err
	}
	res := runner.RewindOutcome{Trimmed: out.Trimmed}
	res.Revision, res.Rewound, res.Reset = out.Revision, out.Rewound, out.Reset
	res.Stopped = time.Duration(out.StoppedAfterMillis) * time.Millisecond
	return res, nil
}

func cmpOr(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// asker names who asked for a rewind, for the request and the workers' logs.
func asker() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}
