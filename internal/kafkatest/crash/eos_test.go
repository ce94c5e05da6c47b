package crash_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/process"
)

// Scenario (c): consume, transform, produce exactly once while the
// leaders (of the input, the output, __consumer_offsets and
// __transaction_state) die. Two pipelines read the same input: a group of
// riffle consumers with riffle.ExactlyOnce, and a group of processors with
// process.ExactlyOnce, each member with a transactional producer of its
// own, each writing every input's value to its output topic. Once the
// groups' committed offsets reach the end of the input, a read_committed
// reader of each output sees every acknowledged input exactly once, and
// nothing else.

const eosMembers = 2

type eosLoad struct {
	kind   string // "consumer" or "process"
	group  string
	out    string
	in     string
	closed bool
	mu     sync.Mutex
	errs   []string
	// closers stop the members (consumers or processors, then their
	// producers).
	closers []func(context.Context) error
	stats   func() (committed, aborted int64)
	handled *ledger
}

func (l *eosLoad) name() string                            { return "eos " + l.kind }
func (l *eosLoad) topics() []string                        { return []string{l.in} }
func (l *eosLoad) progress() map[riffle.TopicPartition]int { return l.handled.progress() }

func (l *eosLoad) note(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, s)
}

func txnProducer(t *testing.T, cl *riffle.Client, id string) *riffle.Producer {
	t.Helper()
	p, err := riffle.NewProducer(cl, riffle.TransactionalID(id))
	must(t, "transactional producer", err)
	ctx := timeout(t, time.Minute)
	must(t, "InitTransactions", p.InitTransactions(ctx))
	return p
}

// startEOS starts eosMembers members of kind "consumer" or "process"
// reading in and writing out.
func startEOS(t *testing.T, kind, in, out string) *eosLoad {
	t.Helper()
	l := &eosLoad{kind: kind, group: name(t, "eos-"+kind), in: in, out: out, handled: newLedger()}
	every := riffle.CommitEvery{Interval: 200 * time.Millisecond}
	var statFns []func() (int64, int64)
	for i := range eosMembers {
		cl := client(t)
		tx := txnProducer(t, cl, name(t, fmt.Sprintf("tx-%s-%d", kind, i)))
		output := func(r *riffle.Record) *riffle.Record {
			return &riffle.Record{Topic: out, Key: r.Key, Value: r.Value}
		}
		switch kind {
		case "consumer":
			c, err := riffle.NewConsumer(cl,
				riffle.ConsumerGroup(l.group), riffle.SubscribeTopics(in), riffle.OffsetReset(riffle.ResetEarliest),
				riffle.ExactlyOnce(tx, every),
				riffle.HandleRecord(func(ctx context.Context, r *riffle.Record) error {
					l.handled.add(r)
					tx.Produce(ctx, output(r), nil)
					return nil
				}),
				riffle.OnGroupError(func(err error) { l.note(fmt.Sprintf("member %d: group error: %v", i, err)) }),
				riffle.OnPartitionError(func(e *riffle.PartitionError) { l.note(fmt.Sprintf("member %d: %v", i, e)) }))
			must(t, "ExactlyOnce consumer", err)
			l.closers = append(l.closers, func(ctx context.Context) error { _, err := c.Close(ctx); return err }, tx.Close)
			statFns = append(statFns, func() (int64, int64) { st := c.Stats(); return st.TxnCommitted, st.TxnAborted })
		case "process":
			p, err := process.New(cl, func(ctx context.Context, r *riffle.Record) error {
				l.handled.add(r)
				return process.Output(ctx, output(r))
			},
				process.ExactlyOnce(tx, every),
				process.OnError(func(err error) { l.note(fmt.Sprintf("processor %d: %v", i, err)) }),
				process.ConsumerOptions(riffle.ConsumerGroup(l.group), riffle.SubscribeTopics(in), riffle.OffsetReset(riffle.ResetEarliest),
					riffle.OnGroupError(func(err error) { l.note(fmt.Sprintf("processor %d: group error: %v", i, err)) }),
					riffle.OnPartitionError(func(e *riffle.PartitionError) { l.note(fmt.Sprintf("processor %d: %v", i, e)) })))
			must(t, "ExactlyOnce processor", err)
			l.closers = append(l.closers, p.Close, tx.Close)
			statFns = append(statFns, func() (int64, int64) { st := p.Stats(); return st.TxnCommitted, st.TxnAborted })
		}
	}
	l.stats = func() (c, a int64) {
		for _, f := range statFns {
			x, y := f()
			c, a = c+x, a+y
		}
		return c, a
	}
	t.Cleanup(func() { l.close() })
	return l
}

func (l *eosLoad) close() []error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	for _, c := range l.closers {
		if err := c(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// finish waits until the group's committed offsets reach the end of the
// input, closes the members, reads the output read_committed and checks
// it against want, the acknowledged inputs.
func (l *eosLoad) finish(t *testing.T, admin *riffle.Client, want []string, kills []kill) {
	ctx := timeout(t, 3*time.Minute)
	waitErr := eventually(2*time.Minute, func() error {
		end, err := endOffsets(ctx, admin, riffle.ReadUncommitted, l.in)
		if err != nil {
			return err
		}
		committed, err := admin.Admin().FetchOffsets(ctx, l.group)
		if err != nil {
			return err
		}
		for p, off := range end {
			if got := committed[riffle.TopicPartition{Topic: l.in, Partition: p}].Offset; got != off {
				return fmt.Errorf("%s[%d] committed %d of %d", l.in, p, got, off)
			}
		}
		return nil
	})
	committed, aborted := l.stats()
	for _, err := range l.close() {
		t.Errorf("closing: %v", err)
	}
	l.mu.Lock()
	for i, e := range l.errs {
		if i == 10 {
			t.Logf("... %d errors reported in all", len(l.errs))
			break
		}
		t.Log(e)
	}
	l.mu.Unlock()
	if waitErr != nil {
		t.Errorf("the group's offsets at the end of the input: %v", waitErr)
	}
	seen := map[string]int{}
	for _, rs := range readAll(t, admin, l.out, riffle.ReadCommitted) {
		for _, r := range rs {
			seen[string(r.Value)]++
		}
	}
	inputs := map[string]bool{}
	lost, dup := 0, 0
	for _, v := range want {
		inputs[v] = true
		switch n := seen[v]; {
		case n == 0:
			lost++
			if lost <= 5 {
				t.Errorf("output of %s missing", v)
			}
		case n > 1:
			dup++
			if dup <= 5 {
				t.Errorf("output of %s read %d times", v, n)
			}
		}
	}
	extra := 0
	for v := range seen {
		if !inputs[v] {
			extra++
		}
	}
	hit := hitCount(kills, l.in, l.out)
	stalls := stallsOf(kills, l.name())
	t.Logf("accounting eos %s: members=%d inputs=%d outputs_read_committed=%d lost=%d dup=%d extra=%d handler_calls=%d txn_committed=%d txn_aborted=%d stalled=%d kills=%d",
		l.kind, eosMembers, len(want), len(seen), lost, dup, extra, l.handled.calls.Load(), committed, aborted, len(stalls), hit)
	for _, s := range stalls {
		t.Errorf("stalled while a node was down: %s", s)
	}
	if lost+dup+extra > 0 {
		t.Errorf("lost %d, dup %d, extra %d: want 0", lost, dup, extra)
	}
	if hit < 3 {
		t.Errorf("%d kills took leaders of %s or %s, want 3", hit, l.in, l.out)
	}
}
