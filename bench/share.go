//go:build unix

package main

// share: consuming a preloaded topic through a share group (KIP-932):
// Riffle's share consumer, Riffle's process.NewShare and franz-go's share
// consumer, with a handler sleeping 20 ms at concurrency 1,000 and a
// handler doing nothing; and, for comparison, Riffle's process Unordered
// on a classic consumer group. One kfake broker in a child process.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/process"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	register("share", "consume a preloaded topic through a share group: riffle share consumer, riffle process.NewShare, franz-go share consumer, riffle process Unordered (classic group); 20 ms and no-op handlers", runShare)
}

// shareCount counts the distinct records a run handled (any order) and
// the records handled more than once.
type shareCount struct {
	seen     [][]atomic.Bool
	distinct atomic.Int64
	dups     atomic.Int64
	total    int64
	done     chan struct{}
	at       atomic.Int64 // unix nanos of the last new record
}

func newShareCount(perPart []int64) *shareCount {
	c := &shareCount{done: make(chan struct{})}
	for _, n := range perPart {
		c.seen = append(c.seen, make([]atomic.Bool, n))
		c.total += n
	}
	return c
}

func (c *shareCount) add(p int32, off int64) {
	if int(p) >= len(c.seen) || off < 0 || off >= int64(len(c.seen[p])) {
		c.dups.Add(1) // not a preloaded record: counted as wrong
		return
	}
	if c.seen[p][off].Swap(true) {
		c.dups.Add(1)
		return
	}
	if c.distinct.Add(1) == c.total {
		c.at.Store(time.Now().UnixNano())
		close(c.done)
	}
}

