package poller

import (
	"time"

	"github.com/kinesis-esm/esm/source"
)

// position is where a shard is opened: after the last record read, else after the
// checkpoint, else the shard's starting position (its first record for shards found later).
type position struct {
	kind      source.PositionType
	seq       string
	timestamp time.Time
}

// at is pos as a source opens a shard at it.
func (pos position) at() source.Position {
	return source.Position{Type: pos.kind, SequenceNumber: pos.seq, Timestamp: pos.timestamp}
}

func resumePosition(lastRead string, pr ShardProgress, ts time.Time) position {
	switch {
	case lastRead != "":
		return position{kind: source.AfterSequenceNumber, seq: lastRead}
	case pr.Checkpoint != "":
		return position{kind: source.AfterSequenceNumber, seq: pr.Checkpoint}
	case pr.Rewind != nil && pr.Rewind.Sequence != "":
		return position{kind: source.AtSequenceNumber, seq: pr.Rewind.Sequence}
	case pr.Rewind != nil && !pr.Rewind.Timestamp.IsZero():
		return position{kind: source.AtTimestamp, timestamp: pr.Rewind.Timestamp}
	case pr.Rewind != nil:
		return position{kind: source.TrimHorizon}
	case pr.Start == Latest && !pr.StartTimestamp.IsZero():
		return position{kind: source.AtTimestamp, timestamp: pr.StartTimestamp}
	case pr.Start == Latest:
		return position{kind: source.Latest}
	case pr.Start == AtTimestamp:
		return position{kind: source.AtTimestamp, timestamp: ts}
	default:
		return position{kind: source.TrimHorizon}
	}
}

// openPosition is where the reader opens (or subscribes): its resumePosition, but LATEST itself
// the first time when this run decided a LATEST start (a retry must not skip what arrived since).
// first is that position, pos the resumePosition.
func (r *reader) openPosition() (first, pos position) {
	pr := r.currentProgress()
	pos = resumePosition(r.lastRead, pr, r.p.cfg.StartingPositionTimestamp)
	first = pos
	if r.atTip && pos.kind == source.AtTimestamp && pr.Start == Latest {
		first = position{kind: source.Latest}
	}
	return first, pos
}

func (r *reader) describePosition() string {
	pos := resumePosition(r.lastRead, r.progress, r.p.cfg.StartingPositionTimestamp)
	switch pos.kind {
	case source.AfterSequenceNumber:
		return "after " + pos.seq
	case source.AtSequenceNumber:
		return "at " + pos.seq
	case source.AtTimestamp:
		return "at " + pos.timestamp.UTC().Format(time.RFC3339Nano)
	}
	return string(pos.kind)
}
