// Package testkit holds the small helpers the project's tests share. It is imported by tests only.
package testkit

import (
	"bytes"
	"flag"
	"os"
	"sync"
	"testing"
	"time"
)

// WaitFor checks cond every 10 ms until it holds, and fails t if it still does not after d.
// Tests await conditions with it instead of sleeping.
func WaitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// SyncBuffer is a bytes.Buffer that several goroutines may write to at once (a child process's
// stdout and stderr, a logger) while a test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// LineCount counts the complete lines of a file that another process may still be writing to
// (0 when it does not exist yet): a line is counted once its newline is written.
func LineCount(t testing.TB, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

// Fuzzing reports whether the test binary runs a fuzz target (go test -fuzz, or one of its
// workers): a TestMain may then skip what only the other tests need, such as emulators.
func Fuzzing() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	for _, name := range []string{"test.fuzz", "test.fuzzworker"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" && f.Value.String() != "false" {
			return true
		}
	}
	return false
}
