package live_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/browsertest"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/metrics/live"
	"github.com/kinesis-esm/esm/poller"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

func browser(t *testing.T) (context.Context, context.CancelFunc) {
	return browsertest.Start(t, 1280, 900, 90*time.Second)
}

func screenshot(t *testing.T, ctx context.Context, name string) { browsertest.Screenshot(t, ctx, name) }

// TestLivePageInBrowser loads the live page while a mapping runs: one shard reading; then the
// shard is split and a poison record put on one child: the page, updated by its script, shows the
// two children side by side in the open generation below their parent, which is folded into the
// finished history, the blocked one first with its error; a text selection survives the updates;
// with JavaScript off the plain table says the same.
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
	p, err := poller.New(kinesissrc.MustNew(f, arn), poller.Config{StartingPosition: poller.TrimHorizon, PollInterval: 20 * time.Millisecond,
		MinPollSpacing: time.Millisecond}, poller.NewMemoryStore(), inv, poller.WithObserver(m), poller.WithBlockedAfter(time.Millisecond))
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
		return chromedp.CSS(`span.node[data-shard="` + shard + `"][data-state="` + state + `"]`)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+live.PathPage), chromedp.WaitVisible(sel(parent, "reading"))); err != nil {
		t.Fatalf("the page before the split: %v", err)
	}
	screenshot(t, ctx, "live-before-split.png")

	kids := f.Split("orders", parent)
	f.PutToShard("orders", kids[0], "k", []byte("poison"))
	type positions struct {
		KidY0, KidY1          float64
		Kid0Parents, Blocked0 string
		ParentFolded          bool
	}
	script := `(function () {
	  const node = id => document.querySelector('span.node[data-shard="' + id + '"]');
	  const y = id => node(id).getBoundingClientRect().top;
	  return {KidY0: y("` + kids[0] + `"), KidY1: y("` + kids[1] + `"), Kid0Parents: node("` + kids[0] + `").dataset.parents,
	    ParentFolded: !!node("` + parent + `").closest("details.history"),
	    Blocked0: document.querySelector('table.blocked tbody tr').innerText};
	})()`
	if err := chromedp.Do(ctx,
		chromedp.WaitReady(sel(parent, "finished")),
		chromedp.WaitVisible(sel(kids[0], "blocked")+`[data-depth="1"]`),
		chromedp.WaitVisible(sel(kids[1], "reading")+`[data-depth="1"]`),
		chromedp.WaitVisible(chromedp.CSS(`table.blocked tr[data-shard="`+kids[0]+`"]`))); err != nil {
		t.Fatalf("the page after the split: %v", err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[positions](script))
	if err != nil {
		t.Fatalf("reading the page: %v", err)
	}
	t.Logf("after the split: children at y=%v and %v; first blocked row %q", got.KidY0, got.KidY1, got.Blocked0)
	if got.KidY0 != got.KidY1 || !got.ParentFolded {
		t.Errorf("the children are not drawn side by side with their parent folded away: %+v", got)
	}
	if got.Kid0Parents != parent {
		t.Errorf("child's parents %q, want %s", got.Kid0Parents, parent)
	}
	for _, want := range []string{kids[0], "worker-1", "cannot parse the poison record"} {
		if !strings.Contains(got.Blocked0, want) {
			t.Errorf("the blocked shard's row %q lacks %q", got.Blocked0, want)
		}
	}
	screenshot(t, ctx, "live-split-blocked.png")
	selectionSurvives(t, ctx)

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
	if !strings.HasPrefix(row, "blocked") {
		t.Errorf("without JavaScript the child's state cell says %q, want blocked", row)
	}

	// The server goes away: the page says it is stale, with the error, instead of going quiet.
	srv.CloseClientConnections()
	srv.Close()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#updated.stale`))); err != nil {
		t.Fatalf("the page never said it was stale: %v", err)
	}
	bar, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#updated`)))
	if err != nil || !strings.HasPrefix(bar, "Stale: ") || !strings.Contains(bar, "Last updated") {
		t.Errorf("the stale warning reads %q (%v)", bar, err)
	}
	screenshot(t, ctx, "live-stale.png")
}

// selectionSurvives selects the summary's text and checks, after two updates of the page by its
// script, that the selection is still there (the content is patched, not replaced).
func selectionSurvives(t *testing.T, ctx context.Context) {
	t.Helper()
	sel, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(function () {
	  const r = document.createRange(); r.selectNodeContents(document.querySelector("section.mapping h2"));
	  const s = window.getSelection(); s.removeAllRanges(); s.addRange(r);
	  window.__updated = document.getElementById("live").dataset.updated;
	  return s.toString();
	})()`))
	if err != nil || sel == "" {
		t.Fatalf("selecting the mapping's title: %q, %v", sel, err)
	}
	for range 2 { // two updates of the content by the script
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("live").dataset.updated !== window.__updated`, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
			t.Fatalf("the page was not updated: %v", err)
		}
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.__updated = document.getElementById("live").dataset.updated`)); err != nil {
			t.Fatal(err)
		}
	}
	after, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.getSelection().toString()`))
	if err != nil || after != sel {
		t.Errorf("the selection %q became %q (%v) after the page's updates", sel, after, err)
	}
}
