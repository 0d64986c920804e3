package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// loadBarrier forwards Kinesis to kinesis-local and DynamoDB to dynalite, holding each Scan of
// the catalog table until n of them are waiting: n workers then all read the catalog before any
// of them writes to it, as when a fleet starts at once.
type loadBarrier struct {
	kinesis, dynamo *httputil.ReverseProxy
	match           string // the catalog's Scan body has it
	n               int
	mu              sync.Mutex
	waiting         int
	all             chan struct{}
}

func newLoadBarrier(t *testing.T, dynamoEndpoint, table string, n int) *httptest.Server {
	t.Helper()
	b := &loadBarrier{kinesis: reverseProxy(t, kinesisEndpoint), dynamo: reverseProxy(t, dynamoEndpoint), match: `"TableName":"` + table + `"`,
		n: n, all: make(chan struct{})}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	return srv
}

func (b *loadBarrier) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	service, op, _ := strings.Cut(r.Header.Get("X-Amz-Target"), ".")
	if !strings.HasPrefix(service, "DynamoDB") {
		b.kinesis.ServeHTTP(w, r)
		return
	}
	if op == "Scan" {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		if strings.Contains(string(body), b.match) {
			b.mu.Lock()
			if b.waiting++; b.waiting == b.n {
				close(b.all)
			}
			b.mu.Unlock()
			select {
			case <-b.all:
			case <-r.Context().Done():
				return
			}
		}
	}
	b.dynamo.ServeHTTP(w, r)
}

// listMappings lists the mappings of the esm serve at endpoint (loopback: unsigned).
func listMappings(t *testing.T, endpoint string) []map[string]any {
	t.Helper()
	resp, err := http.Get(endpoint + "/2015-03-31/event-source-mappings/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l struct{ EventSourceMappings []map[string]any }
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil || resp.StatusCode != 200 {
		t.Fatalf("list: %d %v", resp.StatusCode, err)
	}
	return l.EventSourceMappings
}

// TestServeFleetStartsOneTemplateMapping: two "esm serve --lease-table T --template" workers start
// together (both read the empty catalog before either writes): they make one mapping, which both
// list and both run, its shards shared, every record delivered once. Then one Create of another
// stream sent to both at once: one 202, one 409 with Lambda's message.
func TestServeFleetStartsOneTemplateMapping(t *testing.T) {
	ddb := dynalite(t)
	stream := newStream(t, 2)
	dir := t.TempDir()
	tmpl := writeTemplate(t, dir, stream)
	table := fmt.Sprintf("serve-fleet-%d-%d", os.Getpid(), streamSeq.Add(1))
	proxy := newLoadBarrier(t, ddb, table, 2)
	type worker struct {
		p        *esmProc
		endpoint string
		out      string
	}
	var ws []worker
	for _, id := range []string{"w1", "w2"} {
		addr, out := freeAddr(t), filepath.Join(dir, id+".jsonl")
		p := spawnESM(t, append(stopEnv(), "EXAMPLE_OUTPUT="+out), "serve", "--endpoint-url", proxy.URL, "--api-addr", addr,
			"--lease-table", table, "--worker-id", id, "--lease-duration", "3s", "--sync-interval", "200ms",
			"--template", tmpl, "--function", "Fn=example", "--poll-interval", "100ms")
		ws = append(ws, worker{p, "http://" + addr, out})
	}
	for _, w := range ws {
		testkit.WaitFor(t, "esm serve to listen", 60*time.Second, func() bool {
			select {
			case err := <-w.p.done:
				t.Fatalf("esm serve exited: %v\n%s", err, w.p.stderr.String())
			default:
			}
			return strings.Contains(w.p.stderr.String(), "esm serve:")
		})
	}
	var created []bool
	for _, w := range ws {
		created = append(created, strings.Contains(w.p.stderr.String(), "created=true"))
	}
	if created[0] == created[1] {
		t.Errorf("template mapping created by w1 %t, by w2 %t: want one to create it and the other to adopt it", created[0], created[1])
	}
	var uuid string
	for i, w := range ws {
		l := listMappings(t, w.endpoint)
		if len(l) != 1 {
			t.Fatalf("worker %d lists %d mappings after both started with one template, want 1: %v", i+1, len(l), l)
		}
		if id := l[0]["UUID"].(string); uuid == "" {
			uuid = id
		} else if id != uuid {
			t.Fatalf("the workers list two mappings: %s and %s", uuid, id)
		}
	}
	var data []string
	for i := range 20 {
		data = append(data, fmt.Sprintf("fleet-%02d", i))
	}
	putRecords(t, stream, data...)
	var got []string
	testkit.WaitFor(t, "every record delivered", 60*time.Second, func() bool {
		got = nil
		for _, w := range ws {
			for _, d := range readDeliveries(t, w.out) {
				got = append(got, d.Data)
			}
		}
		return len(got) >= len(data)
	})
	slices.Sort(got)
	if !slices.Equal(got, data) {
		t.Fatalf("deliveries %v, want each of the %d records once", got, len(data))
	}

	// CreateEventSourceMapping of another stream and the same function sent to both workers at
	// once: one 202, the other Lambda's 409 naming the mapping made.
	other := newStream(t, 1)
	body := fmt.Sprintf(`{"FunctionName":"Fn","EventSourceArn":"arn:aws:kinesis:us-east-1:000000000000:stream/%s","StartingPosition":"TRIM_HORIZON"}`, other)
	type answer struct {
		status int
		body   map[string]any
	}
	answers := make([]answer, len(ws))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := http.Post(w.endpoint+"/2015-03-31/event-source-mappings/", "application/json", strings.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			answers[i].status = resp.StatusCode
			_ = json.NewDecoder(resp.Body).Decode(&answers[i].body)
		}()
	}
	close(start)
	wg.Wait()
	won, lost := answers[0], answers[1]
	if won.status != 202 {
		won, lost = lost, won
	}
	id, _ := won.body["UUID"].(string)
	want := fmt.Sprintf(`The event source arn (" arn:aws:kinesis:us-east-1:000000000000:stream/%s ") and function (" Fn ") provided mapping already exists. Please update or delete the existing mapping with UUID %s`, other, id)
	if won.status != 202 || lost.status != 409 || lost.body["message"] != want {
		t.Fatalf("concurrent creates on the two workers: %d %v and %d %v; want one 202 and one 409 saying %q", answers[0].status, answers[0].body, answers[1].status, answers[1].body, want)
	}
	for i, w := range ws {
		if l := listMappings(t, w.endpoint); len(l) != 2 {
			t.Errorf("worker %d lists %d mappings after the concurrent creates, want 2: %v", i+1, len(l), l)
		}
	}

	for _, w := range ws {
		if code := w.p.stop(t); code != 0 {
			t.Errorf("exit %d\n%s", code, tail(w.p.stderr.String(), 20))
		}
	}
}
