//go:build unix

package main

// consume: throughput, CPU and allocations of consuming a preloaded topic
// from the earliest offsets, client by client, against one kfake broker in
// a child process, preloaded once (by Riffle, before anything is timed)
// and shared by every run.

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/IBM/sarama"
	"github.com/riffle-go/riffle"
	segkafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	register("consume", "consume a preloaded topic from the earliest offsets: throughput, client CPU and allocations; broker in a child process", runConsume)
}

// consumeSpec is what one client run consumes: every partition of topic,
// from offset 0 to perPart[p].
type consumeSpec struct {
	addr    string
	topic   string
	perPart []int64
	// perRecord: the handler is called per record (riffle HandleRecord,
	// franz-go EachRecord) instead of per batch (HandleBatch,
	// EachPartition).
	perRecord bool
	// Extra options for riffle's consumer and franz-go's client (bigrecords
	// raises the fetch sizes with them); nil in consume.
	riffleOpts []riffle.ConsumerOption
	franzOpts  []kgo.Opt
}

// consumerUnderTest is one client in consume. run creates the client,
// consumes from the earliest offsets, feeding every record to t (slot =
// partition), until t is complete or ctx ends, then closes the client.
// Errors the client reports along the way go to notes (they do not by
// themselves invalidate a run: the tally decides that).
type consumerUnderTest struct {
	name   string
	module string
	run    func(ctx context.Context, spec consumeSpec, t *tally, notes *noteSet) error
}

func consumersUnderTest() []consumerUnderTest {
	return []consumerUnderTest{
		{name: "riffle", module: "github.com/riffle-go/riffle", run: consumeRiffle},
		{name: "franz-go", module: "github.com/twmb/franz-go", run: consumeFranz},
		{name: "sarama", module: "github.com/IBM/sarama", run: consumeSarama},
		{name: "kafka-go", module: "github.com/segmentio/kafka-go", run: consumeKafkaGo},
	}
}

// noteSet collects distinct messages (client-reported errors) of one run.
type noteSet struct {
	mu sync.Mutex
	m  map[string]int
}

func (n *noteSet) add(format string, args ...any) {
	msg := oneLine(fmt.Errorf(format, args...), 100)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil {
		n.m = map[string]int{}
	}
	n.m[msg]++
}

func (n *noteSet) list() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for msg, c := range n.m {
		if c > 1 {
			msg = fmt.Sprintf("%s (×%d)", msg, c)
		}
		out = append(out, msg)
	}
	slices.Sort(out)
	return out
}

