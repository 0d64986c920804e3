package chaos

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/kinesis-esm/esm/internal/testbed/local"
)

// backend answers every request with body and records what reached it.
type backend struct {
	srv  *httptest.Server
	mu   sync.Mutex
	hits []string // X-Amz-Target or path, with the worker header
}

func newBackend(t *testing.T, contentType, body string) *backend {
	b := &backend{}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		b.mu.Lock()
		b.hits = append(b.hits, r.Header.Get(workerHeader)+" "+r.Header.Get("X-Amz-Target")+r.URL.Path)
		b.mu.Unlock()
		w.Header().Set("Content-Type", contentType)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *backend) got() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.hits...)
}

func clients(t *testing.T, endpoint string) (*kinesis.Client, *dynamodb.Client) {
	cfg, err := local.AWSConfig(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.RetryMaxAttempts = 1
	kc := local.NewKinesisClient(cfg, endpoint)
	dc := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) })
	return kc, dc
}

func newTestProxy(t *testing.T, rates [numServices]Rates) (*Proxy, *backend, *backend, *backend, *Counts) {
	k := newBackend(t, "application/x-amz-json-1.1", `{"Records":[],"NextShardIterator":"it","MillisBehindLatest":0}`)
	d := newBackend(t, "application/x-amz-json-1.0", `{}`)
	f := newBackend(t, "application/json", `{"batchItemFailures":[]}`)
	counts := &Counts{}
	p, err := NewProxy("w7", 1, [numServices]string{k.srv.URL, d.srv.URL, f.srv.URL}, rates, counts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p, k, d, f, counts
}

func getRecords(kc *kinesis.Client) error {
	_, err := kc.GetRecords(context.Background(), &kinesis.GetRecordsInput{ShardIterator: aws.String("it")})
	return err
}

func getItem(dc *dynamodb.Client) error {
	_, err := dc.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("t"),
		Key: map[string]dtypes.AttributeValue{"k": &dtypes.AttributeValueMemberS{Value: "v"}}})
	return err
}

