package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/kinesis-esm/esm/cmd/esm/internal/cli"
	"github.com/kinesis-esm/esm/poller"
	esmsource "github.com/kinesis-esm/esm/source"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

type generateCmd struct {
	cli.TemplateFlags `embed:""`
	Data              []string `help:"Data of a record (repeatable, one record each; @FILE reads the file)." required:"" sep:"none" env:"ESM_DATA" placeholder:"DATA"`
	PartitionKey      []string `help:"Partition key: one for every record, or one per --data (default partitionKey-<n>)." sep:"none" env:"ESM_PARTITION_KEY" placeholder:"KEY"`
	StreamARN         string   `name:"stream-arn" help:"Stream ARN of the records (default: the template mapping's, else arn:aws:kinesis:us-east-1:123456789012:stream/example)." env:"ESM_STREAM_ARN"`
	ShardID           string   `help:"Shard the records come from." default:"shardId-000000000000" env:"ESM_SHARD_ID"`
	ArrivalTime       string   `help:"Approximate arrival time of the records: RFC 3339 or Unix seconds (default: now)." env:"ESM_ARRIVAL_TIME"`
}

// firstSequence is a Kinesis-shaped sequence number (56 digits); records get consecutive ones.
const firstSequence = "4959033827149025660855969253836157109592157598913658"

// run prints the event a batch of these records would be, as one line of JSON: the bytes the
// poller would invoke the function with (poller.BatchEncoder).
func (g *generateCmd) run(ctx context.Context, e env) error {
	if len(g.PartitionKey) > 1 && len(g.PartitionKey) != len(g.Data) {
		return cli.Usage(fmt.Errorf("--partition-key given %d times for %d records: give one for all, or one per --data", len(g.PartitionKey), len(g.Data)))
	}
	cfg := poller.Config{BatchSize: max(len(g.Data), 1)}
	streamARN, role := g.StreamARN, ""
	if streamARN == "" {
		streamARN = "arn:aws:kinesis:us-east-1:123456789012:stream/example"
		res, err := g.Resolve(ctx, false)
		if err != nil {
			return err
		}
		if res.Template != nil {
			m, err := res.Template.Select(g.Function)
			if err != nil {
				return err
			}
			streamARN, role = m.EventSourceArn, m.Function.Role // "": the source's default
		}
	}
	if _, err := kinesissrc.ParseStreamARN(streamARN); err != nil {
		return cli.Usage(fmt.Errorf("--stream-arn: %w", err))
	}
	stream, err := kinesissrc.New(nil, streamARN, kinesissrc.WithInvokeIdentity(role))
	if err != nil {
		return cli.Usage(fmt.Errorf("--stream-arn: %w", err))
	}
	arrival := time.Now()
	if g.ArrivalTime != "" {
		var err error
		if arrival, err = cli.ParseTimestamp(g.ArrivalTime); err != nil {
			return cli.Usage(fmt.Errorf("--arrival-time: %w", err))
		}
	}
	recs := make([]esmsource.Record, 0, len(g.Data))
	for i, d := range g.Data {
		data := []byte(d)
		if path, ok := strings.CutPrefix(d, "@"); ok {
			var err error
			if data, err = os.ReadFile(path); err != nil {
				return cli.Usage(fmt.Errorf("--data: %w", err))
			}
		}
		key := fmt.Sprintf("partitionKey-%d", i)
		if n := len(g.PartitionKey); n > 0 { // one for all, or one each
			key = g.PartitionKey[min(i, n-1)]
		}
		recs = append(recs, esmsource.Record{Data: data, PartitionKey: key,
			SequenceNumber: fmt.Sprintf("%s%04d", firstSequence, i), ArrivalTime: arrival})
	}
	enc, err := poller.NewBatchEncoder(stream, cfg)
	if err != nil {
		return cli.Usage(fmt.Errorf("--data: %w", err))
	}
	payload, n := enc.Next(g.ShardID, recs)
	if n < len(recs) || len(payload) > poller.MaxPayloadBytes {
		return cli.Usage(fmt.Errorf("--data: the records make an event of more than %d bytes, more than one invocation takes", poller.MaxPayloadBytes))
	}
	if _, err := fmt.Fprintf(e.stdout, "%s\n", payload); err != nil {
		return fmt.Errorf("write event: %w", err)
	}
	return nil
}
