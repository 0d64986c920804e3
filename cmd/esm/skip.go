package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/uuid"

	"github.com/kinesis-esm/esm/cmd/esm/internal/cli"
	"github.com/kinesis-esm/esm/esmapi"
	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/runner"
)

type skipCmd struct {
	Shard        string   `required:"" help:"The blocked shard whose batch to skip (esm status and the live page show the blocked shards)." env:"ESM_SHARD" placeholder:"SHARD_ID"`
	First        string   `help:"The blocked batch's first sequence number, as esm status shows it: the skip is refused if the shard retries another batch by then." env:"ESM_FIRST" placeholder:"SEQ"`
	Last         string   `help:"The blocked batch's last sequence number (see --first)." env:"ESM_LAST" placeholder:"SEQ"`
	MetricsAddr  []string `help:"A running esm run's --metrics-addr (on this host: the route answers loopback clients only). Repeat it, or separate by commas, for several workers: the one reading the shard does the skip." env:"ESM_METRICS_ADDR" sep:"," placeholder:"HOST:PORT"`
	LeaseTable   string   `help:"Ask every worker of this lease table, at the --metrics-addr each publishes there." env:"ESM_LEASE_TABLE"`
	APIURL       string   `name:"api-url" help:"A running esm serve's API (its --api-addr as a URL): the skip goes to the mapping --uuid names, signed with the AWS credentials of the environment." env:"ESM_API_URL" placeholder:"URL"`
	UUID         string   `help:"With --api-url: the mapping's UUID." env:"ESM_UUID"`
	JSON         bool     `help:"Print the skip as JSON." env:"ESM_JSON"`
	cli.AWSFlags `embed:""`
}

// skipWait bounds a skip's request: the worker waits for the invocation in flight (2 min).
const skipWait = 150 * time.Second

// run asks the worker that reads the shard to skip its blocked batch, and prints what happened.
func (s *skipCmd) run(ctx context.Context, e env) error {
	in := esmapi.SkipInput{ShardId: s.Shard, FirstSequenceNumber: s.First, LastSequenceNumber: s.Last}
	if ae := in.Validate(); ae != nil {
		return cli.Usage(fmt.Errorf("--shard/--first/--last: %s", ae.Message))
	}
	workers := len(s.MetricsAddr) > 0 || s.LeaseTable != ""
	switch {
	case s.APIURL != "" && workers:
		return cli.Usage(errors.New("give either --api-url (esm serve) or --metrics-addr/--lease-table (esm run workers), not both"))
	case s.APIURL != "" && s.UUID == "":
		return cli.Usage(errors.New("--api-url needs --uuid: the mapping whose shard to skip (aws lambda list-event-source-mappings lists them)"))
	case s.APIURL != "" && uuid.Validate(s.UUID) != nil:
		return cli.Usage(fmt.Errorf("--uuid %q is not a mapping's UUID", s.UUID))
	case s.APIURL == "" && !workers:
		return cli.Usage(errors.New("say where the mapping runs: --metrics-addr of esm run (or --lease-table of its fleet), or --api-url and --uuid of esm serve"))
	}
	body, _ := json.Marshal(in)
	ctx, cancel := context.WithTimeout(ctx, skipWait)
	defer cancel()
	var (
		out esmapi.SkipOutput
		err error
	)
	if s.APIURL != "" {
		out, err = s.viaAPI(ctx, body)
	} else {
		out, err = s.viaWorkers(ctx, body)
	}
	if err != nil {
		return err
	}
	return printSkip(e.stdout, out, s.JSON)
}

// printSkip prints the skip that happened.
func printSkip(w io.Writer, out esmapi.SkipOutput, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(out)
	}
	where := "sent to the on-failure destination " + out.Destination
	if out.Destination == "" {
		where = "dropped (the mapping has no on-failure destination)"
	}
	_, err := fmt.Fprintf(w, "skipped shard %s batch %s..%s (%d records, %d failed attempts): %s; the shard moves on\n",
		out.ShardId, out.FirstSequenceNumber, out.LastSequenceNumber, out.Records, out.FailedAttempts, where)
	return err
}

