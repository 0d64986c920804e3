package poller

import (
	"context"
	"time"
)

// readRetention reads the stream's retention period (DescribeStreamSummary's
// RetentionPeriodHours). Run reads it at start and again at every shard sync, so that an
// IncreaseStreamRetentionPeriod or DecreaseStreamRetentionPeriod is noticed within
// ShardSyncInterval. A failed read keeps the last known value (none at start: records are then
// never discarded for retention) and is logged; it never stops the mapping.
func (p *Poller) readRetention(ctx context.Context) {
	d, err := p.src.Retention(ctx)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("reading the stream's retention period failed; will retry at the next shard sync", "err", err)
		}
		return
	}
	if d <= 0 {
		return
	}
	if old := time.Duration(p.retention.Swap(int64(d))); old != d {
		p.log.Info("stream retention period", "hours", d.Hours())
	}
}

// ageLimit is how old a record may be before it is discarded, and whether the limit is the
// stream's retention period: MaximumRecordAgeInSeconds, or for a batch being retried the shorter
// of it and the retention period. A record retried past the retention period has left the stream
// (Lambda retries "until the record expires"), so retrying it from memory would block its shard
// for good. A record read for the first time is invoked even when it is older (Kinesis trims
// lazily, and a backlog at the trim horizon is still delivered). ok is false when no limit applies.
func (p *Poller) ageLimit(retrying bool) (limit time.Duration, retention, ok bool) {
	maxAge := time.Duration(p.cfg.RecordAgeSeconds()) * time.Second
	var ret time.Duration
	if retrying {
		ret = time.Duration(p.retention.Load())
	}
	switch {
	case ret > 0 && (maxAge < 0 || ret < maxAge):
		return ret, true, true
	case maxAge >= 0:
		return maxAge, false, true
	}
	return 0, false, false
}
