package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

var (
	manyShards, idleWindow = testkit.IdleShardsFlags()
	idleTLS                = flag.Bool("tls", false, "BenchmarkManyIdleShardsFakeKinesis: esm reaches Kinesis over TLS with HTTP/2 offered (ALPN), as on AWS, trusting the test's certificate through AWS_CA_BUNDLE")
	esmEnv                 = flag.String("esm-env", "", "BenchmarkManyIdleShards: environment variables for the esm process, comma-separated (say, GOGC=400)")
	baseESM                = flag.String("esm-base", "", "other esm binaries (say, built from main), comma-separated, that BenchmarkManyIdleShardsFakeKinesis measures before this one at each shard count (esm=base, or esm=base-N with several), for a before/after comparison in one run; with -sdk-before too, they come first")
	sdkBefore              = flag.Bool("sdk-before", false, "BenchmarkManyIdleShardsFakeKinesis: at each shard count, first measure this esm built with GetRecords through the SDK client (sdkOverlay), for a before/after comparison of the lean path in one run")
	cpuProfiles            = flag.String("esm-cpuprofile", "", "BenchmarkManyIdle*FakeKinesis: write the esm process's CPU profile over the measured window to this directory (cpu-<benchmark>.pprof), by a hook added to the binary at build time (profileOverlay)")
)

// BenchmarkManyIdleShards measures one esm process reading many idle shards of one stream on
// kinesis-local: "esm run" of the built binary, polling every second (the default) with the
// built-in example function and a --state-dir checkpoint store. Once every shard has been read
// (its first GetRecords answered) and esm reports it owns all of them (esm_shard_owned on
// /metrics), the esm process alone is measured over -idle-window (default 30 s), from /proc:
// RSS-MB, peakRSS-MB (VmHWM: the highest since it started, start-up included) and cpu-%core (its
// user plus system time over the window; 100 is one core busy), with GetRecords/s and
// cpu-us/GetRecords counted by a proxy between esm and kinesis-local. -shards sets the shard
// counts (default 1000), e.g.
//
//	go test -run '^$' -bench ManyIdleShards -benchtime 1x ./cmd/esm/ -args -shards=500,1000
//
// kinesis-local answers only about 100 GetRecords/s on 2 cores (less on a loaded machine, whose
// load average is logged), so esm polls each of many shards far less than once a second here and
// cpu-%core is below what the same shards cost on Kinesis. cpu-us/GetRecords is the figure that
// carries over: at one poll per shard per second, N shards cost N × cpu-us/GetRecords µs of CPU
// per second. internal/testbed/leasesim's BenchmarkManyIdleShards polls at the full rate on the fakes.
func BenchmarkManyIdleShards(b *testing.B) {
	testkit.ForEachCount(b, *manyShards, func(b *testing.B, n int) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		stream := fmt.Sprintf("bench-idle-%d-%d-%d", n, os.Getpid(), streamSeq.Add(1))
		created := time.Now()
		if _, err := local.CreateStream(ctx, kin, stream, int32(n)); err != nil {
			b.Fatal(err)
		}
		b.Logf("%d shards: CreateStream took %s on kinesis-local", n, time.Since(created).Round(time.Millisecond))
		// Free kinesis-local's memory of the shards for what runs next.
		b.Cleanup(func() {
			_, _ = kin.DeleteStream(context.Background(), &kinesis.DeleteStreamInput{StreamName: aws.String(stream)})
		})
		measureIdleShards(b, esmBin, n, stream, kinesisEndpoint, proxySlots)
	})
}

// BenchmarkManyIdleShardsFakeKinesis is BenchmarkManyIdleShards with the esm binary reading
// fake/fakekinesis, served over HTTP by this test process (fakeKinesisHTTP), instead of
// kinesis-local: the fake answers every poll, so esm polls each shard once a second as it would
// on Kinesis, and cpu-%core is what its idle shards cost at Lambda's polling rate. Only the esm
// process is measured; the fake's CPU and memory are in the test process. With -esm-base, another
// esm binary is measured first at each shard count (sub-benchmarks esm=base and esm=this), on a
// fake of its own: a before/after comparison under the same load.
//
//	go test -run '^$' -bench ManyIdleShardsFakeKinesis -benchtime 1x ./cmd/esm/ -args -shards=500,1000
func BenchmarkManyIdleShardsFakeKinesis(b *testing.B) {
	testkit.ForEachCount(b, *manyShards, func(b *testing.B, n int) {
		forEachESM(b, func(b *testing.B, bin string) {
			f := fakekinesis.New()
			f.CreateStream("idle", n)
			srv := httptest.NewServer(fakeKinesisHTTP(f))
			b.Cleanup(srv.Close)
			measureIdleShards(b, bin, n, "idle", srv.URL, n)
		})
	})
}

