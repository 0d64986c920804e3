package testkit

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/procfs"
)

// ProcSample is one reading of a Linux process's memory and CPU time from /proc.
type ProcSample struct {
	At      time.Time
	RSS     int64         // resident set size now, bytes (VmRSS)
	PeakRSS int64         // highest resident set size so far, bytes (VmHWM)
	CPU     time.Duration // user plus system time used so far (utime + stime)
}

// ReadProc reads pid's memory and CPU time (pid 0: this process) from /proc/PID/status and
// /proc/PID/stat.
func ReadProc(pid int) (ProcSample, error) {
	s := ProcSample{At: time.Now()}
	p, err := procfs.Self()
	if pid != 0 {
		p, err = procfs.NewProc(pid)
	}
	if err != nil {
		return s, err
	}
	status, err := p.NewStatus()
	if err != nil {
		return s, err
	}
	stat, err := p.Stat()
	if err != nil {
		return s, err
	}
	s.RSS, s.PeakRSS = int64(status.VmRSS), int64(status.VmHWM)
	s.CPU = time.Duration(stat.CPUTime() * float64(time.Second))
	return s, nil
}

// MeasureProc measures an idle process that polls Kinesis: it reads pid (0: this process) and
// getRecords (the process's GetRecords calls so far) at the start and the end of window, and
// reports on b RSS-MB (resident memory at the end), peakRSS-MB (the highest it reached since the
// process started), cpu-%core (CPU time used during the window over the window's length: 100 is
// one core busy), GetRecords/s and cpu-us/GetRecords (CPU time per call), and logs them with the
// load average. It fails b when no GetRecords call was made during the window.
func MeasureProc(b *testing.B, pid int, window time.Duration, getRecords func() int64) {
	b.Helper()
	MeasureProcPer(b, pid, window, "GetRecords", getRecords)
}

// MeasureProcPer is MeasureProc with another unit of work than a GetRecords call: unit names the
// count (unit/s, cpu-us/unit), and count returns how many the process has done so far.
func MeasureProcPer(b *testing.B, pid int, window time.Duration, unit string, count func() int64) {
	b.Helper()
	calls0 := count()
	start, err := ReadProc(pid)
	if err != nil {
		b.Fatal(err)
	}
	time.Sleep(window) // a measured window, not synchronisation: the state was awaited before
	end, err := ReadProc(pid)
	if err != nil {
		b.Fatal(err)
	}
	calls := count() - calls0
	const mb = 1 << 20
	elapsed, cpu := end.At.Sub(start.At), end.CPU-start.CPU
	pct, rate := 100*float64(cpu)/float64(elapsed), float64(calls)/elapsed.Seconds()
	b.ReportMetric(float64(end.RSS)/mb, "RSS-MB")
	b.ReportMetric(float64(end.PeakRSS)/mb, "peakRSS-MB")
	b.ReportMetric(pct, "cpu-%core")
	b.ReportMetric(rate, unit+"/s")
	if calls == 0 {
		b.Fatalf("no %s during the window: nothing was polling", unit)
	}
	perCall := float64(cpu.Microseconds()) / float64(calls)
	b.ReportMetric(perCall, "cpu-us/"+unit)
	b.Logf("RSS %d MB (peak %d MB), %.1f%% of a core over %s, %.0f %s/s, %.0f µs of CPU per %s; load average %s",
		end.RSS>>20, end.PeakRSS>>20, pct, elapsed.Round(time.Millisecond), rate, unit, perCall, unit, LoadAverage())
}

// LoadAverage returns the first line of /proc/loadavg (the 1, 5 and 15 minute load averages and
// more), for a benchmark to log next to CPU figures measured on a shared machine.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// ShardReads follows a Kinesis reader's iterators to tell which shards it has read: each
// iterator GetShardIterator returned is mapped to its shard, and each GetRecords call on a known
// iterator marks the shard as read and maps the next iterator to it. Safe for concurrent use.
type ShardReads struct {
	mu         sync.Mutex
	iterShard  map[string]string // iterator not used yet → its shard
	read       map[string]bool   // shards read at least once
	getRecords int64             // GetRecords calls that returned
}

// NewShardReads returns an empty ShardReads.
func NewShardReads() *ShardReads {
	return &ShardReads{iterShard: map[string]string{}, read: map[string]bool{}}
}

// Iterator records that GetShardIterator gave iterator it for shard.
func (r *ShardReads) Iterator(shard, it string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.iterShard[it] = shard
}

// GetRecords records a GetRecords call on iterator it that returned next (empty: none).
func (r *ShardReads) GetRecords(it, next string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.getRecords++
	shard, ok := r.iterShard[it]
	if !ok {
		return
	}
	delete(r.iterShard, it)
	r.read[shard] = true
	if next != "" {
		r.iterShard[next] = shard
	}
}

// Read returns how many distinct shards have been read, and how many GetRecords calls returned.
func (r *ShardReads) Read() (shards int, getRecords int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.read), r.getRecords
}

// ForEachCount runs fn as one sub-benchmark per count of counts, a comma-separated list of
// positive integers given on the command line (a -shards flag): "shards=N" for each N.
func ForEachCount(b *testing.B, counts string, fn func(b *testing.B, n int)) {
	for f := range strings.SplitSeq(counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("-shards: %q is not a shard count", f)
		}
		b.Run(fmt.Sprintf("shards=%d", n), func(b *testing.B) {
			for range b.N {
				fn(b, n)
			}
		})
	}
}

// IdleShardsFlags registers the command-line flags of a benchmark of many idle shards, for a
// test binary's package-level variables: -shards, the shard counts to measure (comma-separated,
// default 1000; see ForEachCount), and -idle-window, how long to measure (default 30 s).
func IdleShardsFlags() (shards *string, window *time.Duration) {
	return flag.String("shards", "1000", "shard counts to measure, comma-separated (BenchmarkManyIdleShards)"),
		flag.Duration("idle-window", 30*time.Second, "how long to measure the idle process (BenchmarkManyIdleShards)")
}
