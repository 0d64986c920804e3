package testkit

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestWaitForReturnsOnceTrue(t *testing.T) {
	n := 0
	WaitFor(t, "three checks", time.Second, func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("checked %d times", n)
	}
}

// fatalRecorder records Fatalf instead of stopping the test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper()                        {}
func (f *fatalRecorder) Fatalf(format string, a ...any) { f.msg = fmt.Sprintf(format, a...) }

func TestWaitForFailsAfterDeadline(t *testing.T) {
	f := &fatalRecorder{TB: t}
	calls := 0
	WaitFor(f, "never", 30*time.Millisecond, func() bool { calls++; return f.msg != "" })
	if f.msg == "" || calls < 2 {
		t.Fatalf("no failure after the deadline (%d checks)", calls)
	}
}

func TestSyncBufferConcurrentWrites(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				fmt.Fprint(&b, "x")
			}
		}()
	}
	wg.Wait()
	if len(b.String()) != 800 {
		t.Fatalf("%d bytes, want 800", len(b.String()))
	}
}
