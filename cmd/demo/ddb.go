package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testenv"
	"github.com/kinesis-esm/esm/internal/testbed/verify"
)

const (
	ddbTable = "demo-orders"
	// ddbRotate is how often ddb-local closes a shard and opens its child (AWS: about every four
	// hours).
	ddbRotate = 4 * time.Second
)

// ddbDemo is one run of the DynamoDB Streams story.
type ddbDemo struct {
	begin     time.Time
	work      string
	ddb       *dynamodb.Client
	st        *dynamodbstreams.Client
	sqs       *sqs.Client
	queueURL  string
	streamARN string
	out       string // the example function's deliveries (JSON lines)
	logPath   string
	esm       *exec.Cmd
	exited    chan error
	p         *verify.DDBProducer
	shards    int // shards seen at the last progress line
}

// runDDB tells the DynamoDB Streams story: a table with NEW_AND_OLD_IMAGES on ddb-local whose
// shards rotate every few seconds, writes of every kind over keys, a poison change, esm running
// the example function for DynamoDB streams with exec:, rotations seen while records flow, the
// poison change bisected to the SQS queue, and the checks. It returns an error unless every check
// passed.
func runDDB(ctx context.Context, esmBin string, total, keys int) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	d := &ddbDemo{begin: time.Now(), p: verify.NewDDBProducer(ddbTable, keys, 7)}
	work, err := os.MkdirTemp("", "esm-demo-ddb-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	d.work = work
	say("building ddb-local (esm's local DynamoDB with DynamoDB Streams) and the example function for DynamoDB streams")
	bin, err := testenv.BuildDDBLocal(ctx, work, "")
	if err != nil {
		return err
	}
	boot := filepath.Join(work, "bootstrap")
	if err := testenv.BuildBootstrap(ctx, "", boot, "github.com/kinesis-esm/esm/example/ddbbootstrap", ""); err != nil {
		return err
	}
	emu, err := local.StartDDBLocal(ctx, local.DDBLocalOptions{Binary: bin, Rotate: ddbRotate})
	if err != nil {
		return err
	}
	defer func() { _ = emu.Stop() }()
	sqsSrv, err := local.StartSQS()
	if err != nil {
		return err
	}
	defer sqsSrv.Close()
	say("ddb-local at %s (shards rotate every %s), SQS (goaws, in-process) at %s — 127.0.0.1 only", emu.Endpoint(), ddbRotate, sqsSrv.Endpoint())
	if err := d.createResources(ctx, emu.Endpoint(), sqsSrv.Endpoint()); err != nil {
		return err
	}
	stopESM, err := d.startESM(esmBin, boot, emu.Endpoint(), sqsSrv.Endpoint())
	if err != nil {
		return err
	}
	defer stopESM()
	poisonSeq, err := d.produce(ctx, total)
	if err != nil {
		return err
	}
	say("writes done; waiting for esm to deliver every change and send the poison change to the queue")
	got, failures, err := d.await(ctx)
	if err != nil {
		return err
	}
	_ = d.esm.Process.Signal(syscall.SIGTERM)
	if err := <-d.exited; err != nil {
		return fmt.Errorf("esm did not stop cleanly: %w", err)
	}
	say("esm stopped on SIGTERM (exit 0)")
	return d.report(ctx, got, failures, poisonSeq)
}

// createResources makes the clients, the table with its stream and the on-failure queue.
func (d *ddbDemo) createResources(ctx context.Context, ddbURL, sqsURL string) error {
	cfg, err := local.AWSConfig(ctx, "us-east-1")
	if err != nil {
		return err
	}
	d.ddb, d.st = local.DDBClients(cfg, ddbURL)
	d.sqs = local.NewSQSClient(cfg, sqsURL)
	if d.streamARN, err = local.CreateStreamTable(ctx, d.ddb, ddbTable, types.StreamViewTypeNewAndOldImages); err != nil {
		return err
	}
	if d.queueURL, _, err = local.CreateQueue(ctx, d.sqs, queue); err != nil {
		return err
	}
	say("created table %s with a NEW_AND_OLD_IMAGES stream (%s) and on-failure queue %s", ddbTable, d.streamARN, queue)
	return nil
}

// startESM writes the template and starts the esm binary on it, with the example function
// failing every batch that holds the poison change. The returned function kills esm if it is
// still running.
func (d *ddbDemo) startESM(esmBin, boot, ddbURL, sqsURL string) (stop func(), err error) {
	tmpl := filepath.Join(d.work, "template.yaml")
	if err := os.WriteFile(tmpl, []byte(demoTemplate("DynamoDB", d.streamARN)), 0o644); err != nil {
		return nil, err
	}
	d.out = filepath.Join(d.work, "deliveries.jsonl")
	d.logPath = filepath.Join(d.work, "esm.log")
	logFile, err := os.Create(d.logPath)
	if err != nil {
		return nil, err
	}
	d.esm = exec.Command(esmBin, "run", "--invoke", "exec:"+boot, "--template", tmpl, "--sqs-protocol", "query",
		"--state-dir", filepath.Join(d.work, "state"), "--function-env-pass", "EXAMPLE_OUTPUT,EXAMPLE_DELAY,EXAMPLE_FAIL,EXAMPLE_FAIL_MATCH")
	d.esm.Env = append(os.Environ(),
		"AWS_ENDPOINT_URL_DYNAMODB="+ddbURL, "AWS_ENDPOINT_URL_DYNAMODB_STREAMS="+ddbURL, "AWS_ENDPOINT_URL_SQS="+sqsURL,
		"AWS_ACCESS_KEY_ID=AKIDLOCAL", "AWS_SECRET_ACCESS_KEY=local", "AWS_REGION=us-east-1",
		"EXAMPLE_OUTPUT="+d.out, "EXAMPLE_DELAY=10ms", "EXAMPLE_FAIL=error", "EXAMPLE_FAIL_MATCH="+poison)
	d.esm.Stdout, d.esm.Stderr = logFile, logFile
	if err := d.esm.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s (make demo-ddb builds it): %w", esmBin, err)
	}
	d.exited = make(chan error, 1)
	go func() { d.exited <- d.esm.Wait() }()
	say("esm running (pid %d): the example function for DynamoDB streams as exec:, BisectBatchOnFunctionError, MaximumRetryAttempts 2, SQS on-failure queue", d.esm.Process.Pid)
	say("esm log: %s", d.logPath)
	return func() {
		if d.esm.ProcessState == nil {
			_ = d.esm.Process.Kill()
			<-d.exited
		}
		logFile.Close()
	}, nil
}
