package rie

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke/httpinvoke"
)

// TestStartRIEListensOnLoopbackAndStopEndsTheRuntime: both of the emulator's ports are on
// 127.0.0.1, the handler sees the emulator's environment, and Stop ends the handler's process too.
func TestStartRIEListensOnLoopbackAndStopEndsTheRuntime(t *testing.T) {
	t.Parallel()
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	r := startRIE(t, 3*time.Second, "EXAMPLE_TRACE="+trace, "EXAMPLE_OUTPUT="+os.DevNull)
	inv, err := httpinvoke.New([]string{r.Endpoint()})
	if err != nil {
		t.Fatal(err)
	}
	defer inv.CloseIdleConnections()
	if _, err := inv.Invoke(testContext(t, 10*time.Second), []byte(`{"Records":[]}`)); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{strings.TrimPrefix(r.Endpoint(), "http://"), r.RuntimeAPI()} {
		host, _, err := net.SplitHostPort(addr)
		if err != nil || host != "127.0.0.1" {
			t.Fatalf("address %q: want 127.0.0.1", addr)
		}
		if !listensOnLoopbackOnly(t, addr) {
			t.Fatalf("%s is not bound to 127.0.0.1 alone", addr)
		}
	}
	tr := traces(t, trace)
	if len(tr) != 1 {
		t.Fatalf("traces %+v", tr)
	}
	runtimePID := tr[0].PID
	if runtimePID == r.PID() || !running(runtimePID) {
		t.Fatalf("runtime process %d (emulator %d) not running", runtimePID, r.PID())
	}
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the runtime process to end", 5*time.Second, func() bool { return !running(runtimePID) })
}

func TestStartRIERejectsBadSettings(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 10*time.Second)
	tests := []struct {
		name string
		opts local.RIEOptions
		want string
	}{
		{name: "no binary", opts: local.RIEOptions{Handler: []string{bootstrapBin}}, want: "no binary"},
		{name: "no handler", opts: local.RIEOptions{Binary: rieBin}, want: "no handler"},
		{name: "fractional timeout", opts: local.RIEOptions{Binary: rieBin, Handler: []string{bootstrapBin}, Timeout: 1500 * time.Millisecond}, want: "whole number of seconds"},
	}
	for _, tt := range tests {
		if _, err := local.StartRIE(ctx, tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want one mentioning %q", tt.name, err, tt.want)
		}
	}
	// A taken runtime API port is found before the emulator starts (it binds it only at the
	// first invoke).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	_, err = local.StartRIE(ctx, local.RIEOptions{Binary: rieBin, Handler: []string{bootstrapBin}, RuntimeAPIPort: port, Port: testkit.FreePort(t)})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprint(port)) {
		t.Fatalf("err %v: want the taken port %d named", err, port)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
}

// running reports whether pid is a live process (not gone, not a zombie).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// listensOnLoopbackOnly reports whether the listening socket on addr's port is bound to
// 127.0.0.1 (not 0.0.0.0 or ::), from /proc/net/tcp and /proc/net/tcp6.
func listensOnLoopbackOnly(t *testing.T, addr string) bool {
	t.Helper()
	_, portStr, _ := net.SplitHostPort(addr)
	var port int
	fmt.Sscan(portStr, &port)
	want := fmt.Sprintf(":%04X", port)
	found := false
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 4 || f[3] != "0A" || !strings.HasSuffix(f[1], want) { // 0A: LISTEN
				continue
			}
			if f[1] != "0100007F"+want { // 127.0.0.1, little-endian hex
				return false
			}
			found = true
		}
	}
	return found
}
