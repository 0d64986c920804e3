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

// PollFlags are the pollers' cadence and graceful stop, the same for esm run and esm serve.
type PollFlags struct {
	PollInterval      time.Duration `help:"Pause between polls of a caught-up shard." default:"1s" env:"ESM_POLL_INTERVAL"`
	ShardSyncInterval time.Duration `help:"How often to list shards to find new ones." default:"60s" env:"ESM_SHARD_SYNC_INTERVAL"`
	ShutdownGrace     time.Duration `help:"How long a stop (with esm serve, also an update) waits for in-flight invocations." default:"30s" env:"ESM_SHUTDOWN_GRACE"`
}

// base is the poller configuration the flags set.
func (f PollFlags) base() poller.Config {
	return poller.Config{PollInterval: f.PollInterval, ShardSyncInterval: f.ShardSyncInterval, ShutdownGrace: f.ShutdownGrace}
}
