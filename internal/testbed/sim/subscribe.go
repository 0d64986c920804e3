package sim

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
)

// Enhanced fan-out in the simulation. A third of the seeds read through a registered consumer:
// records are pushed by the fake's SubscribeToShard, with shortened subscription lifetimes (so
// renewals happen within a run), Kinesis' 5-second ResourceInUse window (restarts and crashes hit
// it), and two fault kinds of their own. The choice and those faults come from their own random
// stream, so every seed's other events are the same as without them.

// Subscription fault kinds (only in seeds that read through a consumer).
const (
	FSubDropped = "subscription-dropped" // events in flight cut the connection
	FSubInUse   = "subscription-in-use"  // SubscribeToShard answers ResourceInUseException
)

var subscriptionFaults = []string{FSubDropped, FSubInUse}

// withSubscriptions decides whether the seed reads through a consumer and, if so, adds its
// subscription faults and lifetime.
func (s *Schedule) withSubscriptions() {
	rng := rand.New(rand.NewPCG(uint64(s.Seed), 0xef0))
	if rng.Float64() >= 1.0/3 {
		return
	}
	s.EFO = true
	s.SubLifetime = time.Duration(10+rng.IntN(80)) * time.Second
	for range rng.IntN(4) {
		s.Events = append(s.Events, Event{At: time.Duration(rng.Int64N(int64(s.Length))), Kind: EvFault,
			Fault: subscriptionFaults[rng.IntN(len(subscriptionFaults))], D: time.Duration(100+rng.IntN(8000)) * time.Millisecond})
	}
}

// subscriptionTiming is the fake's option for the seed's subscription lifetime.
func (s Schedule) subscriptionTiming() fakekinesis.Option {
	return fakekinesis.WithSubscriptionTiming(s.SubLifetime, 0)
}

type incKey struct{}

// useSubscriptions registers the consumer of a seed that reads through one, and injects the
// subscription faults into the fake's event streams.
func (w *world) useSubscriptions() {
	if !w.s.EFO {
		return
	}
	w.consumer = w.fake.RegisterConsumer("sim", "esm")
	w.fake.Inject(func(op string, in any) error {
		se, ok := in.(*fakekinesis.SubscriptionEvent)
		if !ok || op != fakekinesis.OpSubscribeToShardEvent {
			return nil
		}
		inc, _ := se.Context.Value(incKey{}).(*incarnation)
		if inc == nil {
			return nil
		}
		// A frozen process reads nothing (the connection holds the events); a dead one's
		// connections are gone.
		if err := inc.gate(se.Context); err != nil {
			return fakekinesis.ErrDropped
		}
		if len(se.Event.Records) > 0 && (w.active(FSubDropped) || w.hit(inc, FCutKinesis, FCutBoth)) {
			return fakekinesis.ErrDropped
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		inc.pushed += len(se.Event.Records)
		if w.s.Filter {
			for _, r := range se.Event.Records {
				if w.recs[*r.SequenceNumber].tag == "b" {
					inc.filtered++
					w.filteredSeen[*r.SequenceNumber] = true
				}
			}
		}
		return nil
	})
}

// SubscribeToShard passes the worker's subscriptions to the fake, with the schedule's faults.
func (k simKinesis) SubscribeToShard(ctx context.Context, in *kinesis.SubscribeToShardInput, o ...func(*kinesis.Options)) (*kinesis.SubscribeToShardOutput, error) {
	if err := k.before(ctx); err != nil {
		return nil, err
	}
	w := k.inc.w
	if w.active(FSubInUse) {
		return nil, &types.ResourceInUseException{Message: aws.String("Another active subscription exists for this consumer and shard.")}
	}
	return w.fake.SubscribeToShard(context.WithValue(ctx, incKey{}, k.inc), in, o...)
}

// polledMatches is the observer check of PolledEventCount. Polled records are counted exactly;
// pushed ones as the fake sent them, of which a subscription drops those it already handed over
// (a renewal repeats the last one) and those still queued when it stops: the observer's count lies
// between the two.
func (inc *incarnation) polledMatches(observed int) bool {
	if !inc.w.s.EFO {
		return observed == inc.polled
	}
	return observed >= inc.polled && observed <= inc.polled+inc.pushed
}
