package redrive

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testenv"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// The package's tests read Kinesis from the in-memory fake (deterministic sequence numbers and
// arrival times, and retention that can be trimmed at will) and queues from goaws in-process.
var (
	sqsSrv  *local.SQSServer
	sqsC    *sqs.Client
	nameSeq atomic.Int64
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	if testkit.Fuzzing() { // FuzzParseMessage needs no queue; each fuzz worker runs TestMain
		return m.Run()
	}
	var err error
	if sqsSrv, sqsC, err = testenv.SQS(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer sqsSrv.Close()
	return m.Run()
}

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), nameSeq.Add(1))
}