// forEachESM runs fn with the esm binary under test or, with -esm-base or -sdk-before, as
// sub-benchmarks with the other binaries first (esm=base, esm=base-N, esm=sdk) and then the one
// under test (esm=this). With -esm-cpuprofile every binary it builds has the profiling hook.
func forEachESM(b *testing.B, fn func(b *testing.B, bin string)) {
	this := esmBin
	if *cpuProfiles != "" {
		this = benchBinary(b, "esm-profiled", profileOverlay)
	}
	bases := baseBinaries()
	if len(bases) == 0 && !*sdkBefore {
		fn(b, this)
		return
	}
	for i, base := range bases {
		name := "esm=base"
		if len(bases) > 1 {
			name = fmt.Sprintf("esm=base-%d", i+1)
		}
		b.Run(name, func(b *testing.B) { fn(b, base) })
	}
	if *sdkBefore {
		sdk := benchBinary(b, "esm-sdk", sdkOverlay)
		b.Run("esm=sdk", func(b *testing.B) { fn(b, sdk) })
	}
	b.Run("esm=this", func(b *testing.B) { fn(b, this) })
}

// baseBinaries are -esm-base's binaries.
func baseBinaries() []string {
	if *baseESM == "" {
		return nil
	}
	return strings.Split(*baseESM, ",")
}

// sdkOverlay replaces the one file of source/kinesis/internal/getrecords that the rest of esm uses (Wrap and its
// Kinesis) with one whose GetRecords is the SDK client's: the esm of before the lean path, with
// everything else as built now. Only this benchmark builds it, so the product has no switch.
var sdkOverlay = map[string]string{"../../source/kinesis/internal/getrecords/kinesis.go": `package getrecords

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

type Kinesis struct {
	*kinesis.Client
	lean *Client
}

func Wrap(kin *kinesis.Client) *Kinesis { return &Kinesis{Client: kin} }

func (k *Kinesis) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	return k.Client.GetRecords(ctx, in, optFns...)
}
`}

// profileOverlay adds a file to package main that, with ESM_BENCH_CPUPROFILE set, starts a CPU
// profile on SIGUSR1 and, on SIGUSR2, stops it and writes it to that path (through a rename, so
// that the file is whole once it exists). At each signal it also writes the allocations so far
// (path.allocs0, path.allocs1; one sample per 64 KiB allocated, which costs a few per cent of the CPU), so that go tool pprof -base
// path.allocs0 path.allocs1 shows what the window allocated. Only this benchmark builds it.
var profileOverlay = map[string]string{"zz_benchprofile.go": `package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"
)

func init() {
	path := os.Getenv("ESM_BENCH_CPUPROFILE")
	if path == "" {
		return
	}
	runtime.MemProfileRate = 64 << 10
	allocs := func(name string) {
		if f, err := os.Create(name); err == nil {
			_ = pprof.Lookup("allocs").WriteTo(f, 0)
			_ = f.Close()
		}
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		var f *os.File
		for s := range sig {
			if s == syscall.SIGUSR1 && f == nil {
				allocs(path + ".allocs0")
				f, _ = os.Create(path + ".tmp")
				_ = pprof.StartCPUProfile(f)
			} else if s == syscall.SIGUSR2 && f != nil {
				pprof.StopCPUProfile()
				allocs(path + ".allocs1")
				if g, err := os.Create(path + ".goroutines"); err == nil {
					_ = pprof.Lookup("goroutine").WriteTo(g, 1)
					_ = g.Close()
				}
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				_ = os.WriteFile(path+".mem", []byte(fmt.Sprintf("goroutines %d\nheap in use %d MB, idle %d MB, released %d MB\nstacks %d MB\nsys %d MB\nGC cycles %d\n",
					runtime.NumGoroutine(), m.HeapInuse>>20, m.HeapIdle>>20, m.HeapReleased>>20, m.StackInuse>>20, m.Sys>>20, m.NumGC)), 0o644)
				_ = f.Close()
				_ = os.Rename(path+".tmp", path)
				f = nil
			}
		}
	}()
}
`}

var benchBinaries sync.Map // name → path of a binary benchBinary built

