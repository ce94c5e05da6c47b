//go:build unix

package main

// txn: transactions, Riffle against franz-go, in two workloads:
//
//   - produce: transactions of -per-txn records each, written by one
//     transactional producer to a fresh broker (a kfake-server child that
//     stores records: transactions need a real log);
//   - ctp: consume-transform-produce, exactly once: a group member reads a
//     preloaded input topic and writes one output record per input inside
//     transactions that also commit the input offsets
//     (SendOffsetsToTransaction; franz-go's GroupTransactSession).
//
// Every run is checked afterwards, outside the timing: a read_committed
// reader (kgo) reads the output topic to its end and must find every
// record exactly once; in ctp the group's committed offsets must also be
// the input's ends.

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register("txn", "transactional produce and consume-transform-produce (exactly once) throughput and client CPU, riffle vs franz-go; broker in a child process", runTxn)
}

// txnSpec is what one client run does.
type txnSpec struct {
	addr    string
	topic   string // produce: the topic written; ctp: the output topic
	records int    // produce: records written; ctp: inputs read (one output each)
	perTxn  int    // records (produce) or inputs (ctp) per transaction
	txnID   string // fresh per run
	// produce
	values valuePool  // one distinct value per record: the value carries its index
	keys   *valuePool // nil: no keys
	// ctp
	input   string
	group   string // fresh per run
	perPart []int64
}

func (s txnSpec) key(i int) []byte {
	if s.keys == nil {
		return nil
	}
	return s.keys.at(i)
}

// txnCounts collects what one run did.
type txnCounts struct {
	produced produceCounts // outcome of every record produced
	txns     atomic.Int64  // transactions committed
	aborted  atomic.Int64  // transactions aborted by the loop
	inputs   atomic.Int64  // ctp: inputs whose transaction committed
	doneAt   atomic.Int64  // UnixNano when the last commit returned
}

func (c *txnCounts) finish() { c.doneAt.Store(time.Now().UnixNano()) }

// txnClient is one client in txn.
type txnClient struct {
	name    string
	module  string
	produce func(ctx context.Context, spec txnSpec, c *txnCounts, notes *noteSet) error
	ctp     func(ctx context.Context, spec txnSpec, c *txnCounts, notes *noteSet) error
}

func txnClients() []txnClient {
	return []txnClient{
		{name: "riffle", module: "github.com/riffle-go/riffle", produce: txnProduceRiffle, ctp: txnCTPRiffle},
		{name: "franz-go", module: "github.com/twmb/franz-go", produce: txnProduceFranz, ctp: txnCTPFranz},
	}
}

// closeCtx bounds a Close after the run's context may have ended.
func closeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
}