func (c *shareCount) wait(ctx context.Context) error {
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type shareSpec struct {
	addr, topic, group string
	conc               int
	sleep              time.Duration
}

func (s shareSpec) handle(c *shareCount, p int32, off int64) {
	if s.sleep > 0 {
		time.Sleep(s.sleep)
	}
	c.add(p, off)
}

type shareClient struct {
	name, module string
	share        bool // needs a share group pointed at offset 0
	run          func(ctx context.Context, spec shareSpec, c *shareCount, notes *noteSet) error
}

func shareClients() []shareClient {
	return []shareClient{
		{name: "riffle share", module: "github.com/riffle-go/riffle", share: true, run: shareRiffle},
		{name: "riffle process share", module: "github.com/riffle-go/riffle", share: true, run: shareRiffleProcess},
		{name: "franz-go share", module: "github.com/twmb/franz-go", share: true, run: shareFranz},
		{name: "riffle process classic", module: "github.com/riffle-go/riffle", run: shareRiffleClassic},
	}
}

// shareRiffle: NewShareConsumer with Runners = concurrency, implicit
// acknowledgement (accept when the handler returns).
func shareRiffle(ctx context.Context, spec shareSpec, c *shareCount, notes *noteSet) error {
	cl, err := riffle.NewClient(riffle.SeedBrokers(spec.addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	sc, err := riffle.NewShareConsumer(cl, riffle.ShareGroup(spec.group), riffle.SubscribeTopics(spec.topic),
		riffle.Runners(spec.conc),
		riffle.HandleRecord(func(_ context.Context, r *riffle.Record) error {
			spec.handle(c, r.Partition, r.Offset)
			return nil
		}))
	if err != nil {
		return err
	}
	werr := c.wait(ctx)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return errors.Join(werr, sc.Close(cctx))
}

// shareRiffleProcess: process.NewShare with Concurrency = concurrency.
func shareRiffleProcess(ctx context.Context, spec shareSpec, c *shareCount, notes *noteSet) error {
	cl, err := riffle.NewClient(riffle.SeedBrokers(spec.addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	p, err := process.NewShare(cl, func(_ context.Context, r *riffle.Record) error {
		spec.handle(c, r.Partition, r.Offset)
		return nil
	}, process.Concurrency(spec.conc),
		process.OnError(func(err error) { notes.add("processor error: %v", err) }),
		process.ConsumerOptions(riffle.ShareGroup(spec.group), riffle.SubscribeTopics(spec.topic)))
	if err != nil {
		return err
	}
	werr := c.wait(ctx)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return errors.Join(werr, p.Close(cctx))
}

// shareRiffleClassic: process.New Unordered on a classic consumer group
// from the earliest offsets, Concurrency = concurrency.
func shareRiffleClassic(ctx context.Context, spec shareSpec, c *shareCount, notes *noteSet) error {
	cl, err := riffle.NewClient(riffle.SeedBrokers(spec.addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	p, err := process.New(cl, func(_ context.Context, r *riffle.Record) error {
		spec.handle(c, r.Partition, r.Offset)
		return nil
	}, process.Ordering(process.Unordered), process.Concurrency(spec.conc),
		process.OnError(func(err error) { notes.add("processor error: %v", err) }),
		process.ConsumerOptions(riffle.ConsumerGroup(spec.group), riffle.SubscribeTopics(spec.topic),
			riffle.OffsetReset(riffle.ResetEarliest)))
	if err != nil {
		return err
	}
	werr := c.wait(ctx)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return errors.Join(werr, p.Close(cctx))
}

// shareFranz: kgo with ShareGroup, PollRecords(ctx, concurrency), the
// polled records handled on a pool of concurrency goroutines, each
// acknowledged (AckAccept) when its handler returns, and the next poll
// only once the whole poll is handled: kgo auto-accepts, at the next
// poll, every record of the previous one not yet acknowledged, so polling
// earlier would accept records before they were handled.
func shareFranz(ctx context.Context, spec shareSpec, c *shareCount, notes *noteSet) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(spec.addr), kgo.ShareGroup(spec.group), kgo.ConsumeTopics(spec.topic),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			if err := rs.Error(); err != nil {
				notes.add("ack error: %v", err)
			}
		}))
	if err != nil {
		return err
	}
	defer cl.Close()
	work := make(chan *kgo.Record)
	var wg, pool sync.WaitGroup
	for range spec.conc {
		pool.Go(func() {
			for r := range work {
				spec.handle(c, r.Partition, r.Offset)
				r.Ack(kgo.AckAccept)
				wg.Done()
			}
		})
	}
	defer func() {
		close(work)
		pool.Wait()
	}()
	for {
		select {
		case <-c.done:
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			return cl.FlushAcks(fctx)
		default:
		}
		fs := cl.PollRecords(ctx, spec.conc)
		if err := ctx.Err(); err != nil {
			return err
		}
		fs.EachError(func(topic string, p int32, err error) { notes.add("fetch error %s[%d]: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			wg.Add(1)
			work <- r
		})
		wg.Wait()
	}
}

// shareSetup points a fresh share group at offset 0 of every partition
// (share groups start at the latest offset unless told otherwise).
func shareSetup(ctx context.Context, addr, topic, group string, partitions int) error {
	cl, err := riffle.NewClient(riffle.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	offs := map[riffle.TopicPartition]int64{}
	for p := range partitions {
		offs[riffle.TopicPartition{Topic: topic, Partition: int32(p)}] = 0
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := cl.Admin().AlterShareGroupOffsets(sctx, group, offs)
	if err != nil {
		return err
	}
	for tp, err := range res {
		if err != nil {
			return fmt.Errorf("%v: %w", tp, err)
		}
	}
	return nil
}

func runShare(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("share", flag.ContinueOnError)
	records := fs.Int64("records", 60_000, "records to preload (spread evenly over the partitions)")
	size := fs.Int("size", 100, "value bytes per record (no key)")
	partitions := fs.Int("partitions", 12, "partitions of the topic")
	conc := fs.Int("concurrency", 1000, "handler goroutines of every client (Runners, Concurrency, kgo poll size and pool)")
	sleep := fs.Duration("sleep", 20*time.Millisecond, "what the sleeping handler sleeps per record")
	rounds := fs.Int("rounds", 5, "runs per client and handler, in rounds; the run with the median wall time is shown")
	timeout := fs.Duration("timeout", 120*time.Second, "give up on one run after this long")
	only := fs.String("clients", "", "comma-separated clients to run (default all); \"riffle share\" is always run")
	verbose := fs.Bool("v", false, "print every run as it ends (to stderr)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *records < 1 || *size < 1 || *partitions < 1 || *rounds < 1 || *timeout <= 0 || *conc < 1 || *sleep < 0 {
		return errors.New("-records, -size, -partitions, -rounds, -timeout and -concurrency must be positive")
	}
	selected := shareClients()
	if *only != "" {
		var err error
		selected, err = selectClients(shareClients(), func(c shareClient) string { return c.name }, "riffle share,"+*only)
		if err != nil {
			return err
		}
	}
	perPart := make([]int64, *partitions)
	for p := range perPart {
		perPart[p] = *records / int64(*partitions)
		if int64(p) < *records%int64(*partitions) {
			perPart[p]++
		}
	}
	handlers := []struct {
		name  string
		sleep time.Duration
	}{{fmt.Sprintf("sleep %s", fmtDur(*sleep)), *sleep}, {"no-op", 0}}

	fmt.Printf("share: %d records of %d bytes (no key) in %d partitions of %q, every record handled once per run; handlers: %s and no-op, concurrency %d\n",
		*records, *size, *partitions, "bench", handlers[0].name, *conc)
	pl, err := startPreloaded(ctx, "bench", perPart, *size, "none")
	if err != nil {
		return err
	}
	defer pl.stop()
	fmt.Printf("broker: 1 kfake broker in a child process, preloaded once by Riffle's producer in %s; batches: %s\n", fmtDur(pl.took), pl.layout)
	fmt.Printf("each run uses a fresh group: share groups are pointed at offset 0 (AlterShareGroupOffsets, not timed); the classic group starts at the earliest offsets\n")
	fmt.Printf("franz-go: PollRecords(concurrency), the poll handled on a pool of concurrency goroutines, Ack(AckAccept) each, next poll when the poll is done\n")
	fmt.Printf("GOMAXPROCS %d, %d CPUs; load average before: %s\n\n", runtime.GOMAXPROCS(0), runtime.NumCPU(), loadAvg())

	results := map[string]map[string][]consumeResult{}
	for _, h := range handlers {
		results[h.name] = map[string][]consumeResult{}
	}
	run := 0
	for round := range *rounds {
		for _, h := range handlers {
			for _, c := range selected {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				run++
				spec := shareSpec{addr: pl.addr, topic: "bench", group: fmt.Sprintf("bench-share-%d", run), conc: *conc, sleep: h.sleep}
				if c.share {
					if err := shareSetup(ctx, pl.addr, "bench", spec.group, *partitions); err != nil {
						return fmt.Errorf("setting up %s: %w", spec.group, err)
					}
				}
				res := measureShare(ctx, pl, *timeout, perPart, func(ctx context.Context, cnt *shareCount, notes *noteSet) error {
					return c.run(ctx, spec, cnt, notes)
				})
				results[h.name][c.name] = append(results[h.name][c.name], res)
				if *verbose {
					fmt.Fprintf(os.Stderr, "share: round %d %s %s: %s, %d ok, cpu %s %s\n", round, h.name, c.name, fmtDur(res.wall), res.good, fmtDur(res.cpu), res.problem)
				}
			}
		}
	}

	var tput, cpu []float64
	for _, h := range handlers {
		fmt.Printf("handler: %s\n", h.name)
		rows := map[string]resultRow{}
		var names, versions []string
		for _, c := range selected {
			rows[c.name] = summarise(results[h.name][c.name], *records)
			names = append(names, c.name)
			versions = append(versions, modVersion(c.module))
		}
		if err := printResultTable(names, versions, rows, *records, *size); err != nil {
			return err
		}
		ratioLines("share "+h.name+" riffle/franz-go", "riffle share", "franz-go share", rows, *records)
		ratioLines("share "+h.name+" riffle process/franz-go", "riffle process share", "franz-go share", rows, *records)
		a, b := rows["riffle share"], rows["franz-go share"]
		if _, ok := rows["franz-go share"]; ok && !a.invalid && !b.invalid {
			tput = append(tput, a.res.recsPerSec(*records)/b.res.recsPerSec(*records))
			cpu = append(cpu, a.cpu.Seconds()/b.cpu.Seconds())
		}
		fmt.Println()
	}
	fmt.Printf("%d rounds; each row is the client's run with the median wall time (CPU: the median over the rounds); all runs rec/s lists every run in order\n", *rounds)
	fmt.Println("(k = thousand records/s, ! = that run did not handle every preloaded record, or failed). records ok: distinct records handled;")
	fmt.Println("a record handled twice is noted. client CPU and alloc include the client's shutdown.")
	fmt.Printf("load average after: %s\n", loadAvg())
	if len(tput) == len(handlers) {
		fmt.Printf("share riffle/franz-go throughput ratio: %.2f\n", geomean(tput))
		fmt.Printf("share riffle/franz-go cpu ratio: %.2f\n", geomean(cpu))
	} else {
		fmt.Println("share riffle/franz-go throughput ratio: n/a (an invalid run, or franz-go not run)")
		fmt.Println("share riffle/franz-go cpu ratio: n/a (an invalid run, or franz-go not run)")
	}
	return nil
}

func geomean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += math.Log(x)
	}
	return math.Exp(s / float64(len(xs)))
}

// measureShare runs fn with a fresh count and measures it as
// measureConsume does: wall until every record was handled, CPU and
// allocations until fn returned, the broker's CPU over the run.
func measureShare(ctx context.Context, pl *preloaded, timeout time.Duration, perPart []int64, fn func(ctx context.Context, c *shareCount, notes *noteSet) error) consumeResult {
	cnt := newShareCount(perPart)
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	b0, bok0 := pl.brokerCPUNow()
	cpu0 := cpuTime()
	start := time.Now()
	var notes noteSet
	rctx, cancel := context.WithTimeout(ctx, timeout)
	runErr := fn(rctx, cnt, &notes)
	cancel()
	total := time.Since(start)
	cpu1 := cpuTime()
	runtime.ReadMemStats(&m1)
	b1, bok1 := pl.brokerCPUNow()
	res := consumeResult{
		total: total, wall: total, cpu: cpu1 - cpu0, brokerCPU: -1,
		allocBytes: m1.TotalAlloc - m0.TotalAlloc,
		good:       cnt.distinct.Load(), complete: cnt.distinct.Load() == cnt.total,
		runErr: runErr, notes: notes.list(),
	}
	if d := cnt.dups.Load(); d > 0 {
		res.problem = fmt.Sprintf("%d records handled more than once", d)
	}
	if at := cnt.at.Load(); at != 0 {
		res.wall = time.Unix(0, at).Sub(start)
	}
	if bok0 && bok1 {
		res.brokerCPU = b1 - b0
	}
	if errors.Is(runErr, context.DeadlineExceeded) {
		res.runErr = fmt.Errorf("not complete within %s: %w", fmtDur(timeout), runErr)
	}
	runtime.GC()
	time.Sleep(200 * time.Millisecond)
	return res
}
