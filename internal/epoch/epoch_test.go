package epoch

import (
	"testing"
	"time"
)

// TestAppendSeconds: golden values, including one that float64(UnixNano)/1e9 prints as
// 1796158428.8430002, and sub-millisecond times, which Kinesis does not record.
func TestAppendSeconds(t *testing.T) {
	for _, tt := range []struct {
		t    time.Time
		want string
	}{
		{time.Unix(1796158428, 843_000_000), "1796158428.843"},
		{time.Unix(1796158428, 843_999_999), "1796158428.843"},
		{time.Unix(1545084650, 987_000_000), "1545084650.987"},
		{time.Unix(1545084650, 980_000_000), "1545084650.98"},
		{time.Unix(1545084650, 0), "1545084650"},
		{time.Unix(1545084650, 1_000_000), "1545084650.001"},
	} {
		if got := string(AppendSeconds(nil, tt.t)); got != tt.want {
			t.Errorf("AppendSeconds(%v) = %s, want %s", tt.t, got, tt.want)
		}
	}
	// Every millisecond of a second prints with at most three decimals.
	for ms := range int64(1000) {
		s := string(AppendSeconds(nil, time.UnixMilli(1796158428000+ms)))
		if i := len("1796158428."); len(s) > i+3 {
			t.Fatalf("%d ms prints as %s", ms, s)
		}
	}
}
