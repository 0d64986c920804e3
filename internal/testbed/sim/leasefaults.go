package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The lease protocol's classes of faults (LEASES=1 schedules with several workers), each with
// the check that judges it:
//   - a DynamoDB call of one kind that never gets an answer on one worker (FHang + ":" + op): a
//     hung heartbeat wedged the worker (liveness: every worker up at the end is a member), a
//     hung checkpoint stalled its shard with a healthy owner (lost: records never handled);
//   - workers with different lease durations (Schedule.Leases): a death is declared only a
//     whole lease of the dead worker's own after its last heartbeat (expiry);
//   - a stall of the whole table shorter than the lease, in a stretch with no other fault
//     (FFleetStall; workers of one lease duration): nobody is declared dead over it (false
//     death);
//   - joins refused (FJoinRefused, every worker's first joins): no bound item is left of an
//     epoch that never joined (leak).
const (
	FHang        = "dynamodb-call-never-answered"
	FFleetStall  = "dynamodb-whole-table-stalls"
	FJoinRefused = "dynamodb-join-refused"
)

// hangOps are the kinds of lease-table call a hang can hit (leaseOp).
var hangOps = []string{"heartbeat", "join", "roster-write", "roster-read", "checkpoint", "lease-write", "create",
	"delete", "lease-read", "batch-read", "scan", "bound-read", "bound-write"}

// leaseOf is the lease duration of the worker in slot.
func (s Schedule) leaseOf(slot int) time.Duration {
	if slot >= 0 && slot < len(s.Leases) {
		return s.Leases[slot]
	}
	return s.LeaseDuration
}

// longestLease is the longest lease duration of any worker.
func (s Schedule) longestLease() time.Duration {
	return max(s.LeaseDuration, slices.Max(append([]time.Duration{0}, s.Leases...)))
}

// withLeaseFaults adds the lease protocol's classes of faults, from a random stream of their
// own (every seed's other events stay the same).
func (s *Schedule) withLeaseFaults() {
	if s.Workers < 2 {
		return
	}
	rng := rand.New(rand.NewPCG(uint64(s.Seed), 0x1ea5e))
	pick := func(p float64) bool { return rng.Float64() < p }
	dur := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	l := s.LeaseDuration
	if pick(0.3) { // a rolling change of --lease-duration: two of them differ
		s.Leases = make([]time.Duration, s.Workers)
		for i := range s.Leases {
			s.Leases[i] = l * time.Duration(1+rng.IntN(3))
		}
		s.Leases[0], s.Leases[1] = l, l*time.Duration(2+rng.IntN(3))
	}
	for range rng.IntN(4) {
		op := hangOps[rng.IntN(len(hangOps))]
		s.Events = append(s.Events, Event{At: dur(time.Second, s.Length), Kind: EvFault, Fault: FHang + ":" + op,
			D: dur(100*time.Millisecond, 2*time.Second), W: rng.IntN(s.Workers), OneWorker: true})
	}
	if pick(0.4) {
		s.Events = append(s.Events, Event{Kind: EvFault, Fault: FJoinRefused, D: dur(500*time.Millisecond, 4*time.Second)})
	}
	if pick(0.8) && len(s.Leases) == 0 {
		d := dur(l/2, l*19/20)
		for range 100 {
			if t := dur(5*time.Second, s.Length); s.quiet(t-stallQuiet*l, t+d+stallQuiet*l) {
				s.Events = append(s.Events, Event{At: t, Kind: EvFault, Fault: FFleetStall, D: d})
				break
			}
		}
	}
}

// stallQuiet: a stall of the whole table comes with no other fault, crash, freeze or stop for
// this many lease durations before and after it.
const stallQuiet = 2

// quiet: no fault, crash, freeze or stop is on at any time in [from, to].
func (s Schedule) quiet(from, to time.Duration) bool {
	for _, e := range s.Events {
		switch e.Kind {
		case EvFault, EvCrash, EvFreeze, EvStop:
			if e.At <= to && e.At+e.D >= from {
				return false
			}
		}
	}
	return true
}

