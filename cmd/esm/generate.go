package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/internal/cli"
	"github.com/kinesis-esm/esm/poller"
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

// run prints the event a batch of these records would be, as one line of JSON.
func (g *generateCmd) run(ctx context.Context, e env) error {
	if len(g.PartitionKey) > 1 && len(g.PartitionKey) != len(g.Data) {
		return cli.Usage(fmt.Errorf("--partition-key given %d times for %d records: give one for all, or one per --data", len(g.PartitionKey), len(g.Data)))
	}
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
			streamARN, role = m.EventSourceArn, m.Function.Role
		}
	}
	sa, err := poller.ParseStreamARN(streamARN)
	if err != nil {
		return cli.Usage(fmt.Errorf("--stream-arn: %w", err))
	}
	if role == "" { // the poller's default invokeIdentityArn
		role = fmt.Sprintf("arn:%s:iam::%s:role/esm", sa.Partition, sa.Account)
	}
	arrival := time.Now()
	if g.ArrivalTime != "" {
		if arrival, err = cli.ParseTimestamp(g.ArrivalTime); err != nil {
			return cli.Usage(fmt.Errorf("--arrival-time: %w", err))
		}
	}
	ev := events.KinesisEvent{Records: make([]events.KinesisEventRecord, 0, len(g.Data))}
	for i, d := range g.Data {
		data := []byte(d)
		if path, ok := strings.CutPrefix(d, "@"); ok {
			if data, err = os.ReadFile(path); err != nil {
				return cli.Usage(fmt.Errorf("--data: %w", err))
			}
		}
		key := fmt.Sprintf("partitionKey-%d", i)
		switch len(g.PartitionKey) {
		case 1:
			key = g.PartitionKey[0]
		case len(g.Data):
			key = g.PartitionKey[i]
		}
		seq := fmt.Sprintf("%s%04d", firstSequence, i)
		ev.Records = append(ev.Records, events.KinesisEventRecord{
			AwsRegion:         sa.Region,
			EventID:           g.ShardID + ":" + seq,
			EventName:         "aws:kinesis:record",
			EventSource:       "aws:kinesis",
			EventSourceArn:    sa.String(),
			EventVersion:      "1.0",
			InvokeIdentityArn: role,
			Kinesis: events.KinesisRecord{
				ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: arrival},
				Data:                        data,
				PartitionKey:                key,
				SequenceNumber:              seq,
				KinesisSchemaVersion:        "1.0",
			},
		})
	}
	// TODO(lead): render with poller.EncodeEvent once it is exported, for the field order of
	// AWS's recording; the values are already what aws-lambda-go marshals.
	b, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	if _, err := fmt.Fprintf(e.stdout, "%s\n", b); err != nil {
		return fmt.Errorf("write event: %w", err)
	}
	return nil
}