// txnProduceRiffle: a TransactionalID producer (idempotent, acks=all),
// linger 5 ms; per transaction BeginTransaction, Produce each record,
// CommitTransaction (which waits for the transaction's records).
func txnProduceRiffle(ctx context.Context, spec txnSpec, c *txnCounts, _ *noteSet) (err error) {
	cl, err := riffle.NewClient(riffle.SeedBrokers(spec.addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	p, err := riffle.NewProducer(cl, riffle.TransactionalID(spec.txnID),
		riffle.Linger(produceLinger), riffle.WithCompression(riffle.CompressionNone))
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := closeCtx(ctx)
		defer cancel()
		err = errors.Join(err, p.Close(cctx))
	}()
	if err := p.InitTransactions(ctx); err != nil {
		return fmt.Errorf("InitTransactions: %w", err)
	}
	cb := func(_ *riffle.Record, err error) { c.produced.done(err) }
	for lo := 0; lo < spec.records; lo += spec.perTxn {
		if err := p.BeginTransaction(); err != nil {
			return fmt.Errorf("BeginTransaction: %w", err)
		}
		for i := lo; i < min(lo+spec.perTxn, spec.records); i++ {
			p.Produce(ctx, &riffle.Record{Topic: spec.topic, Key: spec.key(i), Value: spec.values.at(i)}, cb)
		}
		if err := p.CommitTransaction(ctx); err != nil {
			return fmt.Errorf("CommitTransaction of transaction %d: %w", lo/spec.perTxn+1, err)
		}
		c.txns.Add(1)
	}
	c.finish()
	return nil
}

// txnProduceFranz: kgo with TransactionalID (idempotent, acks=all),
// linger 5 ms, no compression; per transaction BeginTransaction, Produce
// each record, Flush, EndTransaction(TryCommit) (kgo's EndTransaction
// does not flush by itself).
func txnProduceFranz(ctx context.Context, spec txnSpec, c *txnCounts, _ *noteSet) error {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(spec.addr),
		kgo.TransactionalID(spec.txnID),
		kgo.ProducerLinger(produceLinger),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	cb := func(_ *kgo.Record, err error) { c.produced.done(err) }
	for lo := 0; lo < spec.records; lo += spec.perTxn {
		if err := cl.BeginTransaction(); err != nil {
			return fmt.Errorf("BeginTransaction: %w", err)
		}
		failed := c.produced.failed.Load()
		for i := lo; i < min(lo+spec.perTxn, spec.records); i++ {
			cl.Produce(ctx, &kgo.Record{Topic: spec.topic, Key: spec.key(i), Value: spec.values.at(i)}, cb)
		}
		if err := cl.Flush(ctx); err != nil {
			return fmt.Errorf("flushing: %w", err)
		}
		if c.produced.failed.Load() != failed {
			// A record failed: committing would commit the others
			// without it.
			return errors.Join(fmt.Errorf("transaction %d: a record failed; aborted", lo/spec.perTxn+1),
				cl.EndTransaction(ctx, kgo.TryAbort))
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return fmt.Errorf("EndTransaction of transaction %d: %w", lo/spec.perTxn+1, err)
		}
		c.txns.Add(1)
	}
	c.finish()
	return nil
}

// ctpValue is the output record of an input: the input's partition (4
// bytes) and offset (8 bytes), then its value. The reader that checks a
// run finds the input of every output by it.
func ctpValue(partition int32, offset int64, value []byte) []byte {
	out := make([]byte, 12, 12+len(value))
	binary.BigEndian.PutUint32(out, uint32(partition))
	binary.BigEndian.PutUint64(out[4:], uint64(offset))
	return append(out, value...)
}

// txnCTPRiffle: the library's ExactlyOnce on a group consumer
// (read_committed, DisableCommits implied) with a TransactionalID producer:
// the handler produces one output per input into the open transaction,
// and the consumer commits it with the handled inputs' offsets and the
// group's metadata once -per-txn inputs were handled in it
// (CommitEvery.Records; the interval is set far above a run so that only
// the count matters), at a revoke and at Close.
func txnCTPRiffle(ctx context.Context, spec txnSpec, c *txnCounts, notes *noteSet) (err error) {
	cl, err := riffle.NewClient(riffle.SeedBrokers(spec.addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	p, err := riffle.NewProducer(cl, riffle.TransactionalID(spec.txnID),
		riffle.Linger(produceLinger), riffle.WithCompression(riffle.CompressionNone))
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := closeCtx(ctx)
		defer cancel()
		err = errors.Join(err, p.Close(cctx))
	}()
	if err := p.InitTransactions(ctx); err != nil {
		return fmt.Errorf("InitTransactions: %w", err)
	}
	ccl, err := riffle.NewClient(riffle.SeedBrokers(spec.addr)) // the group member's own client
	if err != nil {
		return err
	}
	defer ccl.Close()

	total := int64(spec.records)
	var handled atomic.Int64
	all := make(chan struct{})
	cb := func(_ *riffle.Record, err error) { c.produced.done(err) }
	cs, err := riffle.NewConsumer(ccl,
		riffle.ConsumerGroup(spec.group), riffle.SubscribeTopics(spec.input),
		riffle.OffsetReset(riffle.ResetEarliest),
		// Chunks of a tenth of a transaction: the gate closes once -per-txn
		// inputs were handled, and the chunks already running join the
		// transaction, so smaller chunks keep it near -per-txn inputs
		// (franz-go's polls take exactly -per-txn).
		riffle.MaxBatchRecords(max(1, spec.perTxn/10)),
		riffle.ExactlyOnce(p, riffle.CommitEvery{Interval: 30 * time.Second, Records: spec.perTxn}),
		riffle.HandleBatch(func(hctx context.Context, b *riffle.FetchBatch) error {
			for _, r := range b.Records {
				p.Produce(hctx, &riffle.Record{Topic: spec.topic, Key: r.Key, Value: ctpValue(b.Partition, r.Offset, r.Value)}, cb)
			}
			if handled.Add(int64(len(b.Records))) == total {
				close(all)
			}
			return nil
		}),
		riffle.OnPartitionError(func(pe *riffle.PartitionError) { notes.add("partition error: %v", pe) }),
	)
	if err != nil {
		return err
	}
	select {
	case <-all:
	case <-ctx.Done():
		cs.Close(ctx)
		return ctx.Err()
	}
	// Close commits the last transaction.
	cctx, cancel := closeCtx(ctx)
	defer cancel()
	_, cerr := cs.Close(cctx)
	st := cs.Stats()
	c.txns.Add(st.TxnCommitted)
	c.inputs.Add(handled.Load())
	if st.TxnAborted > 0 {
		notes.add("%d transactions aborted and redone", st.TxnAborted)
	}
	if cerr != nil {
		return cerr
	}
	c.finish()
	return nil
}

// txnCTPFranz: kgo.NewGroupTransactSession (the consumer and the
// transactional producer on one client, which aborts a transaction that
// a rebalance overlapped), read_committed (kgo group consumers always
// fetch offsets with RequireStable), linger 5 ms, no compression; per
// transaction PollRecords(-per-txn), Begin, Produce one output per input,
// End(TryCommit), which flushes, commits the polled offsets in the
// transaction and commits it.
func txnCTPFranz(ctx context.Context, spec txnSpec, c *txnCounts, notes *noteSet) error {
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(spec.addr),
		kgo.TransactionalID(spec.txnID),
		kgo.ConsumerGroup(spec.group),
		kgo.ConsumeTopics(spec.input),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ProducerLinger(produceLinger),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	)
	if err != nil {
		return err
	}
	defer sess.Close()
	cb := func(_ *kgo.Record, err error) { c.produced.done(err) }
	total := int64(spec.records)
	for c.inputs.Load() < total {
		fs := sess.PollRecords(ctx, spec.perTxn)
		if err := ctx.Err(); err != nil {
			return err
		}
		fs.EachError(func(t string, p int32, err error) { notes.add("fetch error %s[%d]: %v", t, p, err) })
		n := fs.NumRecords()
		if n == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("beginning a transaction: %w", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Topic: spec.topic, Key: r.Key, Value: ctpValue(r.Partition, r.Offset, r.Value)}, cb)
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			return fmt.Errorf("ending a transaction: %w", err)
		}
		if !committed {
			// The session aborted (a rebalance overlapped): the
			// inputs come again.
			c.aborted.Add(1)
			continue
		}
		c.txns.Add(1)
		c.inputs.Add(int64(n))
	}
	c.finish()
	return nil
}