// leaseOp names the kind of a lease-table call (hangOps).
func leaseOp(owner string, method string, key map[string]dtypes.AttributeValue, up *dynamodb.UpdateItemInput) string {
	k, _ := key["leaseKey"].(*dtypes.AttributeValueMemberS)
	var name string
	if k != nil {
		name = k.Value
	}
	switch {
	case method == "Scan":
		return "scan"
	case method == "BatchGetItem":
		return "batch-read"
	case strings.HasPrefix(name, "!esm-bound:"):
		if method == "GetItem" {
			return "bound-read"
		}
		return "bound-write"
	case name == "!esm-workers" && method == "GetItem":
		return "roster-read"
	case name == "!esm-workers" && up != nil:
		expr := aws.ToString(up.UpdateExpression)
		switch {
		case up.ExpressionAttributeNames["#me"] == owner && strings.Contains(expr, "#m.#me.#h = :h"):
			return "heartbeat"
		case strings.HasPrefix(expr, "SET #m.#me = :entry"):
			return "join"
		}
		return "roster-write"
	case method == "GetItem":
		return "lease-read"
	case method == "PutItem":
		return "create"
	case method == "DeleteItem":
		return "delete"
	case up != nil && isCheckpoint(up):
		return "checkpoint"
	}
	return "lease-write"
}

// leaseFaults holds a worker's call of kind op as the lease protocol's faults say: a hang is
// answered never (the call returns only when its context ends), a stall of the whole table
// until the stall ends, and a refused join at once.
func (d simDynamo) leaseFaults(ctx context.Context, op string) error {
	inc, w := d.inc, d.inc.w
	if w.hit(inc, FHang+":"+op) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-inc.dead:
			return errDead
		}
	}
	w.mu.Lock()
	until, stalled := w.faults[FFleetStall]
	stalled = stalled && w.now().Before(until)
	if stalled {
		w.injected[FFleetStall]++
	}
	w.mu.Unlock()
	if stalled {
		t := time.NewTimer(until.Sub(w.now()))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		case <-inc.dead:
			return errDead
		}
	}
	if op == "join" && w.active(FJoinRefused) {
		return &dtypes.ProvisionedThroughputExceededException{Message: aws.String("sim: join refused (throttled)")}
	}
	return nil
}

// leaseJudge is what the lease protocol's checks record during a run.
type leaseJudge struct {
	joined  map[int64]bool             // epochs whose join landed in the roster
	started map[*incarnation]time.Time // when each incarnation started
}

func newLeaseJudge() *leaseJudge {
	return &leaseJudge{joined: map[int64]bool{}, started: map[*incarnation]time.Time{}}
}

// slotOf is the slot of a worker id ("worker-<slot>-<incarnation>").
func slotOf(owner string) int {
	parts := strings.Split(owner, "-")
	if len(parts) != 3 {
		return -1
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil {
		return -1
	}
	return n
}

// judgeDeclarationLocked judges a declaration that worker dead is dead, landed now, whose last
// heartbeat landed at last: 0.9 of its own lease later at least (its Held ended at 0.8; the rest
// is the clock-rate margin; lease/DESIGN.md), and not over a stall of the whole table shorter
// than a lease in a stretch with no other fault (false death).
func (w *world) judgeDeclarationLocked(owner, dead string, last time.Time) {
	now := w.now()
	w.declared++
	if l := w.s.leaseOf(slotOf(dead)); now.Sub(last) < l-l/10 {
		w.violateLocked("expiry: %s declared %s dead %s after its last heartbeat landed; its lease is %s",
			owner, dead, now.Sub(last).Round(time.Millisecond), l.Round(time.Millisecond))
	}
	at := now.Sub(epoch)
	for _, e := range w.s.Events {
		if e.Fault == FFleetStall && at >= e.At && at <= e.At+e.D+stallQuiet*w.s.LeaseDuration {
			w.violateLocked("false death: %s declared %s dead %s after a stall of the whole table for %s (shorter than any lease, no other fault) began",
				owner, dead, (at - e.At).Round(time.Millisecond), e.D.Round(time.Millisecond))
		}
	}
}

// noteJoin records the epoch of a join that landed.
func (w *world) noteJoin(in *dynamodb.UpdateItemInput) func() {
	entry, _ := in.ExpressionAttributeValues[":entry"].(*dtypes.AttributeValueMemberM)
	if entry == nil {
		return nil
	}
	e, _ := entry.Value["e"].(*dtypes.AttributeValueMemberN)
	if e == nil {
		return nil
	}
	epoch, _ := strconv.ParseInt(e.Value, 10, 64)
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.lj.joined[epoch] = true
	}
}

