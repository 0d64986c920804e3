package service

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/invoke/execenv"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
)

// DefaultWorkerID is a worker id unique on this host: hostname-pid.
func DefaultWorkerID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", cmp.Or(host, "esm"), os.Getpid())
}

// invocationBound is how long an invocation this worker starts may run, from the moment the
// poller starts it: the function timeout, plus, for an invoker outside this process (exec:,
// HTTP, lambda:), the 10 s init phase Lambda allows before it (an environment's init, an
// endpoint's cold start, which httpinvoke's deadline allows too), or, in-process, the wait for a
// handler that overran its timeout. The lease table's takers of a dead worker's leases wait for it.
func invocationBound(o Options) time.Duration {
	t := cmp.Or(o.FunctionTimeout, invoke.DefaultTimeout)
	if o.Invoker != nil {
		return t + execenv.InitTimeout
	}
	return t + inprocess.DefaultOverrunWait
}

// runShared runs the mapping as one worker of those sharing o.LeaseTable: progress lives in the
// lease table, and the Dynamo coordinator shares the shards. Its leases are renewed until the
// poller has stopped (its last batches and checkpoints need them), then released.
func runShared(ctx context.Context, o Options, cfg aws.Config, kin poller.KinesisAPI, checked poller.Checked, inv poller.Invoker, popts []poller.Option) error {
	mc := checked.Config()
	ddb := dynamodb.NewFromConfig(cfg, func(do *dynamodb.Options) {
		if o.EndpointURL != "" {
			do.BaseEndpoint = aws.String(o.EndpointURL)
		}
	})
	ddbStart := dynamodb.NewFromConfig(cfg, func(do *dynamodb.Options) {
		if o.EndpointURL != "" {
			do.BaseEndpoint = aws.String(o.EndpointURL)
		}
		do.RetryMaxAttempts = StartupAttempts
	})
	if err := lease.EnsureTable(ctx, ddbStart, o.LeaseTable, o.CreateLeaseTable); err != nil {
		return err
	}
	mid, err := mappingUUID(ctx, o, func(ctx context.Context) (string, error) { return lease.MappingUUID(ctx, ddbStart, o.LeaseTable) })
	if err != nil {
		return err
	}
	dopts, err := destinationOptions(o, cfg, mc, mid)
	if err != nil {
		return err
	}
	popts = append(popts, dopts...)
	id := cmp.Or(o.WorkerID, DefaultWorkerID())
	opts := []lease.Option{lease.WithLogger(o.Logger), lease.WithFunctionTimeout(invocationBound(o))}
	if o.LeaseDuration > 0 {
		opts = append(opts, lease.WithLeaseDuration(o.LeaseDuration))
	}
	d, err := lease.NewDynamo(ddb, o.LeaseTable, id, opts...)
	if err != nil {
		return err
	}
	if checked, err = checked.WithClaimIntervalDefault(d.ClaimInterval()); err != nil {
		return err
	}
	mc = checked.Config()
	p, err := poller.NewChecked(checked, kin, d, inv, append(popts, poller.WithCoordinator(d))...)
	if err != nil {
		return err
	}
	leaseCtx, stopLeases := context.WithCancel(context.WithoutCancel(ctx))
	renewed := make(chan error, 1)
	go func() { renewed <- d.Run(leaseCtx) }()
	o.Logger.Info("esm running", "stream", mc.StreamARN, "function", mc.FunctionARN, "lease_table", o.LeaseTable,
		"worker_id", id, "lease_duration", d.LeaseDuration(), "claim_interval", mc.ClaimInterval, "pid", os.Getpid())
	err = p.Run(ctx)
	stopLeases()
	if rerr := <-renewed; err == nil {
		err = rerr
	}
	return err
}