// commitCheck is what a read_committed reader found in an output topic.
type commitCheck struct {
	distinct int64 // distinct expected records found
	dups     int64 // expected records found more than once
	bad      int64 // records that are no expected record
	firstBad string
	commits  int64 // commit markers
	aborts   int64 // abort markers
	err      error // the reader could not read to the end
}

// checkCommitted reads every partition of topic from 0 to its high
// watermark as a read_committed consumer (kgo, keeping control records so
// that it sees where each partition ends) and checks the data records:
// id maps a record to its index in [0, n), or false; every index must be
// found exactly once. After a run every transaction has ended, so the
// last stable offset is the high watermark; a partition whose reader
// cannot reach it holds an open transaction.
func checkCommitted(ctx context.Context, addr, topic string, partitions, n int, id func(partition int32, value []byte) (int, bool)) commitCheck {
	var res commitCheck
	hw, err := highWatermarks(ctx, addr, topic, partitions)
	if err != nil {
		res.err = err
		return res
	}
	offs := map[int32]kgo.Offset{}
	next := make([]int64, partitions)
	left := 0
	for p := range partitions {
		if hw[p] > 0 {
			offs[int32(p)] = kgo.NewOffset().AtStart()
			left++
		}
	}
	seen := make([]uint8, n)
	bad := func(format string, args ...any) {
		if res.bad++; res.firstBad == "" {
			res.firstBad = fmt.Sprintf(format, args...)
		}
	}
	if left > 0 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.KeepControlRecords())
		if err != nil {
			res.err = err
			return res
		}
		defer cl.Close()
		rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		for left > 0 {
			fs := cl.PollFetches(rctx)
			if err := rctx.Err(); err != nil {
				var short []string
				for p := range partitions {
					if next[p] < hw[p] {
						short = append(short, fmt.Sprintf("%d at %d/%d", p, next[p], hw[p]))
					}
				}
				res.err = fmt.Errorf("read_committed reader did not reach the end (an open transaction?): partitions %s", strings.Join(short, ", "))
				return res
			}
			fs.EachError(func(_ string, p int32, err error) {
				if res.err == nil {
					res.err = fmt.Errorf("read_committed reader, partition %d: %w", p, err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				p := r.Partition
				if r.Offset+1 >= hw[p] && next[p] < hw[p] {
					left--
				}
				next[p] = r.Offset + 1
				if r.Attrs.IsControl() {
					if len(r.Key) >= 4 && binary.BigEndian.Uint16(r.Key[2:]) == 1 {
						res.commits++
					} else {
						res.aborts++
					}
					return
				}
				i, ok := id(p, r.Value)
				switch {
				case !ok || i < 0 || i >= n:
					bad("partition %d offset %d: not an expected record", p, r.Offset)
				case seen[i] > 0:
					res.dups++
				default:
					res.distinct++
				}
				if ok && i >= 0 && i < n && seen[i] < 255 {
					seen[i]++
				}
			})
		}
	}
	return res
}

