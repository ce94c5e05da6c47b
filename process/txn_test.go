package process_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/process"
	"github.com/riffle-go/riffle/ranges"
	"github.com/riffle-go/riffle/rifftest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Exactly-once processing tests. Inputs on topic "in" are "p/i" (partition
// p, index i), keyed "k<i%keys>" so that ByKey has real keys; each input's
// handler outputs "p/i/a" and "p/i/b" to "out", keyed like the input.

const (
	eosParts = 4
	eosKeys  = 16
)

func eosInputs(t *testing.T, cl *riffle.Client, perPart int) {
	t.Helper()
	pr, err := riffle.NewProducer(cl, riffle.WithPartitioner(riffle.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for p := int32(0); p < eosParts; p++ {
		for i := range perPart {
			pr.Produce(ctx, &riffle.Record{Topic: "in", Partition: p, Key: []byte("k" + strconv.Itoa(i%eosKeys)),
				Value: []byte(fmt.Sprintf("%d/%d", p, i))}, func(_ *riffle.Record, err error) {
				if err != nil {
					t.Error(err)
				}
			})
		}
	}
	if err := pr.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// eosOutputs hands r's two outputs to process.Output.
func eosOutputs(ctx context.Context, r *riffle.Record) error {
	return process.Output(ctx,
		&riffle.Record{Topic: "out", Key: r.Key, Value: append(append([]byte{}, r.Value...), "/a"...)},
		&riffle.Record{Topic: "out", Key: r.Key, Value: append(append([]byte{}, r.Value...), "/b"...)})
}

// txnProducer returns a transactional producer on a client of its own,
// with InitTransactions done.
func txnProducer(t *testing.T, c *rifftest.Cluster, id string) *riffle.Producer {
	t.Helper()
	pr, err := riffle.NewProducer(client(t, c), riffle.TransactionalID(id), riffle.TransactionTimeout(10*time.Second))
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

// committedInputs returns how many inputs the group's committed offsets
// cover (the offset only: records finished above it, listed in the
// metadata, are not counted).
func committedInputs(t *testing.T, cl *riffle.Client, group string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := cl.Admin().FetchOffsets(ctx, group)
	if err != nil {
		return 0
	}
	n := 0
	for tp, om := range offs {
		if tp.Topic == "in" && om.Offset > 0 {
			n += int(om.Offset)
		}
	}
	return n
}

// readTopic returns the values of every record of topic, per partition in
// offset order, read committed or not.
func readTopic(t *testing.T, cl *riffle.Client, topic string, committed bool) [][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := cl.Admin().ListOffsets(ctx, riffle.OffsetLatest, topic)
	if err != nil {
		t.Fatal(err)
	}
	var opts []ranges.Option
	if committed {
		opts = append(opts, ranges.ReadCommitted())
	}
	r := ranges.NewReader(cl, opts...)
	defer r.Close()
	out := make([][]string, len(ends))
	for _, e := range ends {
		if e.Err != nil {
			t.Fatal(e.Err)
		}
		err := r.Read(ctx, ranges.Range{Topic: topic, Partition: e.Partition, Low: 0, High: e.Offset}, func(rec *riffle.Record) error {
			out[e.Partition] = append(out[e.Partition], string(rec.Key)+"="+string(rec.Value))
			return nil
		})
		if err != nil {
			t.Fatalf("reading %s[%d]: %v", topic, e.Partition, err)
		}
	}
	return out
}

// checkOutputs checks that a read_committed reader sees the outputs of
// every input exactly once (and, when ordered, each key's outputs in input
// order); it returns how many outputs only read_uncommitted sees.
func checkOutputs(t *testing.T, cl *riffle.Client, perPart int, ordered bool) int {
	t.Helper()
	got := readTopic(t, cl, "out", true)
	count := map[string]int{}
	total := 0
	for _, part := range got {
		last := map[string]int{} // key -> last input index seen, per output partition
		for _, kv := range part {
			total++
			key, v, _ := strings.Cut(kv, "=")
			count[v]++
			if ordered {
				f := strings.Split(v, "/") // p, i, a|b
				i, _ := strconv.Atoi(f[1])
				k := key + "@" + f[0]
				if prev, ok := last[k]; ok && i < prev {
					t.Errorf("key %s of input partition %s: output of input %d after that of %d", key, f[0], i, prev)
				}
				last[k] = i
			}
		}
	}
	var missing, dup []string
	for p := range eosParts {
		for i := range perPart {
			for _, s := range []string{"a", "b"} {
				v := fmt.Sprintf("%d/%d/%s", p, i, s)
				switch c := count[v]; {
				case c == 0:
					missing = append(missing, v)
				case c > 1:
					dup = append(dup, fmt.Sprintf("%s×%d", v, c))
				}
				delete(count, v)
			}
		}
	}
	for v := range count {
		dup = append(dup, "unexpected "+v)
	}
	sort.Strings(missing)
	sort.Strings(dup)
	if len(missing) > 0 || len(dup) > 0 {
		t.Errorf("read_committed: %d outputs, want %d: %d missing %v, %d duplicated or unexpected %v",
			total, 2*eosParts*perPart, len(missing), first(missing), len(dup), first(dup))
	}
	un := 0
	for _, part := range readTopic(t, cl, "out", false) {
		un += len(part)
	}
	return un - total
}

func first(s []string) []string {
	if len(s) > 8 {
		return s[:8]
	}
	return s
}

func eosProcessor(t *testing.T, c *rifftest.Cluster, pr *riffle.Producer, group string, h process.Handler, opts ...process.Option) *process.Processor {
	t.Helper()
	all := append([]process.Option{
		process.ExactlyOnce(pr, riffle.CommitEvery{Interval: 50 * time.Millisecond}),
		process.OnError(func(err error) { t.Logf("processor: %v", err) }),
		process.ConsumerOptions(groupOpts(group, "in")...),
	}, opts...)
	p, err := process.New(client(t, c), h, all...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func closeProcessor(t *testing.T, p *process.Processor) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Errorf("close: %v", err)
	}
}

// A clean run in each mode at concurrency 64, with a first attempt of
// every tenth input failing after it handed outputs over (they must be
// dropped): every input's outputs are visible exactly once, each key's in
// input order where the mode keeps it, and nothing was aborted.
func TestExactlyOnceModes(t *testing.T) {
	for _, mode := range []process.Mode{process.ByKey, process.ByPartition, process.Unordered} {
		t.Run(mode.String(), func(t *testing.T) {
			const perPart = 500
			c, cl := setup(t, rifftest.Topic("in", eosParts), rifftest.Topic("out", eosParts))
			eosInputs(t, cl, perPart)
			pr := txnProducer(t, c, "eos-"+mode.String())
			var mu sync.Mutex
			attempts := map[string]int{}
			p := eosProcessor(t, c, pr, "g-"+mode.String(), func(ctx context.Context, r *riffle.Record) error {
				time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
				if err := eosOutputs(ctx, r); err != nil {
					return err
				}
				mu.Lock()
				attempts[string(r.Value)]++
				n := attempts[string(r.Value)]
				mu.Unlock()
				if i, _ := strconv.Atoi(strings.Split(string(r.Value), "/")[1]); i%10 == 0 && n == 1 {
					return errors.New("first attempt fails")
				}
				return nil
			}, process.Ordering(mode), process.Concurrency(64),
				process.Retry(process.RetryPolicy{Attempts: 3, Backoff: time.Millisecond}))
			waitFor(t, 60*time.Second, "every input committed", func() bool { return committedInputs(t, cl, "g-"+mode.String()) == eosParts*perPart })
			st := p.Stats()
			closeProcessor(t, p)
			aborted := checkOutputs(t, cl, perPart, mode != process.Unordered)
			if aborted != 0 || st.TxnAborted != 0 {
				t.Errorf("a clean run aborted %d outputs in %d transactions", aborted, st.TxnAborted)
			}
			if st.TxnCommitted < 1 {
				t.Errorf("%d transactions committed before Close, though the group's offsets cover every input", st.TxnCommitted)
			}
			t.Logf("%d transactions committed", st.TxnCommitted)
		})
	}
}

// An output that fails (larger than the broker accepts) makes its
// transaction abort: its outputs and those of every record finished in it
// stay invisible, the partitions go back to their last committed
// positions, and the records run again.
func TestExactlyOnceAbortRewinds(t *testing.T) {
	const perPart = 300
	c, cl := setup(t, rifftest.Topic("in", eosParts), rifftest.Topic("out", eosParts))
	eosInputs(t, cl, perPart)
	pr := txnProducer(t, c, "eos-abort")
	var bad atomic.Bool
	var mu sync.Mutex
	runs := map[string]int{}
	p := eosProcessor(t, c, pr, "g-abort", func(ctx context.Context, r *riffle.Record) error {
		mu.Lock()
		runs[string(r.Value)]++
		mu.Unlock()
		if string(r.Value) == "2/150" && bad.CompareAndSwap(false, true) {
			// Too large for the broker: the produce fails, and
			// with it the transaction.
			return process.Output(ctx, &riffle.Record{Topic: "out", Value: make([]byte, 2<<20)})
		}
		return eosOutputs(ctx, r)
	}, process.Ordering(process.Unordered), process.Concurrency(64))
	waitFor(t, 60*time.Second, "every input committed", func() bool { return committedInputs(t, cl, "g-abort") == eosParts*perPart })
	st := p.Stats()
	closeProcessor(t, p)
	if !bad.Load() {
		t.Fatal("the failing input never ran")
	}
	if st.TxnAborted == 0 {
		t.Error("no transaction aborted")
	}
	mu.Lock()
	again := runs["2/150"]
	mu.Unlock()
	if again < 2 {
		t.Errorf("the input whose output failed ran %d times; want it again after the abort", again)
	}
	checkOutputs(t, cl, perPart, false)
}

// A dead-lettered record under ExactlyOnce is an output of its
// transaction: it appears exactly once on the dead-letter topic, and the
// other inputs' outputs exactly once.
func TestExactlyOnceDeadLetter(t *testing.T) {
	const perPart = 200
	c, cl := setup(t, rifftest.Topic("in", eosParts), rifftest.Topic("out", eosParts), rifftest.Topic("dlq", 1))
	eosInputs(t, cl, perPart)
	pr := txnProducer(t, c, "eos-dlq")
	p := eosProcessor(t, c, pr, "g-dlq", func(ctx context.Context, r *riffle.Record) error {
		if strings.HasSuffix(string(r.Value), "/7") {
			return errors.New("poison")
		}
		return eosOutputs(ctx, r)
	}, process.Ordering(process.ByKey), process.DeadLetter(process.DeadLetterTopic(nil, "dlq")))
	waitFor(t, 60*time.Second, "every input committed", func() bool { return committedInputs(t, cl, "g-dlq") == eosParts*perPart })
	closeProcessor(t, p)
	dlq := readTopic(t, cl, "dlq", true)[0]
	sort.Strings(dlq)
	want := []string{}
	for p := range eosParts {
		want = append(want, fmt.Sprintf("k7=%d/7", p))
	}
	if strings.Join(dlq, " ") != strings.Join(want, " ") {
		t.Errorf("dead-letter topic holds %v, want %v", dlq, want)
	}
	got := readTopic(t, cl, "out", true)
	n := 0
	for _, part := range got {
		n += len(part)
	}
	if want := 2 * eosParts * (perPart - 1); n != want {
		t.Errorf("%d outputs, want %d", n, want)
	}
}

// Output outside a handler under ExactlyOnce fails; so does a processor
// without a group, and a producer that is not transactional.
func TestExactlyOnceMisuse(t *testing.T) {
	if err := process.Output(context.Background(), &riffle.Record{Topic: "x"}); !errors.Is(err, process.ErrNoOutput) {
		t.Errorf("Output without a handler context: %v, want ErrNoOutput", err)
	}
	c, cl := setup(t, rifftest.Topic("in", 1))
	plain, err := riffle.NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close(context.Background())
	h := func(context.Context, *riffle.Record) error { return nil }
	if _, err := process.New(client(t, c), h, process.ExactlyOnce(plain, riffle.CommitEvery{})); !errors.Is(err, riffle.ErrInvalidConfig) {
		t.Errorf("a producer without TransactionalID: %v, want ErrInvalidConfig", err)
	}
	pr := txnProducer(t, c, "eos-misuse")
	if _, err := process.New(client(t, c), h, process.ExactlyOnce(pr, riffle.CommitEvery{})); !errors.Is(err, riffle.ErrInvalidConfig) {
		t.Errorf("no group: %v, want ErrInvalidConfig", err)
	}
	if _, err := process.New(client(t, c), h, process.ExactlyOnce(pr, riffle.CommitEvery{Interval: time.Minute}),
		process.ConsumerOptions(groupOpts("g", "in")...)); !errors.Is(err, riffle.ErrInvalidConfig) {
		t.Errorf("interval above the transaction timeout: %v, want ErrInvalidConfig", err)
	}
}

// commitHook records the commit events of a producer.
type commitHook struct {
	mu     sync.Mutex
	events []riffle.CommitEvent
}

func (h *commitHook) OnCommit(e riffle.CommitEvent) {
	h.mu.Lock()
	h.events = append(h.events, e)
	h.mu.Unlock()
}

// The offsets ExactlyOnce commits reach the producer's CommitHooks as
// transactional commit events, the last ones being the group's committed
// offsets.
func TestExactlyOnceCommitHook(t *testing.T) {
	const perPart = 100
	c, cl := setup(t, rifftest.Topic("in", eosParts), rifftest.Topic("out", eosParts))
	eosInputs(t, cl, perPart)
	h := &commitHook{}
	pr, err := riffle.NewProducer(client(t, c), riffle.TransactionalID("eos-hook"), riffle.WithProducerHooks(h))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pr.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.Close(context.Background()) })
	p := eosProcessor(t, c, pr, "g-hook", eosOutputs)
	waitFor(t, 60*time.Second, "every input committed", func() bool { return committedInputs(t, cl, "g-hook") == eosParts*perPart })
	closeProcessor(t, p)
	h.mu.Lock()
	events := append([]riffle.CommitEvent(nil), h.events...)
	h.mu.Unlock()
	if len(events) == 0 {
		t.Fatal("no commit events")
	}
	last := map[riffle.TopicPartition]int64{}
	for _, e := range events {
		if !e.Transactional || e.Group != "g-hook" || e.Err != nil || e.Partitions != len(e.Offsets) || e.Partitions == 0 {
			t.Fatalf("commit event %+v", e)
		}
		for tp, om := range e.Offsets {
			last[tp] = om.Offset
		}
	}
	offs, err := cl.Admin().FetchOffsets(ctx, "g-hook")
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) != eosParts {
		t.Fatalf("committed offsets %v", offs)
	}
	for tp, om := range offs {
		if last[tp] != om.Offset {
			t.Errorf("%s: committed %d, last commit event %d", tp, om.Offset, last[tp])
		}
	}
}

// A key's outputs leave in input order even when the producer blocks: a
// finishing record takes its place in the order of releases under the
// processor's lock, but hands its outputs to the producer after letting
// the lock go, and Produce may block (here: the output topic does not
// exist yet, so every first Produce waits for its metadata). The next
// record of the key, run meanwhile by another goroutine, must not hand
// its outputs over first. Kafka 4.4 showed it (integration
// TestExactlyOnceProcessMembersJoinLeave, a new output topic: key 0-0's
// outputs of inputs 10, 20, then 0).
func TestExactlyOnceByKeyOrderWhileProduceBlocks(t *testing.T) {
	const perPart = 300
	c, cl := setup(t, rifftest.Topic("in", eosParts), rifftest.Brokers(3))
	eosInputs(t, cl, perPart)
	// The first producer's first look at the output topic's configs
	// is slow (other brokers answer the other lookups at once).
	var slowed atomic.Bool
	c.Kfake().ControlKey(int16(kmsg.DescribeConfigs), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.Kfake().KeepControl()
		if slowed.CompareAndSwap(false, true) {
			c.Kfake().SleepControl(func() { time.Sleep(300 * time.Millisecond) })
		}
		return nil, nil, false
	})
	prCl, err := riffle.NewClient(riffle.SeedBrokers(c.Addrs()...), riffle.UnknownTopicWait(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prCl.Close)
	pr, err := riffle.NewProducer(prCl, riffle.TransactionalID("eos-blocked"), riffle.TransactionTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := pr.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.Close(context.Background()) })
	var handled atomic.Int64
	p := eosProcessor(t, c, pr, "g-blocked", func(ctx context.Context, r *riffle.Record) error {
		handled.Add(1)
		return eosOutputs(ctx, r)
	}, process.Ordering(process.ByKey), process.Concurrency(512))
	// Outputs pile up in Produce calls waiting for the topic, several
	// per key (64 keys, 512 goroutines).
	waitFor(t, 30*time.Second, "inputs handled while the output topic is missing", func() bool { return handled.Load() >= 256 })
	res, err := cl.Admin().CreateTopics(ctx, riffle.TopicSpec{Name: "out", Partitions: eosParts, ReplicationFactor: 1})
	if err != nil || res.Err() != nil {
		t.Fatalf("CreateTopics: %v %v", res, err)
	}
	waitFor(t, 60*time.Second, "every input committed", func() bool { return committedInputs(t, cl, "g-blocked") == eosParts*perPart })
	closeProcessor(t, p)
	checkOutputs(t, cl, perPart, true)
}
