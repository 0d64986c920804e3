package execenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// withContainment replaces the containment the machine offers (tests of the fallback).
func withContainment(c *containment) Option { return func(cfg *config) { cfg.containment = c } }

// procStat is a process's state and session from /proc; ok is false once it is gone.
func procStat(t *testing.T, pid int) (state string, session int, ok bool) {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, false
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	session, _ = strconv.Atoi(f[3])
	return f[0], session, true
}

// running reports whether pid is a live process (not gone, not a zombie).
func running(t *testing.T, pid int) bool {
	state, _, ok := procStat(t, pid)
	return ok && state != "Z" && state != "X"
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// containments are the ways this machine can contain environments: what it offers (a cgroup v2
// where writable), and the child-subreaper fallback in any case.
func containments(t *testing.T) map[string]*containment {
	t.Helper()
	out := map[string]*containment{"default": detected()}
	if detected().mode != containSubreaper {
		out["subreaper"] = subreaperContainment()
	}
	// A cgroup that cannot be used (a directory that is not one: the kernel refuses to start the
	// process in it and to take it in): the environment falls back to sweeping.
	out["unusable cgroup"] = &containment{mode: containCgroup, base: t.TempDir()}
	// A cgroup that cannot be made: the environment is swept.
	out["no cgroup"] = &containment{mode: containCgroup, base: filepath.Join(t.TempDir(), "missing")}
	return out
}

// TestTimeoutEndsEveryProcess: a function that starts a child in a new session (setsid: out of
// its process group and session) and then times out leaves nothing behind: once Invoke has
// answered Sandbox.Timedout, the child is gone. The same when the runtime crashes after starting
// it (Runtime.ExitError), and for an idle environment at Close.
func TestTimeoutEndsEveryProcess(t *testing.T) {
	t.Logf("this machine: containment %d (1 cgroup, 2 subreaper), memory limited %v, notice %q", detected().mode, detected().memory, detected().notice)
	for name, c := range containments(t) {
		t.Run(name+"/timeout", func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			child, pids := filepath.Join(dir, "child"), filepath.Join(dir, "pids")
			h := newHarness(t, bashBootstrap, map[string]string{"BASH_FAIL": "sleep", "BASH_CHILD": child, "BASH_PIDS": pids},
				WithHandler("function.handler"), WithTimeout(2*time.Second), withContainment(c))
			done := make(chan string, 1)
			go func() {
				resp := h.invoke(t)
				typ, _ := errorType(t, resp)
				done <- typ
			}()
			testkit.WaitFor(t, "the setsid child", 20*time.Second, func() bool {
				b, _ := os.ReadFile(child)
				return len(bytes.TrimSpace(b)) > 0
			})
			pid, runtime := readPID(t, child), readPID(t, pids)
			_, sess, ok := procStat(t, pid)
			_, runtimeSess, _ := procStat(t, runtime)
			if !ok || !running(t, pid) || sess != pid || sess == runtimeSess {
				t.Fatalf("child %d: running %v, session %d (runtime %d in session %d): want a running session leader of its own", pid, running(t, pid), sess, runtime, runtimeSess)
			}
			if typ := <-done; typ != "Sandbox.Timedout" {
				t.Fatalf("error type %s, want Sandbox.Timedout", typ)
			}
			if running(t, pid) || running(t, runtime) {
				t.Fatalf("after the timeout: child %d running %v, runtime %d running %v; want both gone", pid, running(t, pid), runtime, running(t, runtime))
			}
			fellBack := map[string]string{"unusable cgroup": "its processes are swept instead", "no cgroup": "not wholly contained"}
			if want, ok := fellBack[name]; ok && !strings.Contains(h.log.String(), want) {
				t.Fatalf("no fallback to sweeping in the log: %s", h.log.String())
			}
			if !strings.Contains(name, "cgroup") && strings.Contains(h.log.String(), `"level":"WARN"`) {
				t.Fatalf("a warning where the containment works: %s", h.log.String())
			}
		})
		t.Run(name+"/crash", func(t *testing.T) {
			t.Parallel()
			child := filepath.Join(t.TempDir(), "child")
			h := newHarness(t, bashBootstrap, map[string]string{"BASH_FAIL": "exit", "BASH_CHILD": child}, WithHandler("function.handler"),
				withContainment(c))
			resp := h.invoke(t)
			if typ, _ := errorType(t, resp); typ != "Runtime.ExitError" {
				t.Fatalf("error type %s, want Runtime.ExitError", typ)
			}
			if pid := readPID(t, child); running(t, pid) {
				t.Fatalf("child %d of the crashed runtime still running", pid)
			}
		})
		t.Run(name+"/close", func(t *testing.T) {
			t.Parallel()
			child := filepath.Join(t.TempDir(), "child")
			h := newHarness(t, bashBootstrap, map[string]string{"BASH_CHILD": child}, WithHandler("function.handler"), withContainment(c))
			if resp := h.invoke(t); resp.Failed() {
				t.Fatalf("invoke: %s", resp.Payload)
			}
			pid := readPID(t, child)
			if !running(t, pid) {
				t.Fatalf("child %d is not running after the invocation", pid)
			}
			if err := h.pool.Close(); err != nil {
				t.Fatal(err)
			}
			if running(t, pid) {
				t.Fatalf("child %d still running after Close", pid)
			}
		})
	}
}

