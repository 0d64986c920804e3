package local

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// listShards returns every shard of the stream (open and closed), following pages.
func listShards(ctx context.Context, c *kinesis.Client, stream string) ([]types.Shard, error) {
	var all []types.Shard
	in := &kinesis.ListShardsInput{StreamName: aws.String(stream)}
	for {
		out, err := c.ListShards(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("list shards of %s: %w", stream, err)
		}
		all = append(all, out.Shards...)
		if out.NextToken == nil {
			return all, nil
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

// OpenShards lists the stream's open shards (no ending sequence number), by starting hash key.
func OpenShards(ctx context.Context, c *kinesis.Client, stream string) ([]types.Shard, error) {
	all, err := listShards(ctx, c, stream)
	if err != nil {
		return nil, err
	}
	var open []types.Shard
	for _, s := range all {
		if s.SequenceNumberRange == nil || s.SequenceNumberRange.EndingSequenceNumber == nil {
			open = append(open, s)
		}
	}
	slices.SortFunc(open, func(a, b types.Shard) int {
		return hashKey(a.HashKeyRange.StartingHashKey).Cmp(hashKey(b.HashKeyRange.StartingHashKey))
	})
	return open, nil
}

func hashKey(s *string) *big.Int {
	n, _ := new(big.Int).SetString(aws.ToString(s), 10)
	if n == nil {
		n = new(big.Int)
	}
	return n
}

// SplitInHalf splits an open shard at the middle of its hash range and waits until the stream is
// active again.
func SplitInHalf(ctx context.Context, c *kinesis.Client, stream, shardID string) error {
	open, err := OpenShards(ctx, c, stream)
	if err != nil {
		return err
	}
	for _, s := range open {
		if aws.ToString(s.ShardId) != shardID {
			continue
		}
		lo, hi := hashKey(s.HashKeyRange.StartingHashKey), hashKey(s.HashKeyRange.EndingHashKey)
		mid := new(big.Int).Add(lo, hi)
		mid.Rsh(mid, 1).Add(mid, big.NewInt(1))
		if _, err := c.SplitShard(ctx, &kinesis.SplitShardInput{StreamName: aws.String(stream), ShardToSplit: aws.String(shardID), NewStartingHashKey: aws.String(mid.String())}); err != nil {
			return fmt.Errorf("split %s: %w", shardID, err)
		}
		return WaitActive(ctx, c, stream)
	}
	return fmt.Errorf("split %s: not an open shard of %s", shardID, stream)
}

// MergeFirstAdjacent merges the first two open shards whose hash ranges touch, waits until the
// stream is active again, and returns the two parents.
func MergeFirstAdjacent(ctx context.Context, c *kinesis.Client, stream string) (a, b string, err error) {
	open, err := OpenShards(ctx, c, stream)
	if err != nil {
		return "", "", err
	}
	for i := 0; i+1 < len(open); i++ {
		end := hashKey(open[i].HashKeyRange.EndingHashKey)
		if end.Add(end, big.NewInt(1)).Cmp(hashKey(open[i+1].HashKeyRange.StartingHashKey)) != 0 {
			continue
		}
		a, b = aws.ToString(open[i].ShardId), aws.ToString(open[i+1].ShardId)
		if _, err := c.MergeShards(ctx, &kinesis.MergeShardsInput{StreamName: aws.String(stream), ShardToMerge: aws.String(a), AdjacentShardToMerge: aws.String(b)}); err != nil {
			return "", "", fmt.Errorf("merge %s and %s: %w", a, b, err)
		}
		return a, b, WaitActive(ctx, c, stream)
	}
	return "", "", errors.New("no two adjacent open shards to merge")
}

// Resize sets the number of open shards with UpdateShardCount (uniform scaling) and waits until
// the stream is active again.
func Resize(ctx context.Context, c *kinesis.Client, stream string, shards int32) error {
	if _, err := c.UpdateShardCount(ctx, &kinesis.UpdateShardCountInput{StreamName: aws.String(stream), TargetShardCount: aws.Int32(shards), ScalingType: types.ScalingTypeUniformScaling}); err != nil {
		return fmt.Errorf("update shard count of %s to %d: %w", stream, shards, err)
	}
	return WaitActive(ctx, c, stream)
}

// Lineage returns every shard of the stream (open and closed) with its parents.
func Lineage(ctx context.Context, c *kinesis.Client, stream string) (map[string][]string, error) {
	all, err := listShards(ctx, c, stream)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]string, len(all))
	for _, s := range all {
		var ps []string
		for _, p := range []*string{s.ParentShardId, s.AdjacentParentShardId} {
			if p != nil && *p != "" {
				ps = append(ps, *p)
			}
		}
		out[aws.ToString(s.ShardId)] = ps
	}
	return out, nil
}
