package testkit

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// clockTick is Linux's USER_HZ, the unit of the CPU times in /proc/PID/stat: 100 on every
// architecture Go supports (the kernel exports it as such whatever its internal HZ).
const clockTick = 10 * time.Millisecond

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
	dir := "/proc/self"
	if pid != 0 {
		dir = "/proc/" + strconv.Itoa(pid)
	}
	s := ProcSample{At: time.Now()}
	status, err := os.ReadFile(dir + "/status")
	if err != nil {
		return s, err
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return s, fmt.Errorf("%s/status: %s: %w", dir, name, err)
		}
		if name == "VmRSS" {
			s.RSS = kb << 10
		} else {
			s.PeakRSS = kb << 10
		}
	}
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return s, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: the fields that follow
	// start after the last ')'. utime and stime are fields 14 and 15.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return s, fmt.Errorf("%s/stat: unexpected format %q", dir, stat)
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 13 {
		return s, fmt.Errorf("%s/stat: unexpected format %q", dir, stat)
	}
	for _, f := range fields[11:13] {
		ticks, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return s, fmt.Errorf("%s/stat: %w", dir, err)
		}
		s.CPU += time.Duration(ticks) * clockTick
	}
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
	calls0 := getRecords()
	start, err := ReadProc(pid)
	if err != nil {
		b.Fatal(err)
	}
	time.Sleep(window) // a measured window, not synchronisation: the state was awaited before
	end, err := ReadProc(pid)
	if err != nil {
		b.Fatal(err)
	}
	calls := getRecords() - calls0
	const mb = 1 << 20
	elapsed, cpu := end.At.Sub(start.At), end.CPU-start.CPU
	b.ReportMetric(float64(end.RSS)/mb, "RSS-MB")
	b.ReportMetric(float64(end.PeakRSS)/mb, "peakRSS-MB")
	b.ReportMetric(100*float64(cpu)/float64(elapsed), "cpu-%core")
	b.ReportMetric(float64(calls)/elapsed.Seconds(), "GetRecords/s")
	if calls == 0 {
		b.Fatal("no GetRecords call during the window: nothing was polling")
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(calls), "cpu-us/GetRecords")
	b.Logf("RSS %d MB (peak %d MB), %.1f%% of a core over %s, %.0f GetRecords/s, %.0f µs of CPU per GetRecords; load average %s",
		end.RSS>>20, end.PeakRSS>>20, 100*float64(cpu)/float64(elapsed), elapsed.Round(time.Millisecond),
		float64(calls)/elapsed.Seconds(), float64(cpu.Microseconds())/float64(calls), LoadAverage())
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
