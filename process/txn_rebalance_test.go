package process_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/process"
	"github.com/riffle-go/riffle/rifftest"
)

// Rebalances while transactions are open, under ExactlyOnce: processors
// (each with a client and a transactional producer of its own, distinct
// transactional ids) join the group and leave it (Close) while the inputs
// flow, at concurrency 64. A revoke must commit the open transaction
// before the partitions move; a read_committed reader then sees every
// input's outputs exactly once (ByKey: each key's in input order).
//
// Proof that revokes found transactions with records in them: every
// other member ("revoke-only") commits with an interval far beyond the
// test's length, so until the final phase its only commit points are
// revokes. Processor.Commit is not called before then, and a commit point
// with nothing finished commits nothing (Stats().TxnCommitted stays). So
// when its TxnCommitted grew between two of its OnPartitionsRevoked calls
// (which run after the revoke's commit), the revoke committed a transaction
// with records in it. The other members commit every 50 ms, so their
// interval commits race with revokes.

func TestExactlyOnceProcessRebalance(t *testing.T) {
	for _, tc := range []struct {
		name     string
		balancer riffle.GroupBalancer
		proto    riffle.GroupProtocol
	}{
		{"eager", riffle.RangeBalancer(), riffle.GroupProtocolClassic},
		{"cooperative", riffle.CooperativeStickyBalancer(), riffle.GroupProtocolClassic},
		{"kip848", riffle.CooperativeStickyBalancer(), riffle.GroupProtocolConsumer},
	} {
		for _, mode := range []process.Mode{process.ByKey, process.Unordered} {
			t.Run(tc.name+"/"+mode.String(), func(t *testing.T) { eosRebalance(t, tc.balancer, tc.proto, mode) })
		}
	}
}

// eosTxnProducer is txnProducer with a transaction timeout of choice.
func eosTxnProducer(t *testing.T, c *rifftest.Cluster, id string, timeout time.Duration) *riffle.Producer {
	t.Helper()
	pr, err := riffle.NewProducer(client(t, c), riffle.TransactionalID(id), riffle.TransactionTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pr.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		pr.Close(ctx)
	})
	return pr
}