// viaAPI posts the skip to esm serve's route, signed.
func (s *skipCmd) viaAPI(ctx context.Context, body []byte) (esmapi.SkipOutput, error) {
	base, err := url.Parse(s.APIURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return esmapi.SkipOutput{}, cli.Usage(fmt.Errorf("--api-url %q is not an http(s) URL", s.APIURL))
	}
	cfg, err := runner.AWSConfig(ctx, s.Region, s.EndpointURL)
	if err != nil {
		return esmapi.SkipOutput{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base.String(), "/")+esmapi.SkipPath(s.UUID), bytes.NewReader(body))
	if err != nil {
		return esmapi.SkipOutput{}, cli.Usage(err)
	}
	req.Header.Set("Content-Type", "application/json")
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return esmapi.SkipOutput{}, fmt.Errorf("AWS credentials to sign the request: %w", err)
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), esmapi.SigningService, cfg.Region, time.Now()); err != nil {
		return esmapi.SkipOutput{}, fmt.Errorf("sign the request: %w", err)
	}
	out, ref, err := post[esmapi.SkipOutput](req)
	if err != nil {
		return out, fmt.Errorf("%s: %w", s.APIURL, err)
	}
	return out, refused(ref, "skip", s.APIURL)
}

// viaWorkers posts the skip to every worker's address in turn, until the one reading the shard
// answered.
func (s *skipCmd) viaWorkers(ctx context.Context, body []byte) (esmapi.SkipOutput, error) {
	addrs := append([]string(nil), s.MetricsAddr...)
	if s.LeaseTable != "" {
		cfg, err := runner.AWSConfig(ctx, s.Region, s.EndpointURL)
		if err != nil {
			return esmapi.SkipOutput{}, err
		}
		ws, err := lease.NewWorkerReader(dynamodb.NewFromConfig(cfg), s.LeaseTable).Workers(ctx)
		if err != nil {
			return esmapi.SkipOutput{}, err
		}
		for _, w := range ws {
			if w.Addr != "" {
				addrs = append(addrs, w.Addr)
			}
		}
	}
	var notHere []string
	for _, a := range addrs {
		a = strings.TrimSpace(a)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+a+esmapi.WorkerSkipPath, bytes.NewReader(body))
		if err != nil {
			return esmapi.SkipOutput{}, cli.Usage(fmt.Errorf("--metrics-addr %q: %w", a, err))
		}
		req.Header.Set("Content-Type", "application/json")
		out, ref, err := post[esmapi.SkipOutput](req)
		switch {
		case err != nil:
			return out, fmt.Errorf("worker %s: %w", a, err)
		case ref != nil && ref.status == http.StatusNotFound:
			notHere = append(notHere, a)
			continue
		}
		return out, refused(ref, "skip", a)
	}
	if len(addrs) == 0 {
		return esmapi.SkipOutput{}, cli.Usage(fmt.Errorf("lease table %s lists no worker with a --metrics-addr: pass --metrics-addr", s.LeaseTable))
	}
	return esmapi.SkipOutput{}, cli.Usage(fmt.Errorf("no worker asked (%s) reads shard %s: it is pending on its parents, finished, or read by a worker not asked; esm status shows its state and owner", strings.Join(notHere, ", "), s.Shard))
}

// refusal is a route's error answer: its status and message.
type refusal struct {
	status int
	msg    string
}

// post sends req and decodes its answer: out for 200, else the refusal; err when the request
// itself failed.
func post[T any](req *http.Request) (out T, ref *refusal, err error) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return out, nil, err
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, &out); err != nil {
			return out, nil, fmt.Errorf("unreadable answer: %w", err)
		}
		return out, nil, nil
	}
	var e struct {
		Lower string `json:"message"`
		Upper string `json:"Message"`
	}
	_ = json.Unmarshal(raw, &e)
	msg := e.Lower + e.Upper
	if msg == "" {
		msg = strings.TrimSpace(string(raw))
	}
	return out, &refusal{status: resp.StatusCode, msg: fmt.Sprintf("%s (%s)", msg, resp.Header.Get("x-amzn-ErrorType"))}, nil
}

// refused is the command's error for ref from where: the request's fault (4xx) is a usage
// error (exit 2), anything else a runtime failure; nil for none.
func refused(ref *refusal, tool, where string) error {
	switch {
	case ref == nil:
		return nil
	case ref.status >= 400 && ref.status < 500:
		return cli.Usage(fmt.Errorf("%s refused by %s: %s", tool, where, ref.msg))
	}
	return fmt.Errorf("%s at %s failed: %s", tool, where, ref.msg)
}
