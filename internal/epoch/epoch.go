// Package epoch writes times as Lambda's Kinesis event does: approximateArrivalTimestamp is a JSON
// number of seconds since the epoch with the millisecond Kinesis records (1796158428.843).
package epoch

import (
	"strconv"
	"time"
)

// Seconds is t in seconds, at Kinesis' millisecond resolution: the float64 nearest to the
// millisecond value, so that its shortest form has at most three decimals.
func Seconds(t time.Time) float64 { return float64(t.UnixMilli()) / 1e3 }

// AppendSeconds appends Seconds(t) as a JSON number in its shortest form (1796158428.843, never
// 1796158428.8430002).
func AppendSeconds(b []byte, t time.Time) []byte {
	return strconv.AppendFloat(b, Seconds(t), 'f', -1, 64)
}
