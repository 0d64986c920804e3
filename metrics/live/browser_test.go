package live_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/metrics/live"
	"github.com/kinesis-esm/esm/poller"
)

// chromium finds the browser; without one the test fails where CI asks for it
// (ESM_REQUIRE_CHROMIUM=1, which .ci/run sets after installing it) and is skipped elsewhere.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("ESM_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("no chromium on PATH (apt-get install chromium)")
	}
	t.Skip("no chromium on PATH; set ESM_REQUIRE_CHROMIUM=1 to fail instead")
	return ""
}

// browser starts headless Chromium with a fresh profile and returns a context to drive it.
func browser(t *testing.T) (context.Context, context.CancelFunc) {
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	return ctx, func() { cancelTimeout(); cancelCtx(); cancelAlloc() }
}

// screenshot saves the page as name under the test's artifact directory and logs where.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100: PNG
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", path)
}

// TestLivePageInBrowser loads the live page while a mapping runs: one shard reading; then the
// shard is split and a poison record put on one child: the page, updated by its script, shows the
// parent finished above two children, one of them blocked with its error; with JavaScript off the
// plain table says the same.
func TestLivePageInBrowser(t *testing.T) {
	ctx, cancel := browser(t)
	defer cancel()

	f := fakekinesis.New()
	arn := f.CreateStream("orders", 1)
	const parent = "shardId-000000000000"
	f.PutToShard("orders", parent, "k", []byte("a"))
	board := live.New(live.WithWorker("worker-1"))
	m := board.Add("fn", "orders")
	inv := inprocess.New(func(_ context.Context, e events.KinesisEvent) (json.RawMessage, error) {
		for _, r := range e.Records {
			if string(r.Kinesis.Data) == "poison" {
				return nil, errors.New("cannot parse the poison record")
			}
		}
		return nil, nil
	})
	p, err := poller.New(poller.Config{StreamARN: arn, StartingPosition: poller.TrimHorizon, PollInterval: 20 * time.Millisecond,
		MinPollSpacing: time.Millisecond}, f, poller.NewMemoryStore(), inv, poller.WithObserver(m), poller.WithBlockedAfter(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	pctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	srv := httptest.NewServer(board.Handler())
	defer srv.Close()

	sel := func(shard, state string) chromedp.CSS {
		return chromedp.CSS(`g.shard[data-shard="` + shard + `"][data-state="` + state + `"]`)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+live.PathPage), chromedp.WaitVisible(sel(parent, "reading"))); err != nil {
		t.Fatalf("the page before the split: %v", err)
	}
	screenshot(t, ctx, "live-before-split.png")

	kids := f.Split("orders", parent)
	f.PutToShard("orders", kids[0], "k", []byte("poison"))
	type positions struct {
		ParentY, KidY0, KidY1 float64
		Kid0Parents, Row0     string
	}
	script := `(function () {
	  const y = id => document.querySelector('g.shard[data-shard="' + id + '"] rect').getBoundingClientRect().top;
	  return {ParentY: y("` + parent + `"), KidY0: y("` + kids[0] + `"), KidY1: y("` + kids[1] + `"),
	    Kid0Parents: document.querySelector('g.shard[data-shard="` + kids[0] + `"]').dataset.parents,
	    Row0: document.querySelector('table.shards tr[data-shard="` + kids[0] + `"]').innerText};
	})()`
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(sel(parent, "finished")),
		chromedp.WaitVisible(sel(kids[0], "blocked")+`[data-depth="1"]`),
		chromedp.WaitVisible(sel(kids[1], "reading")+`[data-depth="1"]`)); err != nil {
		t.Fatalf("the page after the split: %v", err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[positions](script))
	if err != nil {
		t.Fatalf("reading the page: %v", err)
	}
	t.Logf("after the split: parent at y=%v, children at y=%v and %v; blocked row %q", got.ParentY, got.KidY0, got.KidY1, got.Row0)
	if got.KidY0 <= got.ParentY || got.KidY1 <= got.ParentY || got.KidY0 != got.KidY1 {
		t.Errorf("the children are not drawn side by side below their parent: %+v", got)
	}
	if got.Kid0Parents != parent {
		t.Errorf("child's parents %q, want %s", got.Kid0Parents, parent)
	}
	for _, want := range []string{"blocked", "worker-1", "cannot parse the poison record"} {
		if !strings.Contains(got.Row0, want) {
			t.Errorf("the blocked shard's row %q lacks %q", got.Row0, want)
		}
	}
	screenshot(t, ctx, "live-split-blocked.png")

	// JavaScript off: a fresh tab renders the same state as plain HTML.
	tab, closeTab := chromedp.NewContext(ctx)
	defer closeTab()
	if err := chromedp.Do(tab, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(tab, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatalf("disabling JavaScript: %v", err)
	}
	if err := chromedp.Do(tab, chromedp.Navigate(srv.URL+live.PathPage)); err != nil {
		t.Fatal(err)
	}
	row, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS(`table.shards tr[data-shard="`+kids[0]+`"] td.state-blocked`)))
	if err != nil {
		t.Fatalf("the page without JavaScript: %v", err)
	}
	if row != "blocked" {
		t.Errorf("without JavaScript the child's state cell says %q, want blocked", row)
	}
}