// consumeRiffle: NewConsumer with a batch handler, every partition
// assigned AtEarliest, defaults otherwise.
func consumeRiffle(ctx context.Context, spec consumeSpec, t *tally, notes *noteSet) error {
	cl, err := riffle.NewClient(riffle.SeedBrokers(spec.addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	handler := riffle.HandleBatch(func(_ context.Context, b *riffle.FetchBatch) error {
		p := int(b.Partition)
		for _, r := range b.Records {
			t.add(p, r.Offset)
		}
		return nil
	})
	if spec.perRecord {
		handler = riffle.HandleRecord(func(_ context.Context, r *riffle.Record) error {
			t.add(int(r.Partition), r.Offset)
			return nil
		})
	}
	opts := append([]riffle.ConsumerOption{handler,
		riffle.OnPartitionError(func(pe *riffle.PartitionError) { notes.add("partition error: %v", pe) }),
	}, spec.riffleOpts...)
	cs, err := riffle.NewConsumer(cl, opts...)
	if err != nil {
		return err
	}
	as := make([]riffle.Assignment, len(spec.perPart))
	for p := range as {
		as[p] = riffle.Assignment{TopicPartition: riffle.TopicPartition{Topic: spec.topic, Partition: int32(p)}, Start: riffle.AtEarliest()}
	}
	if err := cs.Assign(as...); err != nil {
		return err
	}
	werr := t.wait(ctx)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, cerr := cs.Close(cctx)
	return errors.Join(werr, cerr)
}

// consumeFranz: kgo.ConsumePartitions with every partition AtStart, a
// PollFetches loop, defaults otherwise.
func consumeFranz(ctx context.Context, spec consumeSpec, t *tally, notes *noteSet) error {
	offs := map[int32]kgo.Offset{}
	for p := range spec.perPart {
		offs[int32(p)] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(spec.addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{spec.topic: offs}),
	}, spec.franzOpts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for !t.finished() {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		fs.EachError(func(topic string, p int32, err error) { notes.add("fetch error %s[%d]: %v", topic, p, err) })
		if spec.perRecord {
			fs.EachRecord(func(r *kgo.Record) { t.add(int(r.Partition), r.Offset) })
			continue
		}
		fs.EachPartition(func(ftp kgo.FetchTopicPartition) {
			p := int(ftp.Partition)
			for _, r := range ftp.Records {
				t.add(p, r.Offset)
			}
		})
	}
	return nil
}

// consumeSarama: sarama.NewConsumer with its default config (errors
// returned on the channel instead of logged), ConsumePartition from
// OffsetOldest for every partition, one goroutine per partition draining
// Messages().
func consumeSarama(ctx context.Context, spec consumeSpec, t *tally, notes *noteSet) error {
	cfg := sarama.NewConfig()
	cfg.Consumer.Return.Errors = true
	c, err := sarama.NewConsumer([]string{spec.addr}, cfg)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	var pcs []sarama.PartitionConsumer
	var cerr error
	for p := range spec.perPart {
		pc, err := c.ConsumePartition(spec.topic, int32(p), sarama.OffsetOldest)
		if err != nil {
			cerr = err
			break
		}
		pcs = append(pcs, pc)
		wg.Add(2)
		go func() {
			defer wg.Done()
			for m := range pc.Messages() {
				t.add(int(m.Partition), m.Offset)
			}
		}()
		go func() {
			defer wg.Done()
			for e := range pc.Errors() {
				notes.add("partition error: %v", e)
			}
		}()
	}
	var werr error
	if cerr == nil {
		werr = t.wait(ctx)
	}
	for _, pc := range pcs {
		pc.AsyncClose()
	}
	closeErr := waitCtx(context.WithoutCancel(ctx), func() {
		wg.Wait()
		c.Close()
	})
	return errors.Join(cerr, werr, closeErr)
}

// consumeKafkaGo: one Reader per partition (kafka-go's Reader reads one
// partition unless it is in a group), default config, which starts at
// FirstOffset; a goroutine per Reader calls ReadMessage until its
// partition is complete.
func consumeKafkaGo(ctx context.Context, spec consumeSpec, t *tally, notes *noteSet) error {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	readers := make([]*segkafka.Reader, len(spec.perPart))
	for p := range spec.perPart {
		r := segkafka.NewReader(segkafka.ReaderConfig{
			Brokers:   []string{spec.addr},
			Topic:     spec.topic,
			Partition: p,
		})
		readers[p] = r
		wg.Add(1)
		go func() {
			defer wg.Done()
			done := t.slots[p].done
			for {
				select {
				case <-done:
					return
				default:
				}
				m, err := r.ReadMessage(rctx)
				if err != nil {
					if rctx.Err() == nil {
						notes.add("ReadMessage: %v", err)
					}
					return
				}
				t.add(m.Partition, m.Offset)
			}
		}()
	}
	werr := t.wait(ctx)
	cancel()
	wg.Wait()
	// A Reader's Close waits for its fetch in flight, which the broker
	// may hold for MaxWait (10 s by default) once a partition is read to
	// its end: close them all at once rather than one after another.
	var closing sync.WaitGroup
	for _, r := range readers {
		closing.Go(func() { r.Close() })
	}
	closing.Wait()
	return werr
}

// consumeResult is one timed run of one client (also used by ranges).
type consumeResult struct {
	wall       time.Duration // start until the last record was delivered (or the run ended, if it never was)
	total      time.Duration // start until the client was closed
	cpu        time.Duration // this process, user+sys, start to close
	brokerCPU  time.Duration // the broker process over the same span; -1 if unknown
	allocBytes uint64        // TotalAlloc growth, start to close
	good       int64         // records delivered correctly
	complete   bool
	problem    string // what the tally found wrong
	runErr     error
	notes      []string
}

func (r consumeResult) valid() bool { return r.complete && r.runErr == nil }

func (r consumeResult) recsPerSec(records int64) float64 {
	return float64(records) / r.wall.Seconds()
}

// measureConsume runs fn with a fresh tally built by mk and measures it:
// wall time until the tally completed, CPU and allocations until fn
// returned, and the broker's CPU over the run.
func measureConsume(ctx context.Context, pl *preloaded, timeout time.Duration, t *tally, fn func(ctx context.Context, t *tally, notes *noteSet) error) consumeResult {
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	b0, bok0 := pl.brokerCPUNow()
	cpu0 := cpuTime()
	start := time.Now()

	var notes noteSet
	rctx, cancel := context.WithTimeout(ctx, timeout)
	runErr := fn(rctx, t, &notes)
	cancel()

	total := time.Since(start)
	cpu1 := cpuTime()
	runtime.ReadMemStats(&m1)
	b1, bok1 := pl.brokerCPUNow()

	res := consumeResult{
		total:      total,
		wall:       total,
		cpu:        cpu1 - cpu0,
		brokerCPU:  -1,
		allocBytes: m1.TotalAlloc - m0.TotalAlloc,
		good:       t.good(),
		complete:   t.complete(),
		problem:    t.problem(),
		runErr:     runErr,
		notes:      notes.list(),
	}
	if at := t.finishedAt(); !at.IsZero() {
		res.wall = at.Sub(start)
	}
	if bok0 && bok1 {
		res.brokerCPU = b1 - b0
	}
	// Let the client's leftovers (closing connections, timers) settle
	// before the next client is measured.
	runtime.GC()
	time.Sleep(200 * time.Millisecond)
	return res
}

// selectClients returns the clients of all named in only (comma
// separated; riffle always included), in all's order.
func selectClients[T any](all []T, name func(T) string, only string) ([]T, error) {
	if only == "" {
		return all, nil
	}
	want := map[string]bool{"riffle": true}
	for n := range strings.SplitSeq(only, ",") {
		want[strings.TrimSpace(n)] = true
	}
	var out []T
	for _, c := range all {
		if want[name(c)] {
			out = append(out, c)
			delete(want, name(c))
		}
	}
	for n := range want {
		return nil, fmt.Errorf("unknown client %q", n)
	}
	return out, nil
}

// resultRow is one client's line in a consume or ranges table: its run
// with the median wall time, and every run's throughput.
type resultRow struct {
	res     consumeResult
	invalid bool
	runs    []string
	note    string
	cpu     time.Duration // median client CPU over all runs
}

func summarise(runs []consumeResult, records int64) resultRow {
	rs := slices.Clone(runs)
	slices.SortFunc(rs, func(a, b consumeResult) int { return cmp.Compare(a.wall, b.wall) })
	rw := resultRow{res: rs[len(rs)/2]}
	cpus := make([]time.Duration, len(runs))
	for i, x := range runs {
		cpus[i] = x.cpu
	}
	rw.cpu = median(cpus)
	var notes []string
	for _, x := range runs { // in run order
		mark := ""
		if !x.valid() {
			mark = "!"
			rw.invalid = true
		}
		rw.runs = append(rw.runs, fmt.Sprintf("%.0fk%s", x.recsPerSec(records)/1000, mark))
		if x.runErr != nil {
			notes = append(notes, "run error: "+oneLine(x.runErr, 80))
		}
		if x.problem != "" {
			notes = append(notes, x.problem)
		}
		notes = append(notes, x.notes...)
	}
	var uniq []string
	for _, n := range notes {
		if !slices.Contains(uniq, n) {
			uniq = append(uniq, n)
		}
	}
	rw.note = strings.Join(uniq, "; ")
	return rw
}

// printResultTable prints one row per client (name, version) of rows.
func printResultTable(names, versions []string, rows map[string]resultRow, records int64, size int) error {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "client\tversion\twall\trecords/s\tMB/s\tclient CPU\tCPU µs/rec\talloc B/rec\tbroker CPU\trecords ok\tall runs rec/s\t  note")
	mb := float64(records) * float64(size) / 1e6
	for i, name := range names {
		rw := rows[name]
		r := rw.res
		rate := fmt.Sprintf("%.0f", r.recsPerSec(records))
		mbs := fmt.Sprintf("%.1f", mb/r.wall.Seconds())
		if rw.invalid {
			rate, mbs = "invalid", "invalid"
		}
		bcpu := "?"
		if r.brokerCPU >= 0 {
			bcpu = fmt.Sprintf("%.2fs", r.brokerCPU.Seconds())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.2fs\t%.2f\t%.0f\t%s\t%d\t%s\t  %s\n",
			name, versions[i], fmtDur(r.wall), rate, mbs,
			r.cpu.Seconds(), float64(r.cpu.Microseconds())/float64(records),
			float64(r.allocBytes)/float64(records), bcpu,
			r.good, strings.Join(rw.runs, " "), rw.note)
	}
	return tw.Flush()
}

// ratioLines prints ratioLine and then "<prefix> cpu ratio: X", X being
// a's median CPU per record over b's (medians over all runs; below 1,
// a spends less).
func ratioLines(prefix, aName, bName string, rows map[string]resultRow, records int64) {
	ratioLine(prefix, aName, bName, rows, records)
	ra, aok := rows[aName]
	rb, bok := rows[bName]
	switch {
	case !aok || !bok:
		fmt.Printf("%s cpu ratio: n/a (not run)\n", prefix)
	case ra.invalid || rb.invalid:
		fmt.Printf("%s cpu ratio: n/a (an invalid run)\n", prefix)
	default:
		fmt.Printf("%s cpu ratio: %.2f\n", prefix, ra.cpu.Seconds()/rb.cpu.Seconds())
	}
}

// ratioLine prints "<prefix> riffle/<peer> throughput ratio: X" for the
// rows a and b (X = a's records/s over b's), or n/a with the reason.
func ratioLine(prefix, aName, bName string, rows map[string]resultRow, records int64) {
	rate := func(name string) (float64, string) {
		rw, ok := rows[name]
		switch {
		case !ok:
			return 0, name + " not run"
		case rw.invalid:
			return 0, name + " invalid (a run did not deliver exactly the preloaded records)"
		}
		return rw.res.recsPerSec(records), ""
	}
	ar, aw := rate(aName)
	br, bw := rate(bName)
	switch {
	case aw != "":
		fmt.Printf("%s throughput ratio: n/a (%s)\n", prefix, aw)
	case bw != "":
		fmt.Printf("%s throughput ratio: n/a (%s)\n", prefix, bw)
	default:
		fmt.Printf("%s throughput ratio: %.2f\n", prefix, ar/br)
	}
}

func runConsume(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("consume", flag.ContinueOnError)
	records := fs.Int64("records", 1_000_000, "records to preload (spread evenly over the partitions)")
	size := fs.Int("size", 100, "value bytes per record (no key)")
	partitions := fs.Int("partitions", 12, "partitions of the topic")
	only := fs.String("clients", "", "comma-separated clients to run (default all); riffle is always run")
	rounds := fs.Int("rounds", 3, "runs per client, in rounds; the run with the median wall time is shown")
	timeout := fs.Duration("timeout", 120*time.Second, "give up on one client run after this long")
	verbose := fs.Bool("v", false, "print every run as it ends (to stderr)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of riffle's runs (only) to this file")
	memProfile := fs.String("memprofile", "", "write allocation profiles taken before and after riffle's runs to this file.base and this file (read with pprof -diff_base)")
	profClient := fs.String("profile", "riffle", "the client whose runs -cpuprofile and -memprofile profile")
	handler := fs.String("handler", "batch", "batch: riffle HandleBatch, franz-go EachPartition; record: riffle HandleRecord, franz-go EachRecord (sarama and kafka-go are per record either way)")
	codec := fs.String("compression", "none", "codec of the preloaded batches: none, lz4 or zstd")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *records < 1 || *size < 1 || *partitions < 1 || *rounds < 1 || *timeout <= 0 {
		return errors.New("-records, -size, -partitions, -rounds and -timeout must be positive")
	}
	if *handler != "batch" && *handler != "record" {
		return fmt.Errorf("-handler %q: want batch or record", *handler)
	}
	if _, err := riffleCodec(*codec); err != nil {
		return err
	}
	selected, err := selectClients(consumersUnderTest(), func(c consumerUnderTest) string { return c.name }, *only)
	if err != nil {
		return err
	}

	perPart := make([]int64, *partitions)
	for p := range perPart {
		perPart[p] = *records / int64(*partitions)
		if int64(p) < *records%int64(*partitions) {
			perPart[p]++
		}
	}
	fmt.Printf("consume: %d records of %d bytes (no key) in %d partitions of %q (%d to %d per partition), read from the earliest offsets; %s handler\n",
		*records, *size, *partitions, "bench", slices.Min(perPart), slices.Max(perPart), *handler)
	pl, err := startPreloaded(ctx, "bench", perPart, *size, *codec)
	if err != nil {
		return err
	}
	defer pl.stop()
	fmt.Printf("broker: 1 kfake broker in a child process, storing records; preloaded once by Riffle's producer (idempotent, linger %s, compression %s) in %s\n",
		fmtDur(produceLinger), *codec, fmtDur(pl.took))
	fmt.Printf("batches: %s\n", pl.layout)
	fmt.Printf("every client run reads the same preloaded broker; each run must deliver every offset of every partition exactly once, in order\n")
	fmt.Printf("measured in this process: wall from client construction until the last record was delivered; CPU (getrusage RUSAGE_SELF) and\n")
	fmt.Printf("bytes allocated (TotalAlloc) from construction until the client was closed; broker CPU from /proc over the same span\n")
	fmt.Printf("GOMAXPROCS %d, %d CPUs; load average before: %s\n\n", runtime.GOMAXPROCS(0), runtime.NumCPU(), loadAvg())

	spec := consumeSpec{addr: pl.addr, topic: "bench", perPart: perPart, perRecord: *handler == "record"}
	results := map[string][]consumeResult{}
	for range *rounds {
		for _, c := range selected {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			prof := c.name == *profClient
			if prof && *memProfile != "" {
				if err := writeHeapProfile(*memProfile + ".base"); err != nil {
					return err
				}
			}
			res := measureConsume(ctx, pl, *timeout, partitionTally(perPart), func(ctx context.Context, t *tally, notes *noteSet) error {
				if prof {
					defer profiling(*cpuProfile)()
				}
				return c.run(ctx, spec, t, notes)
			})
			if prof && *memProfile != "" {
				if err := writeHeapProfile(*memProfile); err != nil {
					return err
				}
			}
			if errors.Is(res.runErr, context.DeadlineExceeded) {
				res.runErr = fmt.Errorf("not complete within %s: %w", fmtDur(*timeout), res.runErr)
			}
			results[c.name] = append(results[c.name], res)
			if *verbose {
				fmt.Fprintf(os.Stderr, "consume: %s: delivered in %s, closed at %s, %d ok, valid %v %s\n",
					c.name, fmtDur(res.wall), fmtDur(res.total), res.good, res.valid(), res.problem)
			}
		}
	}

	rows := map[string]resultRow{}
	var names, versions []string
	for _, c := range selected {
		rows[c.name] = summarise(results[c.name], *records)
		names = append(names, c.name)
		versions = append(versions, modVersion(c.module))
	}
	if err := printResultTable(names, versions, rows, *records, *size); err != nil {
		return err
	}
	fmt.Println()
	if *rounds > 1 {
		fmt.Printf("%d rounds; each row is the client's run with the median wall time; all runs rec/s lists every run in order\n", *rounds)
		fmt.Println("(k = thousand records/s, ! = that run did not deliver exactly the preloaded records, or failed).")
	}
	fmt.Println("records ok: offsets delivered in order, each once, in the row's run. Any missing, duplicate or out-of-order record in any run marks")
	fmt.Println("the client invalid. MB/s counts value bytes. client CPU and alloc include the client's shutdown.")
	fmt.Printf("load average after: %s\n", loadAvg())

	best, bestRate := "", 0.0
	for _, c := range selected {
		if rw := rows[c.name]; c.name != "riffle" && !rw.invalid {
			if r := rw.res.recsPerSec(*records); r > bestRate {
				best, bestRate = c.name, r
			}
		}
	}
	if best == "" {
		fmt.Println("best peer: none (no valid peer run)")
	} else {
		fmt.Printf("best peer: %s at %.0f records/s; ", best, bestRate)
		ratioLine("riffle/"+best, "riffle", best, rows, *records)
	}
	ratioLines("consume riffle/franz-go", "riffle", "franz-go", rows, *records)
	return nil
}
