package poller

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
)

// lateCoord grants no lease before grantAt: a lease table's claim comes seconds after the start.
type lateCoord struct {
	*memWorker
	grantAt time.Time
}

func (c *lateCoord) Claim(ctx context.Context, candidates []string) ([]string, error) {
	if time.Now().Before(c.grantAt) {
		return nil, nil
	}
	return c.memWorker.Claim(ctx, candidates)
}

// TestLatestWithCoordinatorReadsFromTheStart: with a coordinator, a new LATEST mapping reads
// from the start it decided and recorded, not from LATEST at the moment its lease is granted:
// records written between the start and the claim are delivered (simulation seeds 4 and 33
// with LEASES=1 lost them).
func TestLatestWithCoordinatorReadsFromTheStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fakekinesis.New()
		arn := f.CreateStream("s", 1)
		f.Put("s", "key", []byte("before"))
		time.Sleep(time.Second)
		w := &lateCoord{memWorker: &memWorker{t: newLeaseTable(), id: "w"}, grantAt: time.Now().Add(3 * time.Second)}
		cfg := Config{StartingPosition: Latest, PollInterval: 10 * time.Millisecond, MinPollSpacing: time.Millisecond,
			ShardSyncInterval: time.Hour, ClaimInterval: 100 * time.Millisecond}
		inv := &timedInvoker{}
		p, err := New(kinesisSource(f, arn), cfg, w, inv, WithCoordinator(w))
		if err != nil {
			t.Fatal(err)
		}
		cancel, done := runPoller(t, p)
		time.Sleep(time.Second)
		var want []string
		for range 3 { // after the start, before the lease is granted
			_, seq := f.Put("s", "key", []byte("between"))
			want = append(want, seq)
		}
		time.Sleep(4 * time.Second)
		synctest.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if w.claims.Load() == 0 {
			t.Fatal("no claim was made")
		}
		var got []string
		for _, c := range inv.invocations() {
			got = append(got, c.seqs...)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("got %v, want the 3 records written after the start, before the claim %v", got, want)
		}
	})
}