// TestOutOfMemoryReportedAsLambda: an environment whose cgroup counted an out-of-memory kill when
// its process died is reported as Lambda reports one: Runtime.OutOfMemory, "Runtime exited with
// error: signal: killed", and the REPORT line's "Status: error	Error Type: Runtime.OutOfMemory"
// with the cgroup's peak as Max Memory Used. The kernel's counters are written by the test (this
// machine's cgroup v2 has no memory controller); the process really dies of SIGKILL.
func TestOutOfMemoryReportedAsLambda(t *testing.T) {
	h := newHarness(t, bashBootstrap, map[string]string{"BASH_FAIL": "exit"}, WithHandler("function.handler"),
		withContainment(subreaperContainment()))
	cfg := h.pool.cfg
	e, err := startEnvironment(context.Background(), &cfg, h.pool.out, "oom")
	if err != nil {
		t.Fatal(err)
	}
	defer e.stop()
	fake := t.TempDir()
	for name, content := range map[string]string{
		"memory.events": "low 0\nhigh 0\nmax 31\noom 1\noom_kill 1\noom_group_kill 1\n",
		"memory.peak":   "134217728\n",
	} {
		if err := os.WriteFile(filepath.Join(fake, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.sandbox.dir, e.sandbox.memory = fake, true
	resp, reusable, err := e.invoke(context.Background(), oneRecord)
	if err != nil || reusable {
		t.Fatalf("invoke: %v, reusable %v", err, reusable)
	}
	typ, msg := errorType(t, resp)
	if typ != "Runtime.OutOfMemory" || msg != "RequestId: "+resp.RequestID+" Error: Runtime exited with error: signal: killed" {
		t.Fatalf("error %s: %s; want Lambda's out-of-memory error", typ, msg)
	}
	want := regexp.MustCompile(`(?m)^REPORT RequestId: ` + resp.RequestID + `\tDuration: [0-9.]+ ms\tBilled Duration: [0-9]+ ms\tMemory Size: 128 MB\tMax Memory Used: 128 MB\tInit Duration: [0-9.]+ ms\tStatus: error\tError Type: Runtime.OutOfMemory$`)
	if !want.MatchString(h.out.String()) {
		t.Fatalf("log %q: want Lambda's REPORT line of an out-of-memory kill", h.out.String())
	}
}

// TestStaleCgroupsRemoved: the cgroup of an environment whose esm died without ending it (a
// SIGKILLed esm) is killed and removed by the next esm's start, with what still ran in it.
func TestStaleCgroupsRemoved(t *testing.T) {
	c := detected()
	if c.mode != containCgroup {
		t.Skipf("no writable cgroup v2 here: %s", c.notice)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(c.base, fmt.Sprintf("esm-%d-1", gone.Process.Pid)) // an esm that is gone
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	left := exec.Command("sleep", "300")
	left.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(fd.Fd()), Setsid: true}
	err = left.Start()
	fd.Close()
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- left.Wait() }()
	removeStale(c.base)
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		_ = left.Process.Kill()
		t.Fatal("the process left in the stale cgroup still runs")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("stale cgroup %s: %v, want it removed", dir, err)
	}
}

// TestProtectHost: esm's process becomes non-dumpable, which closes its environment and memory
// to the other processes of its user (root, as here, is not held back: see the README's threat
// model).
func TestProtectHost(t *testing.T) {
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0) })
	if err := ProtectHost(); err != nil {
		t.Fatal(err)
	}
	if d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err != nil || d != 0 {
		t.Fatalf("dumpable %d, %v: want 0", d, err)
	}
}
