package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/kinesis-esm/esm/example"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/verify"
)

// poisonKey is the key of the poison change.
const poisonKey = "poison-key"

// produce makes total changes, 20 every 200 ms (so that shards rotate while they flow), with one
// poison change half-way through, printing progress every second. It returns the poison
// change's sequence number.
func (d *ddbDemo) produce(ctx context.Context, total int) (string, error) {
	say("writing %d changes over %d keys (PutItem, UpdateItem, DeleteItem, BatchWriteItem, TransactWriteItems), plus one poison change", total, d.p.Keys)
	last := time.Now()
	for n := 0; n < total; n += 20 {
		if err := d.p.Write(ctx, d.ddb, min(20, total-n)); err != nil {
			return "", err
		}
		if n <= total/2 && total/2 < n+20 {
			if _, err := d.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(ddbTable), Item: map[string]types.AttributeValue{
				"k": &types.AttributeValueMemberS{Value: poisonKey}, "v": &types.AttributeValueMemberS{Value: poison}}}); err != nil {
				return "", err
			}
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case err := <-d.exited:
			tail, _ := os.ReadFile(d.logPath)
			return "", fmt.Errorf("esm exited early (%v); its log:\n%s", err, tail)
		case <-ctx.Done():
			return "", ctx.Err()
		}
		if time.Since(last) >= time.Second {
			d.progress(ctx)
			last = time.Now()
		}
	}
	return d.findPoison(ctx)
}

// progress prints one line: written, delivered, and the shards, saying when one rotated.
func (d *ddbDemo) progress(ctx context.Context) {
	ds, _ := verify.ReadDDBDeliveries(d.out)
	shards, err := verify.ListDDBShards(ctx, d.st, d.streamARN)
	if err != nil {
		return
	}
	for _, s := range shards[min(d.shards, len(shards)):] {
		if s.Parent != "" {
			say("shard %s closed; its child %s takes over (esm reads it once the parent is drained)", s.Parent, s.ID)
		}
	}
	d.shards = len(shards)
	fmt.Printf("    written %4d  delivered %4d  shards %d\n", d.p.Total(), len(ds), len(shards))
}

// findPoison reads the stream from its roots for the poison change's sequence number.
func (d *ddbDemo) findPoison(ctx context.Context) (string, error) {
	shards, err := verify.ListDDBShards(ctx, d.st, d.streamARN)
	if err != nil {
		return "", err
	}
	for _, s := range shards {
		it, err := d.st.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(d.streamARN),
			ShardId: aws.String(s.ID), ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			return "", err
		}
		for next := it.ShardIterator; next != nil; {
			out, err := d.st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: next})
			if err != nil {
				return "", err
			}
			for _, r := range out.Records {
				if k, ok := r.Dynamodb.Keys["k"].(*streamtypes.AttributeValueMemberS); ok && k.Value == poisonKey {
					return aws.ToString(r.Dynamodb.SequenceNumber), nil
				}
			}
			if next = out.NextShardIterator; len(out.Records) == 0 {
				break // an open shard's end
			}
		}
	}
	return "", fmt.Errorf("the poison change is not in the stream %s", d.streamARN)
}

// await waits until every change was delivered and the on-failure queue holds a message,
// printing progress every second.
func (d *ddbDemo) await(ctx context.Context) (got []example.DDBDelivery, failures []string, err error) {
	for {
		if got, err = verify.ReadDDBDeliveries(d.out); err != nil {
			return nil, nil, err
		}
		if len(failures) == 0 {
			if failures, err = local.ReceiveAll(ctx, d.sqs, d.queueURL); err != nil {
				return nil, nil, err
			}
		}
		all := verify.DDBRecords(verify.DDBEventRecords(got), d.p.Want)[0]
		if all.OK && len(failures) > 0 {
			return got, failures, nil
		}
		select {
		case <-time.After(time.Second):
			d.progress(ctx)
		case err := <-d.exited:
			tail, _ := os.ReadFile(d.logPath)
			return nil, nil, fmt.Errorf("esm exited early (%v); its log:\n%s", err, tail)
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("%s; %d failure messages, before the time limit", all.Detail, len(failures))
		}
	}
}

// report prints the lineage with each shard's deliveries, the on-failure messages and the
// checks, and fails unless every check passed.
func (d *ddbDemo) report(ctx context.Context, got []example.DDBDelivery, failures []string, poisonSeq string) error {
	shards, err := verify.ListDDBShards(ctx, d.st, d.streamARN)
	if err != nil {
		return err
	}
	per := map[string]int{}
	for _, dl := range got {
		per[verify.DDBShardOf(shards, dl.Record.Change.SequenceNumber)]++
	}
	fmt.Println("\nshard lineage (changes delivered):")
	for _, s := range shards {
		from := ""
		if s.Parent != "" {
			from = " ← " + s.Parent
		}
		fmt.Printf("  %s%s: %d\n", s.ID, from, per[s.ID])
	}
	fmt.Println("\non-failure queue:")
	for _, f := range failures {
		fmt.Printf("  %s\n", f)
	}
	fmt.Println("\nchecks:")
	checks := verify.DDBRecords(verify.DDBEventRecords(got), d.p.Want)
	lin, _ := verify.DDBLineage(got, shards)
	checks = append(checks, lin,
		verify.Check{Name: "shards rotated while changes flowed", OK: len(shards) >= 3, Detail: fmt.Sprintf("%d rotations", len(shards)-1)},
		checkDDBPoison(failures, got, poisonSeq))
	return printChecks(checks, d.begin)
}

// checkDDBPoison: the poison change was never handled, and exactly one failure message names it
// alone (bisection isolated it from its batch) in DDBStreamBatchInfo.
func checkDDBPoison(failures []string, got []example.DDBDelivery, seq string) verify.Check {
	const name = "poison change bisected into the SQS queue"
	for _, d := range got {
		if d.Record.Change.SequenceNumber == seq {
			return verify.Check{Name: name, Detail: "the poison change was delivered as handled"}
		}
	}
	if len(failures) == 1 && !strings.Contains(failures[0], `"DDBStreamBatchInfo"`) {
		return verify.Check{Name: name, Detail: "the message has no DDBStreamBatchInfo"}
	}
	return checkIsolated(name, failures, seq)
}
