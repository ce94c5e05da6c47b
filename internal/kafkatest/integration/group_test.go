package integration_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// groupLedger counts, across the members of one group, how often each
// record was handled.
type groupLedger struct {
	mu   sync.Mutex
	seen map[string]int // "partition/offset"
	dups int
}

func (l *groupLedger) handler(_ context.Context, r *riffle.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := fmt.Sprintf("%d/%d", r.Partition, r.Offset)
	if l.seen[k]++; l.seen[k] > 1 {
		l.dups++
	}
	return nil
}

func (l *groupLedger) distinct() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen)
}

// A classic group (cooperative-sticky, the default balancers) and a KIP-848
// group (the broker's assignor) consume while a second member joins and the
// first leaves: every record handled, none twice (graceful rebalances
// commit before partitions move), the committed offsets at the end of the
// log, and the broker's view of the group matching the members'.
func TestGroupJoinLeave(t *testing.T) {
	for _, proto := range []struct {
		name string
		p    riffle.GroupProtocol
		typ  string
	}{
		{"classic", riffle.GroupProtocolClassic, "classic"},
		{"consumer", riffle.GroupProtocolConsumer, "consumer"},
	} {
		t.Run(proto.name, func(t *testing.T) {
			need(t)
			if !supports848(t, proto.p) {
				return
			}
			admin := client(t)
			const parts = 6
			tp := topic(t, admin, parts, nil)
			group := name(t, "g")
			ctx := timeout(t, 4*time.Minute)
			p, err := riffle.NewProducer(admin)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close(ctx)
			total := 0
			produce := func(n int) {
				t.Helper()
				var recs []*riffle.Record
				for i := range n {
					recs = append(recs, &riffle.Record{Topic: tp, Key: []byte(strconv.Itoa(total + i)), Value: []byte("v")})
				}
				if err := p.ProduceSync(ctx, recs...); err != nil {
					t.Fatal(err)
				}
				total += n
			}
			ledger := &groupLedger{seen: map[string]int{}}
			member := func() *riffle.Consumer {
				c, err := riffle.NewConsumer(client(t), // one member per client
					riffle.ConsumerGroup(group), riffle.SubscribeTopics(tp),
					riffle.WithGroupProtocol(proto.p), riffle.OffsetReset(riffle.ResetEarliest),
					riffle.HandleRecord(ledger.handler),
					riffle.OnGroupError(func(err error) { t.Logf("group error: %v", err) }),
					riffle.OnPartitionError(func(e *riffle.PartitionError) { t.Errorf("partition error: %v", e) }))
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			handledAll := func(what string) {
				t.Helper()
				eventually(t, 2*time.Minute, what, func() error {
					if n := ledger.distinct(); n < total {
						return fmt.Errorf("%d of %d records handled", n, total)
					}
					return nil
				})
			}
			// members waits until the broker describes the group Stable
			// with n members that own every partition between them.
			members := func(n int) {
				t.Helper()
				eventually(t, 2*time.Minute, fmt.Sprintf("%d members owning %d partitions", n, parts), func() error {
					ds, err := admin.Admin().DescribeGroups(ctx, group)
					if err != nil {
						return err
					}
					d := ds[0]
					if d.Err != nil {
						return d.Err
					}
					owned := 0
					for _, m := range d.Members {
						if len(m.Assigned) == 0 {
							return fmt.Errorf("member %s owns nothing", m.MemberID)
						}
						owned += len(m.Assigned)
					}
					if d.Type != proto.typ || d.State != "Stable" || len(d.Members) != n || owned != parts {
						return fmt.Errorf("type %s state %s, %d members owning %d partitions", d.Type, d.State, len(d.Members), owned)
					}
					return nil
				})
			}

			produce(300)
			a := member()
			handledAll("member a alone")
			b := member()
			members(2)
			produce(300)
			handledAll("members a and b")
			if _, err := a.Close(ctx); err != nil {
				t.Fatalf("a.Close: %v", err)
			}
			members(1)
			produce(300)
			handledAll("member b alone")
			if _, err := b.Close(ctx); err != nil {
				t.Fatalf("b.Close: %v", err)
			}

			ledger.mu.Lock()
			dups := ledger.dups
			ledger.mu.Unlock()
			if dups > 0 {
				t.Errorf("%d records handled twice across graceful rebalances", dups)
			}
			end := endOffsets(t, admin, tp)
			committed, err := admin.Admin().FetchOffsets(ctx, group)
			if err != nil {
				t.Fatal(err)
			}
			for part, off := range end {
				if got := committed[riffle.TopicPartition{Topic: tp, Partition: part}].Offset; got != off {
					t.Errorf("%s[%d]: committed %d, end %d", tp, part, got, off)
				}
			}
			lag, err := admin.Admin().GroupLag(ctx, group)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range lag {
				if l.Lag != 0 {
					t.Errorf("lag %v, want 0", l)
				}
			}
		})
	}
}
