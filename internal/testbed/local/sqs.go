package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Admiral-Piett/goaws/app"
	"github.com/Admiral-Piett/goaws/app/gosqs"
	"github.com/Admiral-Piett/goaws/app/router"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqsschemas "github.com/aws/aws-sdk-go-v2/service/sqs/schemas"
	"github.com/aws/smithy-go/transport/http/protocol/awsquery"
	log "github.com/sirupsen/logrus"
)

// SQSServer is goaws (an SQS and SNS emulator that speaks the query protocol) running in this
// process on 127.0.0.1. goaws keeps its state in globals, so a process runs at most one.
type SQSServer struct {
	srv   *http.Server
	ln    net.Listener
	quit  chan struct{}
	done  chan struct{}
	down  atomic.Bool
	close sync.Once
}

var sqsRunning atomic.Bool

// ErrSQSRunning is returned by StartSQS when this process already runs one.
var ErrSQSRunning = errors.New("an in-process SQS emulator is already running")

// StartSQS starts goaws in-process on a free 127.0.0.1 port. Queues get a 30 s visibility
// timeout and a 256 KiB size limit by default.
func StartSQS() (*SQSServer, error) {
	if !sqsRunning.CompareAndSwap(false, true) {
		return nil, ErrSQSRunning
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		sqsRunning.Store(false)
		return nil, fmt.Errorf("listen for the SQS emulator: %w", err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	log.SetOutput(io.Discard)
	// No region: goaws would otherwise put it in front of the host of the queue URLs it returns.
	app.CurrentEnvironment = app.Environment{
		Host: "127.0.0.1", Port: port, AccountID: DefaultAccountID,
		QueueAttributeDefaults: app.EnvQueueAttributes{VisibilityTimeout: 30, MaximumMessageSize: 262144},
	}
	s := &SQSServer{ln: ln, quit: make(chan struct{}), done: make(chan struct{})}
	h := router.New()
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.down.Load() {
			http.Error(w, "service unavailable", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		gosqs.PeriodicTasks(500*time.Millisecond, s.quit)
	}()
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Endpoint is the emulator's base URL.
func (s *SQSServer) Endpoint() string { return "http://" + s.ln.Addr().String() }

// SetDown makes every request fail with 503 (true) or be served again (false): an outage.
func (s *SQSServer) SetDown(down bool) { s.down.Store(down) }

// Close stops the server.
func (s *SQSServer) Close() error {
	var err error
	s.close.Do(func() {
		close(s.quit)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = s.srv.Shutdown(ctx)
		<-s.done
		sqsRunning.Store(false)
	})
	return err
}

// NewSQSClient returns an SQS client for endpoint speaking the query protocol, which goaws needs
// (and real SQS accepts).
func NewSQSClient(cfg aws.Config, endpoint string) *sqs.Client {
	return sqs.NewFromConfig(cfg, func(o *sqs.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.Protocol = awsquery.New(sqsschemas.AmazonSQS)
	})
}

// CreateQueue creates a queue and returns its URL and ARN.
func CreateQueue(ctx context.Context, c *sqs.Client, name string) (url, arn string, err error) {
	out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		return "", "", fmt.Errorf("create queue %s: %w", name, err)
	}
	url = aws.ToString(out.QueueUrl)
	return url, fmt.Sprintf("arn:aws:sqs:%s:%s:%s", DefaultRegion, DefaultAccountID, name), nil
}

// ReceiveAll drains the queue: it receives (and deletes) messages until a receive returns none,
// and returns their bodies in the order received.
func ReceiveAll(ctx context.Context, c *sqs.Client, url string) ([]string, error) {
	var bodies []string
	for {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10})
		if err != nil {
			return bodies, fmt.Errorf("receive from %s: %w", url, err)
		}
		if len(out.Messages) == 0 {
			return bodies, nil
		}
		for _, m := range out.Messages {
			bodies = append(bodies, aws.ToString(m.Body))
			if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				return bodies, fmt.Errorf("delete from %s: %w", url, err)
			}
		}
	}
}
