package cli

import (
	"time"

	"github.com/kinesis-esm/esm/poller"
)

// AWSFlags say where the AWS calls go. The commands that read a template embed them through
// TemplateFlags; esm serve embeds them directly.
type AWSFlags struct {
	// EndpointURL is where every AWS call goes; it also makes AWS::AccountId the emulators' account.
	EndpointURL string `help:"Endpoint for every AWS service (a local emulator). Otherwise the SDK's AWS_ENDPOINT_URL_<SERVICE> variables apply." env:"ESM_ENDPOINT_URL" placeholder:"URL"`
	// Region is the AWS region (AWS::Region). Default: the SDK's (AWS_REGION, ~/.aws/config), else us-east-1.
	Region string `help:"AWS region (default: from the AWS environment, else us-east-1)." env:"ESM_REGION"`
}

// PollFlags are the pollers' cadence and graceful stop, the same for esm run and esm serve. A
// zero PollGrid leaves the poller's default, which follows PollInterval.
type PollFlags struct {
	PollInterval      time.Duration `help:"Pause between polls of a caught-up shard." default:"1s" env:"ESM_POLL_INTERVAL"`
	PollGrid          time.Duration `help:"Polls of caught-up shards start on multiples of this, so that the process wakes once for many shards (default 50ms, or --poll-interval when shorter; at most --poll-interval)." env:"ESM_POLL_GRID"`
	ShardSyncInterval time.Duration `help:"How often to list shards to find new ones." default:"60s" env:"ESM_SHARD_SYNC_INTERVAL"`
	ShutdownGrace     time.Duration `help:"How long a stop (with esm serve, also an update) waits for in-flight invocations." default:"30s" env:"ESM_SHUTDOWN_GRACE"`
	// SDKGetRecords reads with the SDK's own GetRecords (source/kinesis.WithSDKGetRecords).
	SDKGetRecords bool `name:"sdk-getrecords" help:"Read shards with the AWS SDK's own GetRecords instead of esm's lean path (rules the lean path out when in doubt; costs CPU with many idle shards)." env:"ESM_SDK_GETRECORDS"`
}

// base is the poller configuration the flags set.
func (f PollFlags) base() poller.Config {
	return poller.Config{PollInterval: f.PollInterval, PollGrid: f.PollGrid, ShardSyncInterval: f.ShardSyncInterval, ShutdownGrace: f.ShutdownGrace}
}
