package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Exit is how one esm process ended.
type Exit struct {
	Worker string
	At     time.Time
	// Cause is what ended it: "sigkill" or "sigterm" (sent by the run), or "self" (it exited on
	// its own, which under faults that do not persist is a violation).
	Cause string
	Code  int    // exit code, -1 when a signal ended it
	Err   string // the wait error, if any
	// Uptime is how long the process had run.
	Uptime time.Duration
}

// Worker is one esm worker: a process restarted under the same worker id each time it ends.
type Worker struct {
	ID    string
	Proxy *Proxy

	bin  string
	args []string
	env  []string
	dir  string
	logf *os.File

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	started time.Time
	logFrom int64  // the log's size when the process started
	ending  string // the cause the run is ending it with, "" for none
	paused  bool
	exits   []Exit
}

// Start runs a new process of the worker. It must not be running.
func (w *Worker) Start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	cmd := exec.Command(w.bin, w.args...)
	cmd.Dir, cmd.Env = w.dir, w.env
	cmd.Stdout, cmd.Stderr = w.logf, w.logf
	dieWithParent(cmd)
	fmt.Fprintf(w.logf, "=== chaos: start %s at %s\n", w.ID, time.Now().Format(time.RFC3339Nano))
	if fi, err := w.logf.Stat(); err == nil {
		w.logFrom = fi.Size()
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start worker %s: %w", w.ID, err)
	}
	done := make(chan struct{})
	w.cmd, w.done, w.started, w.ending, w.paused = cmd, done, time.Now(), "", false
	go func() {
		err := cmd.Wait()
		w.mu.Lock()
		e := Exit{Worker: w.ID, At: time.Now(), Cause: w.ending, Code: cmd.ProcessState.ExitCode(), Uptime: time.Since(w.started)}
		if e.Cause == "" {
			e.Cause = "self"
		}
		if err != nil {
			e.Err = err.Error()
		}
		w.exits = append(w.exits, e)
		fmt.Fprintf(w.logf, "=== chaos: %s exited (%s) code %d at %s\n", w.ID, e.Cause, e.Code, e.At.Format(time.RFC3339Nano))
		w.mu.Unlock()
		close(done)
	}()
	return nil
}

// Running reports whether a process of the worker runs (paused or not).
func (w *Worker) Running() bool {
	w.mu.Lock()
	done := w.done
	w.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Uptime is how long the current process has run (0 when none runs).
func (w *Worker) Uptime() time.Duration {
	if !w.Running() {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return time.Since(w.started)
}

// end signals the process with cause and waits up to wait for it to exit.
func (w *Worker) end(sig syscall.Signal, cause string, wait time.Duration) error {
	w.mu.Lock()
	cmd, done, paused := w.cmd, w.done, w.paused
	w.ending = cause
	w.mu.Unlock()
	if done == nil {
		return nil
	}
	_ = cmd.Process.Signal(sig)
	if paused {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	select {
	case <-done:
		return nil
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("worker %s did not exit within %s of %s", w.ID, wait, sig)
	}
}

// AwaitLogging waits (at most wait) until the current process has logged its first line: it has
// then installed its signal handler, so that a SIGTERM tests esm's stop rather than the
// default action of a signal that arrives while the Go runtime starts.
func (w *Worker) AwaitLogging(wait time.Duration) bool {
	w.mu.Lock()
	from, done := w.logFrom, w.done
	w.mu.Unlock()
	deadline := time.Now().Add(wait)
	for {
		if b, err := os.ReadFile(w.logf.Name()); err == nil && int64(len(b)) > from && strings.Contains(string(b[from:]), "level=") {
			return true
		}
		select {
		case <-done:
			return false
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// Kill ends the process with SIGKILL.
func (w *Worker) Kill() { _ = w.end(syscall.SIGKILL, "sigkill", time.Minute) }

// Term ends the process with SIGTERM, waiting at most wait before it kills it.
func (w *Worker) Term(wait time.Duration) error { return w.end(syscall.SIGTERM, "sigterm", wait) }

// Pause stops the process (SIGSTOP); Resume continues it.
func (w *Worker) Pause() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd != nil && !w.paused {
		_ = w.cmd.Process.Signal(syscall.SIGSTOP)
		w.paused = true
	}
}

// Resume continues a paused process.
func (w *Worker) Resume() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd != nil && w.paused {
		_ = w.cmd.Process.Signal(syscall.SIGCONT)
		w.paused = false
	}
}

// Exits returns how the worker's processes ended so far.
func (w *Worker) Exits() []Exit {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Exit(nil), w.exits...)
}

// LogTail returns the last n lines of the worker's log (every process of it).
func (w *Worker) LogTail(n int) string {
	b, err := os.ReadFile(w.logf.Name())
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
