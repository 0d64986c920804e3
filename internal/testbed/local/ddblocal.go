package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
)

// DDBLocalOptions configures [StartDDBLocal]. Only Binary is required.
type DDBLocalOptions struct {
	// Binary is the ddb-local executable (fake/cmd/ddb-local; testenv.BuildDDBLocal builds it).
	Binary string
	// Port is the HTTP port on 127.0.0.1. Default: a free port.
	Port int
	// Rotate is how long a stream shard stays open before its child takes over. Default: the
	// command's own (four hours).
	Rotate time.Duration
	// Retention is how long stream records stay readable. Default: the command's (24 h).
	Retention time.Duration
	// IteratorTTL is how long a shard iterator stays valid. Default: the command's (15 min).
	IteratorTTL time.Duration
	// Shards is how many shards of a stream are open at once. Default 1.
	Shards int
	// LogWriter receives the command's output. Default: discarded (the last few KiB still
	// appear in start errors).
	LogWriter io.Writer
}

// StartDDBLocal starts ddb-local, esm's local DynamoDB with DynamoDB Streams (both APIs on one
// endpoint), on 127.0.0.1 and blocks until it accepts connections. ctx, and a 30 s limit, bound
// only the start: it runs until [Process.Stop]. Its state is in memory only. With an
// automatically chosen port, a start that loses a race for the port is retried with a new one.
func StartDDBLocal(ctx context.Context, opts DDBLocalOptions) (*Process, error) {
	if opts.Binary == "" {
		return nil, errors.New("start ddb-local: no binary given")
	}
	dir, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	var flags []string
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"-rotate", opts.Rotate}, {"-retention", opts.Retention}, {"-iterator-ttl", opts.IteratorTTL}} {
		if f.d != 0 {
			flags = append(flags, f.name, f.d.String())
		}
	}
	if opts.Shards != 0 {
		flags = append(flags, "-shards", strconv.Itoa(opts.Shards))
	}
	return onePort(opts.Port, func(port int) (*Process, error) {
		return launch(ctx, launchSpec{
			name: "ddb-local", node: opts.Binary, dir: dir,
			args: append([]string{"-host", "127.0.0.1", "-port", strconv.Itoa(port), "-region", DefaultRegion, "-account", DefaultAccountID}, flags...),
			port: port, log: opts.LogWriter,
		})
	})
}

// DDBClients are a DynamoDB and a DynamoDB Streams client of one endpoint (ddb-local serves both).
func DDBClients(cfg aws.Config, endpoint string) (*dynamodb.Client, *dynamodbstreams.Client) {
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) }),
		dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

// TableCreator is what CreateStreamTable needs: a DynamoDB client (or the in-memory DynamoDB).
type TableCreator interface {
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
}

// CreateStreamTable creates a pay-per-request table whose hash key is "k" (S), with a stream of
// the view type given, and returns the stream's ARN.
func CreateStreamTable(ctx context.Context, c TableCreator, name string, view ddbtypes.StreamViewType) (string, error) {
	out, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(name), BillingMode: ddbtypes.BillingModePayPerRequest,
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("k"), KeyType: ddbtypes.KeyTypeHash}},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("k"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		StreamSpecification:  &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: view},
	})
	if err != nil {
		return "", fmt.Errorf("create table %s: %w", name, err)
	}
	return aws.ToString(out.TableDescription.LatestStreamArn), nil
}
