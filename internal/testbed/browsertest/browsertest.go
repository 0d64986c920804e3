// Package browsertest drives headless Chromium for the tests of the live page: it finds the
// browser, starts it with a fresh profile, and keeps screenshots as the test's artifacts.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Chromium finds the browser; without one the test fails where CI asks for it
// (ESM_REQUIRE_CHROMIUM=1, which .ci/run sets after installing it) and is skipped elsewhere.
func Chromium(t testing.TB) string {
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

// Start starts headless Chromium with a fresh profile and a window of width × height, and
// returns a context to drive it, ended after timeout at the latest.
func Start(t testing.TB, width, height int, timeout time.Duration) (context.Context, context.CancelFunc) {
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(Chromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(width, height),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	return ctx, func() { cancelTimeout(); cancelCtx(); cancelAlloc() }
}

// ArtifactDir is where screenshots go: $ESM_ARTIFACTS/<test name> when ESM_ARTIFACTS is set,
// else the test's artifact directory (go test -artifacts keeps it under -outputdir).
func ArtifactDir(t testing.TB) string {
	base := os.Getenv("ESM_ARTIFACTS")
	if base == "" {
		return t.ArtifactDir()
	}
	dir := filepath.Join(base, filepath.FromSlash(t.Name()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Screenshot saves the whole page as name (PNG) under ArtifactDir and logs where.
func Screenshot(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	save(t, ctx, name, chromedp.FullScreenshot(100)) // quality 100: PNG
}

// Window saves what the window shows, as an operator first sees the page.
func Window(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	save(t, ctx, name, chromedp.CaptureScreenshot())
}

func save(t testing.TB, ctx context.Context, name string, shot chromedp.Action[[]byte]) {
	t.Helper()
	png, err := chromedp.Run(ctx, shot)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(ArtifactDir(t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", path)
}
