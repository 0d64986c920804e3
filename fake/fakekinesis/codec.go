package fakekinesis

import (
	"crypto/md5"
	"encoding/binary"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// Sequence number layout: "49", then a 42-digit per-stream counter, then the
// 12-digit shard number. The counter dominates, so numbers increase across
// the whole stream; the tail lets GetShardIterator reject numbers from
// another shard.
const (
	seqLen       = 56
	seqShardLen  = 12
	shardPrefix  = "shardId-"
	shardNumLen  = 12
	iterPrefix   = "fakekinesis/1/"
	pagePrefix   = "fakekinesis-page-"
	seqHeadDigit = "49"
)

// CompareSeq compares two Kinesis sequence numbers as unsigned decimal
// integers and returns -1, 0 or +1. Leading zeros are ignored. It does not
// allocate. Strings that are not decimal compare by length, then bytewise,
// which is consistent but meaningless.
func CompareSeq(a, b string) int {
	a = strings.TrimLeft(a, "0")
	b = strings.TrimLeft(b, "0")
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return strings.Compare(a, b)
}

// formatSeq renders counter and shard number in the 56-digit layout.
func formatSeq(counter uint64, shardNum int) string {
	var b [seqLen]byte
	copy(b[:], seqHeadDigit)
	putDigits(b[len(seqHeadDigit):seqLen-seqShardLen], counter)
	putDigits(b[seqLen-seqShardLen:], uint64(shardNum))
	return string(b[:])
}

// seqShard returns the shard number encoded in a sequence number made by
// formatSeq, and false for anything else.
func seqShard(seq string) (int, bool) {
	if len(seq) != seqLen || !strings.HasPrefix(seq, seqHeadDigit) {
		return 0, false
	}
	for i := 0; i < len(seq); i++ {
		if seq[i] < '0' || seq[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(seq[seqLen-seqShardLen:], 10, 63)
	return int(n), err == nil
}

func putDigits(dst []byte, v uint64) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = byte('0' + v%10)
		v /= 10
	}
}

// shardName renders shard number n as shardId-000000000007.
func shardName(n int) string {
	var b [len(shardPrefix) + shardNumLen]byte
	copy(b[:], shardPrefix)
	putDigits(b[len(shardPrefix):], uint64(n))
	return string(b[:])
}

// shardNumber parses a shard id made by shardName.
func shardNumber(id string) (int, bool) {
	digits, ok := strings.CutPrefix(id, shardPrefix)
	if !ok || len(digits) != shardNumLen {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 63)
	if err != nil {
		return 0, false
	}
	return int(n), true
}

// iterator is the decoded form of a shard iterator.
type iterator struct {
	stream, shard, pos int
	issued             time.Time
}

// encodeIterator renders it as an opaque-looking string. Consumers must not
// parse it; only the fake does.
func encodeIterator(it iterator) string {
	var buf [96]byte
	b := append(buf[:0], iterPrefix...)
	b = strconv.AppendInt(b, int64(it.stream), 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(it.shard), 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(it.pos), 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, it.issued.UnixNano(), 10)
	return string(b)
}

// decodeIterator parses what encodeIterator made, without allocating.
func decodeIterator(s string) (iterator, bool) {
	rest, ok := strings.CutPrefix(s, iterPrefix)
	if !ok {
		return iterator{}, false
	}
	var f [4]int64
	for i := range f {
		field := rest
		if i < len(f)-1 {
			if field, rest, ok = strings.Cut(rest, "/"); !ok {
				return iterator{}, false
			}
		}
		v, err := strconv.ParseInt(field, 10, 64)
		if err != nil || (i < 3 && v < 0) {
			return iterator{}, false
		}
		f[i] = v
	}
	return iterator{stream: int(f[0]), shard: int(f[1]), pos: int(f[2]), issued: time.Unix(0, f[3])}, true
}

// u128 is an unsigned 128-bit hash key, compared without allocating.
type u128 struct{ hi, lo uint64 }

func (a u128) less(b u128) bool { return a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo) }

// hashKey is the MD5 of a partition key read as a big-endian 128-bit integer,
// which is how Kinesis maps partition keys to shards.
func hashKey(partitionKey string) u128 {
	sum := md5.Sum([]byte(partitionKey))
	return u128{binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:])}
}

func (a u128) big() *big.Int {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], a.hi)
	binary.BigEndian.PutUint64(b[8:], a.lo)
	return new(big.Int).SetBytes(b[:])
}

// u128Of converts v, which must lie in [0, 2^128-1].
func u128Of(v *big.Int) u128 {
	var b [16]byte
	v.FillBytes(b[:])
	return u128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

// evenRanges divides [0, 2^128-1] into n contiguous ranges as CreateStream
// does: each has floor(2^128/n) keys and the last one takes the remainder.
func evenRanges(n int) [][2]u128 {
	space := new(big.Int).Lsh(big.NewInt(1), 128)
	width := new(big.Int).Div(space, big.NewInt(int64(n)))
	out := make([][2]u128, n)
	start := new(big.Int)
	for i := range out {
		end := new(big.Int).Add(start, width)
		if i == n-1 {
			end = space
		}
		out[i] = [2]u128{u128Of(start), u128Of(end.Sub(end, big.NewInt(1)))}
		start.Add(start, width)
	}
	return out
}

// halve splits [lo, hi] into two non-empty halves, as SplitShard does with a
// NewStartingHashKey at the midpoint. ok is false for a single-key range.
func halve(lo, hi u128) (a, b [2]u128, ok bool) {
	if lo == hi {
		return a, b, false
	}
	l, h := lo.big(), hi.big()
	mid := new(big.Int).Sub(h, l)
	mid.Add(mid, big.NewInt(1)).Rsh(mid, 1).Add(mid, l)
	return [2]u128{lo, u128Of(new(big.Int).Sub(mid, big.NewInt(1)))}, [2]u128{u128Of(mid), hi}, true
}

// adjacent reports whether range a ends right before range b starts.
func adjacent(aHi, bLo u128) bool {
	next := aHi
	next.lo++
	if next.lo == 0 {
		next.hi++
	}
	return next == bLo && aHi != (u128{^uint64(0), ^uint64(0)})
}