// groupCommitted returns the group's committed offsets of topic's
// partitions (-1 where none), with kgo (RequireStable: no offsets of an
// open transaction are pending after a run).
func groupCommitted(ctx context.Context, addr, group, topic string, partitions int) ([]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	req.RequireStable = true
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rt.Partitions = append(rt.Partitions, int32(p))
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("fetching the group's offsets: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("fetching the group's offsets: %w", err)
	}
	out := make([]int64, partitions)
	for i := range out {
		out[i] = -1
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("fetching the group's offset of %s[%d]: %w", t.Topic, p.Partition, err)
			}
			if t.Topic == topic && p.Partition >= 0 && int(p.Partition) < partitions {
				out[p.Partition] = p.Offset
			}
		}
	}
	return out, nil
}

// txnResult is one timed and checked run.
type txnResult struct {
	consumeResult       // wall (to the last commit), total, cpu, brokerCPU, alloc, good (distinct committed), complete, problem, runErr, notes
	txns, aborted int64 // transactions the loop committed and aborted
	check         commitCheck
}

// txnOnce runs one client once and checks its output. brokerPID is the
// broker process, for its CPU over the run.
func txnOnce(ctx context.Context, run func(ctx context.Context, spec txnSpec, c *txnCounts, notes *noteSet) error,
	spec txnSpec, partitions int, brokerPID int, timeout time.Duration) txnResult {
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	b0, bok0 := procCPU(brokerPID)
	cpu0 := cpuTime()
	start := time.Now()

	var counts txnCounts
	var notes noteSet
	rctx, cancel := context.WithTimeout(ctx, timeout)
	runErr := run(rctx, spec, &counts, &notes)
	cancel()

	total := time.Since(start)
	cpu1 := cpuTime()
	runtime.ReadMemStats(&m1)
	b1, bok1 := procCPU(brokerPID)

	if errors.Is(runErr, context.DeadlineExceeded) {
		runErr = fmt.Errorf("not done within %s: %w", fmtDur(timeout), runErr)
	}
	res := txnResult{
		consumeResult: consumeResult{
			wall: total, total: total, cpu: cpu1 - cpu0, brokerCPU: -1,
			allocBytes: m1.TotalAlloc - m0.TotalAlloc, runErr: runErr,
		},
		txns:    counts.txns.Load(),
		aborted: counts.aborted.Load(),
	}
	if at := counts.doneAt.Load(); at != 0 {
		res.wall = time.Unix(0, at).Sub(start)
	}
	if bok0 && bok1 {
		res.brokerCPU = b1 - b0
	}

	// The checks, outside the timing.
	var problems []string
	ok, failed := counts.produced.ok.Load(), counts.produced.failed.Load()
	if failed > 0 {
		problems = append(problems, fmt.Sprintf("%d records failed, first: %s", failed, *counts.produced.firstErr.Load()))
	}
	if missing := int64(spec.records) - ok - failed; missing != 0 {
		problems = append(problems, fmt.Sprintf("%d records without an outcome", missing))
	}
	var id func(int32, []byte) (int, bool)
	if spec.group == "" {
		id = func(_ int32, v []byte) (int, bool) { return valueSeq(v) }
	} else {
		base := make([]int64, len(spec.perPart)+1)
		for p, n := range spec.perPart {
			base[p+1] = base[p] + n
		}
		id = func(_ int32, v []byte) (int, bool) {
			if len(v) < 12 {
				return 0, false
			}
			p, off := int32(binary.BigEndian.Uint32(v)), int64(binary.BigEndian.Uint64(v[4:]))
			if p < 0 || int(p) >= len(spec.perPart) || off < 0 || off >= spec.perPart[p] {
				return 0, false
			}
			return int(base[p] + off), true
		}
		if in := counts.inputs.Load(); in != int64(spec.records) {
			problems = append(problems, fmt.Sprintf("%d inputs committed, want %d", in, spec.records))
		}
		switch got, err := groupCommitted(ctx, spec.addr, spec.group, spec.input, len(spec.perPart)); {
		case err != nil:
			problems = append(problems, err.Error())
		case !slices.Equal(got, spec.perPart):
			problems = append(problems, fmt.Sprintf("group committed offsets %v, want the input's ends %v", got, spec.perPart))
		}
	}
	res.check = checkCommitted(ctx, spec.addr, spec.topic, partitions, spec.records, id)
	res.good = res.check.distinct
	if res.check.err != nil {
		problems = append(problems, res.check.err.Error())
	}
	if res.check.distinct != int64(spec.records) {
		problems = append(problems, fmt.Sprintf("%d of %d records committed", res.check.distinct, spec.records))
	}
	if res.check.dups > 0 {
		problems = append(problems, fmt.Sprintf("%d duplicates", res.check.dups))
	}
	if res.check.bad > 0 {
		problems = append(problems, fmt.Sprintf("%d unexpected records, first: %s", res.check.bad, res.check.firstBad))
	}
	res.problem = strings.Join(problems, "; ")
	res.complete = res.problem == ""
	res.notes = notes.list()
	if res.check.aborts > 0 {
		res.notes = append(res.notes, fmt.Sprintf("%d abort markers in the output", res.check.aborts))
	}
	if res.aborted > 0 {
		res.notes = append(res.notes, fmt.Sprintf("%d transactions aborted and redone", res.aborted))
	}

	runtime.GC()
	time.Sleep(200 * time.Millisecond)
	return res
}