func invokeFn(url string) (int, error) {
	resp, err := http.Post(url+"/e0/2015-03-31/functions/chaos/invocations", "application/json", strings.NewReader(`{"Records":[]}`))
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func TestProxyRoutesByServiceAndPartitionsOne(t *testing.T) {
	p, k, d, f, counts := newTestProxy(t, [numServices]Rates{})
	kc, dc := clients(t, p.URL())
	if err := getRecords(kc); err != nil {
		t.Fatalf("GetRecords: %v", err)
	}
	if err := getItem(dc); err != nil {
		t.Fatalf("GetItem: %v", err)
	}
	if code, err := invokeFn(p.URL()); err != nil || code != 200 {
		t.Fatalf("invoke: %d %v", code, err)
	}
	if g := k.got(); len(g) != 1 || g[0] != "w7 Kinesis_20131202.GetRecords/" {
		t.Errorf("kinesis got %q", g)
	}
	if g := d.got(); len(g) != 1 || g[0] != "w7 DynamoDB_20120810.GetItem/" {
		t.Errorf("dynamodb got %q", g)
	}
	if g := f.got(); len(g) != 1 || g[0] != "w7 /e0/2015-03-31/functions/chaos/invocations" {
		t.Errorf("function got %q", g)
	}

	// Cut off from DynamoDB alone: its requests fail without reaching it; Kinesis still answers.
	p.Partition(DynamoDB)
	done := make(chan error, 1)
	go func() { done <- getItem(dc) }()
	if err := getRecords(kc); err != nil {
		t.Errorf("GetRecords during a DynamoDB partition: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); counts.Snapshot()["dynamodb partitioned"] == 0; {
		if time.Now().After(deadline) {
			t.Fatal("GetItem never reached the proxy")
		}
		time.Sleep(5 * time.Millisecond) // the held request is counted when it arrives
	}
	p.Heal(DynamoDB) // ends the held request: its connection drops
	if err := <-done; err == nil {
		t.Error("GetItem went through a partition")
	}
	if n := len(d.got()); n != 1 {
		t.Errorf("%d requests reached DynamoDB, want the first only", n)
	}
	if err := getItem(dc); err != nil {
		t.Errorf("GetItem after the partition: %v", err)
	}
	if c := counts.Snapshot(); c["dynamodb partitioned"] != 1 || len(c) != 1 {
		t.Errorf("counts %v, want one dynamodb partitioned", c)
	}
}

func TestProxyDropsAfterForwarding(t *testing.T) {
	p, _, _, f, counts := newTestProxy(t, [numServices]Rates{Function: {DropAfter: 1}})
	if _, err := invokeFn(p.URL()); err == nil {
		t.Fatal("the answer came through a drop after forwarding")
	}
	if n := len(f.got()); n != 1 {
		t.Errorf("the function got %d invocations, want 1 (it ran, its answer was lost)", n)
	}
	if c := counts.Snapshot(); c["function drop-after"] != 1 {
		t.Errorf("counts %v", c)
	}
}

// TestProxyFaultsAreAWSShaped: the SDK reads each injected error as the service's own.
func TestProxyFaultsAreAWSShaped(t *testing.T) {
	check := func(t *testing.T, err error, code string, status int) {
		t.Helper()
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != code {
			t.Errorf("error %v, want API error %s", err, code)
		}
		var re interface{ HTTPStatusCode() int }
		if !errors.As(err, &re) || re.HTTPStatusCode() != status {
			t.Errorf("error %v, want HTTP %d", err, status)
		}
	}
	t.Run("throttles", func(t *testing.T) {
		p, k, d, _, _ := newTestProxy(t, [numServices]Rates{Kinesis: {Throttle: 1}, DynamoDB: {Throttle: 1}})
		kc, dc := clients(t, p.URL())
		var kt *ktypes.ProvisionedThroughputExceededException
		var kl *ktypes.LimitExceededException
		var dt *dtypes.ProvisionedThroughputExceededException
		seen := map[string]bool{}
		for range 20 {
			err := getRecords(kc)
			switch {
			case errors.As(err, &kt):
				seen["kinesis throughput"] = true
			case errors.As(err, &kl):
				seen["kinesis limit"] = true
			default:
				t.Fatalf("kinesis: %v", err)
			}
			err = getItem(dc)
			var ae smithy.APIError
			switch {
			case errors.As(err, &dt):
				seen["dynamodb throughput"] = true
			case errors.As(err, &ae) && ae.ErrorCode() == "ThrottlingException":
				seen["dynamodb throttling"] = true
			default:
				t.Fatalf("dynamodb: %v", err)
			}
		}
		if len(seen) != 4 {
			t.Errorf("shapes seen %v, want all four", seen)
		}
		if len(k.got())+len(d.got()) != 0 {
			t.Error("a throttled request was forwarded")
		}
	})
	t.Run("5xx", func(t *testing.T) {
		p, _, _, _, counts := newTestProxy(t, [numServices]Rates{Kinesis: {ServerError: 1}, DynamoDB: {ServerError: 1}, Function: {ServerError: 1}})
		kc, dc := clients(t, p.URL())
		var w bool
		for range 20 {
			err := getRecords(kc)
			var ae smithy.APIError
			if errors.As(err, &ae) && ae.ErrorCode() == "ServiceUnavailable" {
				check(t, err, "ServiceUnavailable", 503)
				w = true
			} else {
				check(t, err, "InternalFailure", 500)
			}
		}
		if !w {
			t.Error("no ServiceUnavailable in 20 draws")
		}
		var ise *dtypes.InternalServerError
		if err := getItem(dc); !errors.As(err, &ise) {
			var ae smithy.APIError
			if !errors.As(err, &ae) || ae.ErrorCode() != "ServiceUnavailable" {
				t.Errorf("dynamodb: %v, want InternalServerError or ServiceUnavailable", err)
			}
		}
		if code, err := invokeFn(p.URL()); err != nil || code < 500 {
			t.Errorf("invoke: %d %v, want a 5xx", code, err)
		}
		if c := counts.Snapshot(); c["kinesis 5xx"] != 20 || c["dynamodb 5xx"] != 1 || c["function 5xx"] != 1 {
			t.Errorf("counts %v", c)
		}
	})
}