func eosRebalance(t *testing.T, b riffle.GroupBalancer, proto riffle.GroupProtocol, mode process.Mode) {
	const perPart = 1500
	total := eosParts * perPart
	c, cl := setup(t, rifftest.Topic("in", eosParts), rifftest.Topic("out", eosParts),
		// KIP-848 timing, like the classic settings of groupOpts.
		rifftest.BrokerConfig("group.consumer.heartbeat.interval.ms", "100"),
		rifftest.BrokerConfig("group.consumer.session.timeout.ms", "6000"))
	eosInputs(t, cl, perPart)
	group := fmt.Sprintf("g-eos-reb-%s-%d-%s", b.Name(), proto, mode)
	start := time.Now()

	var (
		handled     atomic.Int64 // successful handler calls, across members
		final       atomic.Bool  // Processor.Commit may be called: TxnCommitted proves nothing more
		revokeProof atomic.Int64 // revokes that committed a transaction with records
		revokes     atomic.Int64 // revokes of revoke-only members (not at Close)
	)
	type member struct {
		id         int
		revokeOnly bool
		p          atomic.Pointer[process.Processor]
		closing    atomic.Bool
		seen       int64 // TxnCommitted at its last revoke; the member's callbacks run one at a time
	}
	var members []*member
	next := 0
	join := func(revokeOnly bool) {
		m := &member{id: next, revokeOnly: revokeOnly}
		next++
		every := riffle.CommitEvery{Interval: 50 * time.Millisecond}
		timeout := 10 * time.Second
		if revokeOnly {
			every, timeout = riffle.CommitEvery{Interval: 50 * time.Second}, time.Minute
		}
		pr := eosTxnProducer(t, c, fmt.Sprintf("eos-reb-%d", m.id), timeout)
		p, err := process.New(client(t, c), func(ctx context.Context, r *riffle.Record) error {
			// Work that takes time, so that revokes find records
			// running and finished in the open transaction.
			select {
			case <-time.After(time.Duration(2+rand.IntN(9)) * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
			if err := eosOutputs(ctx, r); err != nil {
				return err
			}
			handled.Add(1)
			return nil
		},
			process.ExactlyOnce(pr, every),
			process.Ordering(mode), process.Concurrency(64),
			process.OnError(func(err error) { t.Logf("member %d: processor: %v", m.id, err) }),
			process.ConsumerOptions(groupOpts(group, "in")...),
			process.ConsumerOptions(
				riffle.Balancers(b), riffle.WithGroupProtocol(proto),
				riffle.OnPartitionsRevoked(func(_ context.Context, tps []riffle.TopicPartition) {
					p := m.p.Load()
					if p == nil || m.closing.Load() || final.Load() || !m.revokeOnly {
						t.Logf("member %d revoked %v", m.id, tps)
						return
					}
					revokes.Add(1)
					n := p.Stats().TxnCommitted
					if n > m.seen {
						revokeProof.Add(1)
					}
					t.Logf("member %d (revoke-only) revoked %v: %d transaction(s) committed since its last revoke", m.id, tps, n-m.seen)
					m.seen = n
				}),
				riffle.OnPartitionsLost(func(_ context.Context, tps []riffle.TopicPartition) { t.Logf("member %d lost %v", m.id, tps) }),
				riffle.OnGroupError(func(err error) { t.Logf("member %d: group: %v", m.id, err) }),
			))
		if err != nil {
			t.Fatal(err)
		}
		m.p.Store(p)
		members = append(members, m)
		t.Logf("%v: member %d joined (revoke-only: %v) at %d handled", time.Since(start).Round(time.Millisecond), m.id, revokeOnly, handled.Load())
	}
	leave := func(i int) {
		m := members[i]
		members = append(members[:i:i], members[i+1:]...)
		m.closing.Store(true)
		p := m.p.Load()
		began := time.Now()
		closeProcessor(t, p)
		st := p.Stats()
		t.Logf("%v: member %d left at %d handled (Close took %v): %d transactions committed, %d aborted",
			time.Since(start).Round(time.Millisecond), m.id, handled.Load(), time.Since(began).Round(time.Millisecond), st.TxnCommitted, st.TxnAborted)
	}
	describe := func() string {
		var sb strings.Builder
		for _, m := range members {
			st := m.p.Load().Stats()
			fmt.Fprintf(&sb, "member %d: %d running, committed %d, aborted %d\n", m.id, st.Running, st.TxnCommitted, st.TxnAborted)
			for _, ps := range st.Partitions {
				fmt.Fprintf(&sb, "  %v\n", ps)
			}
		}
		return sb.String()
	}
	// progress waits until frac/8 of the inputs were handled.
	progress := func(frac int) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for handled.Load() < int64(total*frac/8) {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d inputs handled, want %d/8\n%s", handled.Load(), total, frac, describe())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	join(true)
	progress(1)
	join(false) // the first gives partitions up
	progress(2)
	join(true)
	progress(3)
	leave(0) // its partitions move to the others
	progress(4)
	join(true)
	progress(5)
	leave(0)
	progress(6)
	join(false)
	progress(7)

	// Final phase: revoke-only members commit when told.
	final.Store(true)
	deadline := time.Now().Add(60 * time.Second)
	for committedInputs(t, cl, group) < total {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d inputs committed\n%s", committedInputs(t, cl, group), total, describe())
		}
		for _, m := range members {
			if m.revokeOnly {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if err := m.p.Load().Commit(ctx); err != nil {
					t.Logf("member %d: Commit: %v", m.id, err)
				}
				cancel()
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	for len(members) > 0 {
		leave(0)
	}
	aborted := checkOutputs(t, cl, perPart, mode != process.Unordered)
	t.Logf("%d outputs of aborted transactions hidden; %d handler calls for %d inputs; %d of %d revokes of revoke-only members committed records; %v",
		aborted, handled.Load(), total, revokeProof.Load(), revokes.Load(), time.Since(start).Round(time.Millisecond))
	if revokeProof.Load() == 0 {
		t.Errorf("no revoke committed a transaction with records in it (%d revokes of revoke-only members): the test did not rebalance mid-transaction", revokes.Load())
	}
}