// valueSeq reads the index newValuePool wrote into a value: `{"seq":`
// and 8 digits.
func valueSeq(v []byte) (int, bool) {
	const prefix = `{"seq":`
	if len(v) < len(prefix)+8 || string(v[:len(prefix)]) != prefix {
		return 0, false
	}
	n := 0
	for _, c := range v[len(prefix) : len(prefix)+8] {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// txnRow is one client's line of a mode's table.
type txnRow struct {
	resultRow
	txns, aborted int64 // of the median-wall run
}

func runTxn(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("txn", flag.ContinueOnError)
	records := fs.Int("records", 500_000, "records per run: produced (produce), or inputs read and transformed (ctp)")
	perTxn := fs.Int("per-txn", 1000, "records (produce) or inputs (ctp) per transaction")
	size := fs.Int("size", 100, "value bytes per record (at least 15)")
	partitions := fs.Int("partitions", 12, "partitions of every topic")
	keys := fs.Int("keys", 0, "produce: distinct record keys (0: no keys)")
	rounds := fs.Int("rounds", 5, "runs per client and mode, in rounds")
	modes := fs.String("modes", "produce,ctp", "comma-separated: produce, ctp")
	only := fs.String("clients", "", "comma-separated clients to run (riffle, franz-go; default both); riffle is always run")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up on one client run after this long")
	verbose := fs.Bool("v", false, "print every run as it ends (to stderr)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the profiled client's runs (-profile) to this file (file, file.2, ... per run)")
	memProfile := fs.String("memprofile", "", "write allocation profiles taken before the profiled client's first run and after each of its runs to this file.base and this file (read with pprof -diff_base; run that client alone)")
	profClient := fs.String("profile", "riffle", "the client whose runs -cpuprofile and -memprofile profile")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *records < 1 || *perTxn < 1 || *partitions < 1 || *rounds < 1 || *timeout <= 0 || *keys < 0:
		return errors.New("-records, -per-txn, -partitions, -rounds and -timeout must be positive, -keys not negative")
	case *size < 15:
		return errors.New("-size must be at least 15 (a produced value carries its index)")
	case *records > 99_999_999:
		return errors.New("-records must be below 100,000,000 (a produced value carries its index in 8 digits)")
	}
	var doProduce, doCTP bool
	for m := range strings.SplitSeq(*modes, ",") {
		switch strings.TrimSpace(m) {
		case "produce":
			doProduce = true
		case "ctp":
			doCTP = true
		default:
			return fmt.Errorf("-modes: unknown mode %q (want produce, ctp)", m)
		}
	}
	selected, err := selectClients(txnClients(), func(c txnClient) string { return c.name }, *only)
	if err != nil {
		return err
	}

	fmt.Printf("txn: %d records of %d bytes per run, transactions of %d, %d partitions; linger %s, no compression, acks=all (transactional)\n",
		*records, *size, *perTxn, *partitions, fmtDur(produceLinger))
	fmt.Printf("broker: 1 kfake broker in a child process, storing records (transactions need a real log)\n")
	fmt.Printf("measured in this process: wall from client construction until the last commit returned; CPU (getrusage RUSAGE_SELF) and\n")
	fmt.Printf("bytes allocated (TotalAlloc) until the clients were closed; broker CPU from /proc over the same span\n")
	fmt.Printf("checked after each run: a read_committed reader (kgo) reads the output to its end and must find every record exactly once\n")
	fmt.Printf("GOMAXPROCS %d, %d CPUs; load average before: %s\n", runtime.GOMAXPROCS(0), runtime.NumCPU(), loadAvg())

	type modeRows struct {
		prefix string
		rows   map[string]txnRow
	}
	var done []modeRows
	run := 0
	summariseMode := func(title string, results map[string][]txnResult) (map[string]txnRow, error) {
		rows := map[string]txnRow{}
		for _, c := range selected {
			rs := results[c.name]
			crs := make([]consumeResult, len(rs))
			for i, r := range rs {
				crs[i] = r.consumeResult
			}
			row := txnRow{resultRow: summarise(crs, int64(*records))}
			for _, r := range rs {
				if r.wall == row.res.wall {
					row.txns, row.aborted = r.txns, r.aborted
					break
				}
			}
			rows[c.name] = row
		}
		fmt.Printf("\n%s\n", title)
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "client\tversion\twall\trecords/s\ttxns\ttxn/s\tclient CPU\tCPU µs/rec\talloc B/rec\tbroker CPU\tcommitted\tall runs rec/s\t  note")
		for _, c := range selected {
			row := rows[c.name]
			r := row.res
			rate := fmt.Sprintf("%.0f", r.recsPerSec(int64(*records)))
			if row.invalid {
				rate = "invalid"
			}
			bcpu := "?"
			if r.brokerCPU >= 0 {
				bcpu = fmt.Sprintf("%.2fs", r.brokerCPU.Seconds())
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%.0f\t%.2fs\t%.2f\t%.0f\t%s\t%d\t%s\t  %s\n",
				c.name, modVersion(c.module), fmtDur(r.wall), rate, row.txns, float64(row.txns)/r.wall.Seconds(),
				row.cpu.Seconds(), float64(row.cpu.Microseconds())/float64(*records),
				float64(r.allocBytes)/float64(*records), bcpu, r.good, strings.Join(row.runs, " "), row.note)
		}
		return rows, tw.Flush()
	}

	if doProduce {
		values := newValuePool(*size, *records) // one distinct value per record
		spec := txnSpec{topic: "txn-out", records: *records, perTxn: *perTxn, values: values}
		if *keys > 0 {
			kp := newKeyPool(*keys)
			spec.keys = &kp
		}
		results := map[string][]txnResult{}
		for range *rounds {
			for _, c := range selected {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				srv, err := startKfakeServer(ctx, spec.topic, *partitions, false)
				if err != nil {
					return err
				}
				run++
				spec.addr = srv.addr
				spec.txnID = fmt.Sprintf("txn-bench-%s-%d", c.name, run)
				res := txnOnce(ctx, profiled(c.name == *profClient, *cpuProfile, *memProfile, c.produce), spec, *partitions, srv.cmd.Process.Pid, *timeout)
				if _, err := srv.stop(); err != nil {
					fmt.Fprintf(os.Stderr, "txn: stopping the broker: %v\n", err)
				}
				results[c.name] = append(results[c.name], res)
				if *verbose {
					fmt.Fprintf(os.Stderr, "txn produce: %s: %s, %d txns, cpu %s, committed %d, valid %v %s %v\n",
						c.name, fmtDur(res.wall), res.txns, fmtDur(res.cpu), res.good, res.valid(), res.problem, res.runErr)
				}
			}
		}
		rows, err := summariseMode(fmt.Sprintf("produce: transactions of %d records (%s) to %d partitions; a fresh broker per run",
			*perTxn, map[bool]string{false: "no key", true: fmt.Sprintf("%d keys", *keys)}[*keys > 0], *partitions), results)
		if err != nil {
			return err
		}
		done = append(done, modeRows{"txn produce riffle/franz-go", rows})
	}

	if doCTP {
		perPart := make([]int64, *partitions)
		for p := range perPart {
			perPart[p] = int64(*records / *partitions)
			if p < *records%*partitions {
				perPart[p]++
			}
		}
		pl, err := startPreloaded(ctx, "txn-in", perPart, *size, "none")
		if err != nil {
			return err
		}
		defer pl.stop()
		fmt.Printf("\nctp: input %q preloaded with %d records by Riffle's producer in %s (not timed); %s\n", "txn-in", *records, fmtDur(pl.took), pl.layout)
		results := map[string][]txnResult{}
		for range *rounds {
			for _, c := range selected {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				run++
				spec := txnSpec{
					addr: pl.addr, input: "txn-in", perPart: perPart, records: *records, perTxn: *perTxn,
					topic: fmt.Sprintf("txn-out-%d", run),
					group: fmt.Sprintf("txn-bench-%s-%d", c.name, run),
					txnID: fmt.Sprintf("txn-bench-%s-%d", c.name, run),
				}
				if err := adminTopic(ctx, pl.addr, spec.topic, *partitions, true); err != nil {
					return err
				}
				res := txnOnce(ctx, profiled(c.name == *profClient, *cpuProfile, *memProfile, c.ctp), spec, *partitions, pl.srv.cmd.Process.Pid, *timeout)
				if err := adminTopic(ctx, pl.addr, spec.topic, 0, false); err != nil {
					fmt.Fprintf(os.Stderr, "txn: %v\n", err)
				}
				results[c.name] = append(results[c.name], res)
				if *verbose {
					fmt.Fprintf(os.Stderr, "txn ctp: %s: %s, %d txns, cpu %s, committed %d, valid %v %s %v\n",
						c.name, fmtDur(res.wall), res.txns, fmtDur(res.cpu), res.good, res.valid(), res.problem, res.runErr)
				}
			}
		}
		rows, err := summariseMode(fmt.Sprintf("ctp: consume %q in a group, one output per input, transactions of about %d inputs with their offsets", "txn-in", *perTxn), results)
		if err != nil {
			return err
		}
		done = append(done, modeRows{"txn ctp riffle/franz-go", rows})
	}

	fmt.Println()
	fmt.Printf("%d rounds; each row is the client's run with the median wall time (txns and txn/s are that run's); client CPU is the median\n", *rounds)
	fmt.Println("over the runs; all runs rec/s lists every run in order (k = thousand records/s, ! = invalid run). committed: distinct records")
	fmt.Println("the read_committed reader found in the row's run. A run is invalid if any record failed or is missing, duplicated or unexpected in")
	fmt.Println("the output, or (ctp) the group's committed offsets are not the input's ends.")
	fmt.Printf("load average after: %s\n", loadAvg())

	// Per mode, then over the modes: the geometric mean of the modes'
	// ratios (with one mode, that mode's).
	tput, cpu, why := 1.0, 1.0, ""
	for _, m := range done {
		ra, aok := m.rows["riffle"]
		rb, bok := m.rows["franz-go"]
		w := ""
		switch {
		case !aok || !bok:
			w = "franz-go not run"
		case ra.invalid:
			w = "riffle invalid (a run failed or its output was not every record exactly once)"
		case rb.invalid:
			w = "franz-go invalid (a run failed or its output was not every record exactly once)"
		}
		if w != "" {
			fmt.Printf("%s throughput ratio: n/a (%s)\n", m.prefix, w)
			fmt.Printf("%s cpu ratio: n/a (%s)\n", m.prefix, w)
			why = w
			continue
		}
		t, c := rb.res.wall.Seconds()/ra.res.wall.Seconds(), ra.cpu.Seconds()/rb.cpu.Seconds()
		fmt.Printf("%s throughput ratio: %.2f\n", m.prefix, t)
		fmt.Printf("%s cpu ratio: %.2f\n", m.prefix, c)
		tput, cpu = tput*t, cpu*c
	}
	if why != "" {
		fmt.Printf("txn riffle/franz-go throughput ratio: n/a (%s)\n", why)
		fmt.Printf("txn riffle/franz-go cpu ratio: n/a (%s)\n", why)
		return nil
	}
	k := 1 / float64(len(done))
	fmt.Printf("txn riffle/franz-go throughput ratio: %.2f\n", math.Pow(tput, k))
	fmt.Printf("txn riffle/franz-go cpu ratio: %.2f\n", math.Pow(cpu, k))
	return nil
}