// benchBinary builds esm as name with the files of overlay (paths relative to this package, with
// the content to use) put in with go build -overlay, and with the profiling hook too under
// -esm-cpuprofile, once per test run.
func benchBinary(b *testing.B, name string, overlay map[string]string) string {
	b.Helper()
	if bin, ok := benchBinaries.Load(name); ok {
		return bin.(string)
	}
	dir := filepath.Dir(esmBin)
	files := map[string]string{}
	add := func(o map[string]string) {
		for path, content := range o {
			abs, err := filepath.Abs(path)
			if err != nil {
				b.Fatal(err)
			}
			src := filepath.Join(dir, fmt.Sprintf("overlay-%s-%d.go", name, len(files)))
			if err := os.WriteFile(src, []byte(content), 0o600); err != nil {
				b.Fatal(err)
			}
			files[abs] = src
		}
	}
	add(overlay)
	if *cpuProfiles != "" {
		add(profileOverlay)
	}
	spec, err := json.Marshal(map[string]any{"Replace": files})
	if err != nil {
		b.Fatal(err)
	}
	specPath := filepath.Join(dir, "overlay-"+name+".json")
	if err := os.WriteFile(specPath, spec, 0o600); err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	if out, err := exec.Command("go", "build", "-overlay", specPath, "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("build %s: %v\n%s", name, err, out)
	}
	benchBinaries.Store(name, bin)
	return bin
}

// profilePath is where the esm process of benchmark b writes its CPU profile.
func profilePath(b *testing.B) string {
	dir, err := filepath.Abs(*cpuProfiles)
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		b.Fatal(err)
	}
	return filepath.Join(dir, "cpu-"+strings.NewReplacer("/", "-", "=", "-").Replace(b.Name())+".pprof")
}

// profileWindow starts the CPU profile of the esm process p of the binary bin under
// -esm-cpuprofile (a binary benchBinary built, not -esm-base's), and returns the function that
// stops it and waits for the file.
func profileWindow(b *testing.B, bin string, p *esmProc) func() {
	if *cpuProfiles == "" || slices.Contains(baseBinaries(), bin) {
		return func() {}
	}
	path := profilePath(b)
	for _, name := range []string{path, path + ".allocs0", path + ".allocs1"} { // an earlier run's would end the wait below at once
		if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			b.Fatal(err)
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		b.Fatal(err)
	}
	return func() {
		if err := p.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
			b.Fatal(err)
		}
		testkit.WaitFor(b, "the CPU profile "+path, time.Minute, func() bool { _, err := os.Stat(path); return err == nil })
		b.Logf("CPU profile of the window: %s", path)
	}
}

// measureIdleShards runs "esm run" of the binary bin on stream, an idle stream of n shards at the
// Kinesis endpoint target, through a readsProxy that forwards up to slots requests at a time,
// waits until every shard is read and owned, and measures the esm process, with the connections
// it opened to the proxy during the window (conns/s).
func measureIdleShards(b *testing.B, bin string, n int, stream, target string, slots int) {
	rp, err := newReadsProxy(target, &http.Transport{MaxIdleConnsPerHost: slots, DisableCompression: true}, slots)
	if err != nil {
		b.Fatal(err)
	}
	reads := rp.reads
	proxy := httptest.NewUnstartedServer(rp)
	proxy.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			rp.conns.Add(1)
		}
	}
	p := runIdleESM(b, bin, proxy, stream, n, "read", func() bool { read, _ := reads.Read(); return read >= n })
	b.ResetTimer()
	conns, from := rp.conns.Load(), time.Now()
	stopProfile := profileWindow(b, bin, p)
	testkit.MeasureProc(b, p.cmd.Process.Pid, *idleWindow, func() int64 { _, calls := reads.Read(); return calls })
	b.StopTimer()
	stopProfile()
	c := rp.conns.Load() - conns
	b.ReportMetric(float64(c)/time.Since(from).Seconds(), "conns/s")
	b.Logf("%d shards: esm opened %d connections to Kinesis before the window, %d during it", n, conns, c)
	if code := p.stop(b); code != 0 {
		b.Fatalf("esm exit code %d\n%s", code, tail(p.stderr.String(), 30))
	}
}

