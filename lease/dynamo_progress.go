package lease

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/kinesis-esm/esm/poller"
)

// ShardProgress reads a shard's progress from its lease item, whoever holds it, with a strongly
// consistent read (poller.ProgressReader: esm run --until-caught-up judges the shards the other
// workers read by their checkpoints). found is false when the table has no lease for the shard.
// It changes nothing of what this worker knows of the table (the placement's view is its own).
func (d *Dynamo) ShardProgress(ctx context.Context, shardID string) (pr poller.ShardProgress, found bool, err error) {
	out, err := d.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: &d.table, Key: key(shardID), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return pr, false, fmt.Errorf("read the lease of %s: %w", shardID, err)
	}
	if len(out.Item) == 0 {
		return pr, false, nil
	}
	l, err := decodeLease(out.Item)
	if err != nil {
		return pr, false, fmt.Errorf("read the lease of %s: %w", shardID, err)
	}
	return l.Progress, true, nil
}