// adminTopic creates (create) or deletes a topic, with a short-lived
// client (created and closed outside the timing).
func adminTopic(ctx context.Context, addr, topic string, partitions int, create bool) error {
	cl, err := riffle.NewClient(riffle.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var res riffle.TopicResults
	if create {
		res, err = cl.Admin().CreateTopics(ctx, riffle.TopicSpec{Name: topic, Partitions: int32(partitions), ReplicationFactor: 1})
	} else {
		res, err = cl.Admin().DeleteTopics(ctx, topic)
	}
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		verb := map[bool]string{true: "creating", false: "deleting"}[create]
		return fmt.Errorf("%s topic %s: %w", verb, topic, err)
	}
	return nil
}

// profiled wraps the profiled client's run (prof) in a CPU profile when
// path is set, and in allocation profiles when memPath is set:
// memPath.base is taken before the client's first run, memPath after
// each of its runs, so memPath minus memPath.base covers its runs, and
// those of any other client run in between (-clients to run it alone).
// The heap profiles' GC counts in the run's CPU.
func profiled(prof bool, path, memPath string, run func(ctx context.Context, spec txnSpec, c *txnCounts, notes *noteSet) error) func(ctx context.Context, spec txnSpec, c *txnCounts, notes *noteSet) error {
	if (path == "" && memPath == "") || !prof {
		return run
	}
	return func(ctx context.Context, spec txnSpec, c *txnCounts, notes *noteSet) error {
		if memPath != "" && !memProfileBase {
			memProfileBase = true
			if err := writeHeapProfile(memPath + ".base"); err != nil {
				fmt.Fprintf(os.Stderr, "memprofile: %v\n", err)
			}
		}
		if memPath != "" {
			defer func() {
				if err := writeHeapProfile(memPath); err != nil {
					fmt.Fprintf(os.Stderr, "memprofile: %v\n", err)
				}
			}()
		}
		defer profiling(path)()
		return run(ctx, spec, c, notes)
	}
}

// memProfileBase: profiled wrote the base allocation profile.
var memProfileBase bool