// checkMembers: every worker up for a while at the end, no fault on, is in the roster (a worker
// wedged by a call that never returns was declared dead and never joined again), and not
// marked leaving (a worker once marked so by a lost lease stayed marked).
func (d *driver) checkMembers() {
	w := d.w
	if w.db == nil {
		return
	}
	l := w.s.longestLease()
	w.mu.Lock()
	end := w.now()
	for _, sl := range d.slots {
		if sl.inc != nil && sl.inc.frozen.After(end) {
			end = sl.inc.frozen
		}
	}
	w.mu.Unlock()
	d.until(end.Add(3 * l))
	out, err := w.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(leaseTable), ConsistentRead: aws.Bool(true),
		Key: map[string]dtypes.AttributeValue{"leaseKey": &dtypes.AttributeValueMemberS{Value: "!esm-workers"}}})
	if err != nil {
		w.violate("liveness: read the roster: %v", err)
		return
	}
	members, _ := out.Item["workers"].(*dtypes.AttributeValueMemberM)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, sl := range d.slots {
		inc := sl.inc
		if inc == nil || w.now().Sub(w.lj.started[inc]) < 2*l {
			continue
		}
		var entry *dtypes.AttributeValueMemberM
		if members != nil {
			entry, _ = members.Value[inc.owner].(*dtypes.AttributeValueMemberM)
		}
		if entry == nil {
			w.violateLocked("liveness: worker %s has run for %s, %s after the last fault, but is not in the roster", inc.owner,
				w.now().Sub(w.lj.started[inc]).Round(time.Millisecond), (3 * l).Round(time.Millisecond))
			continue
		}
		if leaving, _ := entry.Value["l"].(*dtypes.AttributeValueMemberBOOL); leaving != nil && leaving.Value {
			w.violateLocked("liveness: worker %s runs and claims, but its roster entry says it is leaving: the others leave it out of their placement", inc.owner)
		}
	}
}

// checkBounds, once every worker stopped: no bound item is left of an epoch that never joined,
// by a worker that stopped gracefully with nothing failing (failed joins left one each).
func (w *world) checkBounds(stopped map[string]bool) {
	if w.db == nil {
		return
	}
	out, err := w.db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(leaseTable)})
	if err != nil {
		w.violate("leak: scan the lease table: %v", err)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, it := range out.Items {
		k, _ := it["leaseKey"].(*dtypes.AttributeValueMemberS)
		if k == nil || !strings.HasPrefix(k.Value, "!esm-bound:") {
			continue
		}
		rest := strings.TrimPrefix(k.Value, "!esm-bound:")
		i := strings.LastIndex(rest, ":")
		if i < 0 {
			continue
		}
		owner := rest[:i]
		epoch, err := strconv.ParseInt(rest[i+1:], 10, 64)
		if err == nil && stopped[owner] && !w.lj.joined[epoch] {
			w.violateLocked("leak: bound item %s of an epoch that never joined, left by %s after a clean stop", k.Value, owner)
		}
	}
}

func (s Schedule) leasesString() string {
	if len(s.Leases) == 0 {
		return ""
	}
	return fmt.Sprintf("  lease durations by slot: %v\n", s.Leases)
}
