package process_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/process"
	"github.com/riffle-go/riffle/rifftest"
)

// Rebalance mid-flight: two processors in one group; one leaves while
// hundreds of records are in flight. Nothing is lost, no record runs on
// both at once, and, since the leaver waits for its running records and
// commits them with metadata, no finished record runs again.
func TestRebalanceMidFlight(t *testing.T) {
	for _, bal := range []struct {
		name  string
		b     riffle.GroupBalancer
		proto riffle.GroupProtocol
	}{
		{"cooperative", riffle.CooperativeStickyBalancer(), riffle.GroupProtocolClassic},
		{"eager", riffle.RangeBalancer(), riffle.GroupProtocolClassic},
		{"kip848", riffle.CooperativeStickyBalancer(), riffle.GroupProtocolConsumer},
	} {
		t.Run(bal.name, func(t *testing.T) { rebalanceMidFlight(t, bal.b, bal.proto) })
	}
}

func rebalanceMidFlight(t *testing.T, bal riffle.GroupBalancer, proto riffle.GroupProtocol) {
	const parts, perPart = 4, 4000
	c, cl := setup(t, rifftest.Topic("r", parts),
		rifftest.BrokerConfig("group.consumer.heartbeat.interval.ms", "100")) // KIP-848 pace
	produce(t, cl, "r", parts, perPart, func(p int32, i int) []byte { return []byte(fmt.Sprint(i % 500)) })

	var mu sync.Mutex
	runningOn := map[[2]int64]int{} // record -> processor running it
	doneBy := map[[2]int64][]int{}
	var violation atomic.Value
	var inFlight [2]atomic.Int64
	var total atomic.Int64
	handler := func(id int) process.Handler {
		return func(ctx context.Context, r *riffle.Record) error {
			k := [2]int64{int64(r.Partition), r.Offset}
			mu.Lock()
			if other, ok := runningOn[k]; ok {
				violation.CompareAndSwap(nil, fmt.Sprintf("record %v started on %d while running on %d", k, id, other))
			}
			runningOn[k] = id
			mu.Unlock()
			inFlight[id].Add(1)
			select {
			case <-time.After(time.Duration(20+rand.IntN(60)) * time.Millisecond):
			case <-ctx.Done():
			}
			inFlight[id].Add(-1)
			mu.Lock()
			delete(runningOn, k)
			if ctx.Err() == nil {
				doneBy[k] = append(doneBy[k], id)
			}
			mu.Unlock()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			total.Add(1)
			return nil
		}
	}
	group := fmt.Sprintf("g-reb-%s-%d", bal.Name(), proto)
	opts := append(groupOpts(group, "r"), riffle.Balancers(bal), riffle.WithGroupProtocol(proto))
	start := func(id int) *process.Processor {
		p, err := process.New(client(t, c), handler(id), process.Ordering(process.ByKey), process.Concurrency(400),
			process.ConsumerOptions(opts...))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := start(0)
	b := start(1)
	waitFor(t, 30*time.Second, "both processors busy with 500 records", func() bool {
		return inFlight[0].Load() >= 150 && inFlight[1].Load() >= 150 && inFlight[0].Load()+inFlight[1].Load() >= 500
	})
	leavingWith := inFlight[0].Load()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	t.Logf("processor 0 left with %d records in flight (%d in all)", leavingWith, leavingWith+inFlight[1].Load())
	waitFor(t, 90*time.Second, "every record", func() bool { return total.Load() >= parts*perPart })
	if err := b.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	if v := violation.Load(); v != nil {
		t.Fatal(v)
	}
	mu.Lock()
	defer mu.Unlock()
	for p := int64(0); p < parts; p++ {
		for o := int64(0); o < perPart; o++ {
			by := doneBy[[2]int64{p, o}]
			if len(by) != 1 {
				t.Fatalf("record %d@%d finished by %v, want exactly once", p, o, by)
			}
		}
	}
}