// runIdleESM starts srv (startFake) and "esm run" of the binary bin on stream through it, and
// waits until ready (what it tells, say "read") holds and esm owns all n shards (esm_shard_owned).
// The test's cleanup stops srv after esm.
func runIdleESM(b *testing.B, bin string, srv *httptest.Server, stream string, n int, what string, ready func() bool) *esmProc {
	env := startFake(b, srv)
	b.Cleanup(srv.Close) // after esm's cleanup (registered later, run first) stopped esm
	addr := freeAddr(b)
	started := time.Now()
	p := spawnBin(b, bin, env, "run", "--endpoint-url", srv.URL, "--stream", stream,
		"--state-dir", filepath.Join(b.TempDir(), "state"), "--metrics-addr", addr)
	testkit.WaitFor(b, "every shard "+what+" and owned", 5*time.Minute, func() bool {
		select {
		case err := <-p.done:
			b.Fatalf("esm exited: %v\n%s", err, tail(p.stderr.String(), 30))
		default:
		}
		return ready() && scrape(b, addr)["esm_shard_owned"] == float64(n)
	})
	b.Logf("%d shards: all %s and owned %s after esm started; load average %s", n, what,
		time.Since(started).Round(time.Millisecond), testkit.LoadAverage())
	return p
}

// startFake starts srv, over TLS with HTTP/2 offered with -tls, and returns the environment of an
// esm process that reads from it (the built-in example function, the certificate to trust with
// -tls, and -esm-env).
func startFake(b *testing.B, srv *httptest.Server) []string {
	env := []string{"ESM_INVOKE=example"}
	if *cpuProfiles != "" {
		env = append(env, "ESM_BENCH_CPUPROFILE="+profilePath(b))
	}
	if *esmEnv != "" {
		env = append(env, strings.Split(*esmEnv, ",")...)
	}
	if !*idleTLS {
		srv.Start()
		return env
	}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	bundle := filepath.Join(b.TempDir(), "ca.pem")
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(bundle, cert, 0o600); err != nil {
		b.Fatal(err)
	}
	return append(env, "AWS_CA_BUNDLE="+bundle)
}

// proxySlots is how many requests readsProxy has in flight to kinesis-local at once.
const proxySlots = 4

// readsProxy forwards Kinesis JSON requests to target and follows GetShardIterator and
// GetRecords through reads, to tell when every shard has been read and to count GetRecords. It
// counts the connections esm opens to it in conns.
//
// It forwards at most cap(slots) requests at a time, in the order they arrive: proxySlots to
// kinesis-local, which with one connection per shard (single-threaded, about 100 GetRecords/s
// here) otherwise keeps answering the shards it already reads and leaves others waiting for
// minutes for their first GetShardIterator; one per shard to the fake. esm still has one request
// in flight per shard, as without the proxy.
type readsProxy struct {
	proxy *httputil.ReverseProxy
	reads *testkit.ShardReads
	slots chan struct{}
	conns atomic.Int64
}

// newReadsProxy forwards to target through transport, slots requests at a time.
func newReadsProxy(target string, transport http.RoundTripper, slots int) (*readsProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	p := &readsProxy{reads: testkit.NewShardReads(), slots: make(chan struct{}, slots)}
	p.proxy = &httputil.ReverseProxy{
		Transport: transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			// Keep the request body for ModifyResponse, which follows the iterators.
			body, err := io.ReadAll(pr.In.Body)
			if err != nil {
				body = nil
			}
			pr.Out.Body = io.NopCloser(bytes.NewReader(body))
			pr.Out = pr.Out.WithContext(context.WithValue(pr.Out.Context(), requestBody{}, body))
		},
		ModifyResponse: func(resp *http.Response) error {
			out, err := io.ReadAll(resp.Body)
			if err != nil {
				return err
			}
			resp.Body = io.NopCloser(bytes.NewReader(out))
			body, _ := resp.Request.Context().Value(requestBody{}).([]byte)
			if resp.StatusCode == http.StatusOK {
				p.follow(resp.Request.Header.Get("X-Amz-Target"), body, out)
			}
			return nil
		},
	}
	return p, nil
}

// requestBody is the context key of a forwarded request's body.
type requestBody struct{}

func (p *readsProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case p.slots <- struct{}{}:
		defer func() { <-p.slots }()
	case <-r.Context().Done():
		return
	}
	p.proxy.ServeHTTP(w, r)
}

// follow records the iterators a GetShardIterator or GetRecords call (target) returned.
func (p *readsProxy) follow(target string, body, out []byte) {
	var in, res struct{ ShardId, ShardIterator, NextShardIterator string }
	if json.Unmarshal(body, &in) != nil || json.Unmarshal(out, &res) != nil {
		return
	}
	switch _, op, _ := strings.Cut(target, "."); op {
	case "GetShardIterator":
		p.reads.Iterator(in.ShardId, res.ShardIterator)
	case "GetRecords":
		p.reads.GetRecords(in.ShardIterator, res.NextShardIterator)
	}
}
