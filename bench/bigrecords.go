//go:build unix

package main

// bigrecords: producing and consuming big records (1 MiB by default),
// riffle and franz-go, against a kfake child process storing records
// whose max.message.bytes is raised to take them. Measured as in produce
// and consume, per MiB of values rather than per record.

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	register("bigrecords", "produce and consume 1 MiB records (riffle, franz-go): throughput, CPU and allocations per MiB; broker in a child process", runBigRecords)
}

// bigSpec is what every run of bigrecords works with.
type bigSpec struct {
	topic      string
	records    int
	size       int
	partitions int
	maxBatch   int // both producers' batch limit: one record and some slack
	maxMessage int // the broker's message.max.bytes and the topic's max.message.bytes
	values     valuePool
}

// bigProduceRiffle: NewProducer with linger 5 ms and MaxBatchBytes raised
// to take one record; defaults otherwise (idempotent, acks=all, sticky
// keyless partitioner, no compression).
func bigProduceRiffle(ctx context.Context, addr string, spec bigSpec, counts *produceCounts) error {
	cl, err := riffle.NewClient(riffle.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	p, err := riffle.NewProducer(cl, riffle.Linger(produceLinger), riffle.MaxBatchBytes(spec.maxBatch))
	if err != nil {
		return err
	}
	cb := func(_ *riffle.Record, err error) { counts.done(err) }
	for i := range spec.records {
		p.Produce(ctx, &riffle.Record{Topic: spec.topic, Value: spec.values.at(i)}, cb)
	}
	return errors.Join(p.Flush(ctx), p.Close(ctx))
}

// bigProduceFranz: kgo with linger 5 ms, no compression and
// ProducerBatchMaxBytes raised to take one record; defaults otherwise.
func bigProduceFranz(ctx context.Context, addr string, spec bigSpec, counts *produceCounts) error {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.ProducerLinger(produceLinger),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(int32(spec.maxBatch)),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	cb := func(_ *kgo.Record, err error) { counts.done(err) }
	for i := range spec.records {
		cl.Produce(ctx, &kgo.Record{Topic: spec.topic, Value: spec.values.at(i)}, cb)
	}
	return cl.Flush(ctx)
}

// bigProduceOnce runs one producer against a fresh broker and measures it
// as produceOnce does.
func bigProduceOnce(ctx context.Context, run func(context.Context, string, bigSpec, *produceCounts) error, spec bigSpec, timeout time.Duration) (produceResult, error) {
	srv, err := startKfakeServerArgs(ctx, spec.topic, spec.partitions, false, "-max-message-bytes", strconv.Itoa(spec.maxMessage))
	if err != nil {
		return produceResult{}, err
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0 := cpuTime()
	start := time.Now()
	var counts produceCounts
	rctx, cancel := context.WithTimeout(ctx, timeout)
	runErr := run(rctx, srv.addr, spec, &counts)
	cancel()
	res := produceResult{wall: time.Since(start), cpu: cpuTime() - cpu0}
	runtime.ReadMemStats(&m1)
	res.allocBytes = m1.TotalAlloc - m0.TotalAlloc
	res.ok, res.failed, res.runErr = counts.ok.Load(), counts.failed.Load(), runErr
	res.missing = int64(spec.records) - res.ok - res.failed
	if e := counts.firstErr.Load(); e != nil {
		res.firstErr = *e
	}
	res.onBroker, res.onBrokerErr = brokerRecords(ctx, srv.addr, spec.topic, spec.partitions)
	if res.brokerCPU, err = srv.stop(); err != nil {
		fmt.Fprintf(os.Stderr, "bigrecords: stopping the broker: %v\n", err)
	}
	runtime.GC()
	time.Sleep(200 * time.Millisecond)
	return res, nil
}

// bigPreload starts the broker the consumers read and fills it with
// Riffle's producer (manual partitioner, record i to partition
// i % partitions), checking the high watermarks after.
func bigPreload(ctx context.Context, spec bigSpec) (*preloaded, error) {
	srv, err := startKfakeServerArgs(ctx, spec.topic, spec.partitions, false, "-max-message-bytes", strconv.Itoa(spec.maxMessage))
	if err != nil {
		return nil, err
	}
	perPart := make([]int64, spec.partitions)
	for i := range spec.records {
		perPart[i%spec.partitions]++
	}
	pl := &preloaded{srv: srv, addr: srv.addr, topic: spec.topic, perPart: perPart}
	start := time.Now()
	err = func() error {
		cl, err := riffle.NewClient(riffle.SeedBrokers(srv.addr))
		if err != nil {
			return err
		}
		defer cl.Close()
		p, err := riffle.NewProducer(cl, riffle.WithPartitioner(riffle.ManualPartitioner()),
			riffle.Linger(produceLinger), riffle.MaxBatchBytes(spec.maxBatch))
		if err != nil {
			return err
		}
		var counts produceCounts
		cb := func(_ *riffle.Record, err error) { counts.done(err) }
		for i := range spec.records {
			p.Produce(ctx, &riffle.Record{Topic: spec.topic, Partition: int32(i % spec.partitions), Value: spec.values.at(i)}, cb)
		}
		if err := errors.Join(p.Flush(ctx), p.Close(ctx)); err != nil {
			return err
		}
		if f := counts.failed.Load(); f > 0 {
			return fmt.Errorf("%d records failed, first: %s", f, *counts.firstErr.Load())
		}
		return nil
	}()
	if err == nil {
		var hw []int64
		if hw, err = highWatermarks(ctx, srv.addr, spec.topic, spec.partitions); err == nil && !slices.Equal(hw, perPart) {
			err = fmt.Errorf("after preloading, high watermarks %v, want %v", hw, perPart)
		}
	}
	if err != nil {
		srv.stop()
		return nil, fmt.Errorf("preloading: %w", err)
	}
	pl.took = time.Since(start)
	return pl, nil
}

func runBigRecords(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bigrecords", flag.ContinueOnError)
	size := fs.Int("size", 1<<20, "value bytes per record (no key)")
	records := fs.Int("records", 200, "records to produce per run, and to consume")
	partitions := fs.Int("partitions", 12, "partitions of the topic")
	rounds := fs.Int("rounds", 3, "runs per client and phase, in rounds; the median-wall run is shown")
	only := fs.String("clients", "", "comma-separated clients to run (riffle, franz-go; default both); riffle is always run")
	partBytes := fs.Int("fetch-partition-bytes", 0, "if positive: both consumers' per-partition fetch limit (riffle FetchPartitionMaxBytes, kgo FetchMaxPartitionBytes); 0 leaves the defaults (1 MiB both)")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up on one client run after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *size < 1 || *records < 1 || *partitions < 1 || *rounds < 1 || *timeout <= 0 || *partBytes < 0 {
		return errors.New("-size, -records, -partitions, -rounds and -timeout must be positive, -fetch-partition-bytes not negative")
	}
	clients, err := selectClients([]string{"riffle", "franz-go"}, func(s string) string { return s }, *only)
	if err != nil {
		return err
	}
	spec := bigSpec{
		topic: "big", records: *records, size: *size, partitions: *partitions,
		maxBatch:   *size + 16<<10,
		maxMessage: max(1048588, *size+64<<10),
		values:     newValuePool(*size, min(10007, max(1, (16<<20) / *size))),
	}
	mib := float64(*records) * float64(*size) / (1 << 20)
	fmt.Printf("bigrecords: %d records of %d bytes (%.0f MiB of values, no key), %d partitions of %q\n", *records, *size, mib, *partitions, spec.topic)
	fmt.Printf("broker: 1 kfake broker in a child process, storing records; message.max.bytes and the topic's max.message.bytes %d\n", spec.maxMessage)
	fmt.Printf("producers: idempotent, acks=all, linger %s, no compression, batch limit %d bytes (riffle.MaxBatchBytes, kgo.ProducerBatchMaxBytes): one record a batch\n",
		fmtDur(produceLinger), spec.maxBatch)
	fetch := "default fetch sizes (1 MiB a partition, 50 MiB a fetch, both)"
	var consumeOpts consumeSpec
	if *partBytes > 0 {
		fetch = fmt.Sprintf("per-partition fetch limit %d (riffle.FetchPartitionMaxBytes, kgo.FetchMaxPartitionBytes)", *partBytes)
		consumeOpts.riffleOpts = []riffle.ConsumerOption{riffle.FetchPartitionMaxBytes(int32(*partBytes)),
			riffle.PartitionBufferBytes(max(4<<20, 2*int64(*partBytes)))}
		consumeOpts.franzOpts = []kgo.Opt{kgo.FetchMaxPartitionBytes(int32(*partBytes))}
	}
	fmt.Printf("consumers: from the earliest offsets, batch handlers, %s\n", fetch)
	fmt.Printf("measured in this process as in produce and consume: wall, CPU (getrusage) and bytes allocated (TotalAlloc) per MiB of values\n")
	fmt.Printf("GOMAXPROCS %d, %d CPUs; load average before: %s\n\n", runtime.GOMAXPROCS(0), runtime.NumCPU(), loadAvg())

	// Produce: a fresh broker per run.
	producers := map[string]func(context.Context, string, bigSpec, *produceCounts) error{
		"riffle": bigProduceRiffle, "franz-go": bigProduceFranz,
	}
	prod := map[string][]produceResult{}
	for r := range *rounds {
		for _, c := range clients {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			res, err := bigProduceOnce(ctx, producers[c], spec, *timeout)
			if err != nil {
				return fmt.Errorf("produce, round %d, %s: %w", r+1, c, err)
			}
			prod[c] = append(prod[c], res)
		}
	}
	fmt.Println("produce (a fresh broker per run):")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "client\tversion\twall\tMiB/s\tclient CPU\tCPU µs/MiB\talloc B/MiB\tbroker CPU\terrors\tmissing\ton broker\tall runs MiB/s\t  note")
	type prow struct {
		rate float64
		cpu  time.Duration
		ok   bool
	}
	prows := map[string]prow{}
	for _, c := range clients {
		rs := slices.Clone(prod[c])
		slices.SortFunc(rs, func(a, b produceResult) int { return cmp.Compare(a.wall, b.wall) })
		m := rs[len(rs)/2]
		ok := true
		var runs, notes []string
		var cpus []time.Duration
		var failed, missing int64
		for _, x := range prod[c] {
			mark := ""
			if !x.valid() {
				mark, ok = "!", false
			}
			runs = append(runs, fmt.Sprintf("%.0f%s", mib/x.wall.Seconds(), mark))
			cpus = append(cpus, x.cpu)
			failed += x.failed
			missing += x.missing
			if x.runErr != nil {
				notes = append(notes, "run error: "+oneLine(x.runErr, 80))
			}
			if x.firstErr != "" {
				notes = append(notes, "first error: "+oneLine(errors.New(x.firstErr), 80))
			}
			if x.onBrokerErr == nil && x.onBroker != x.ok {
				notes = append(notes, fmt.Sprintf("broker appended %d records, client acknowledged %d", x.onBroker, x.ok))
			}
		}
		prows[c] = prow{rate: mib / m.wall.Seconds(), cpu: median(cpus), ok: ok}
		rate := fmt.Sprintf("%.0f", mib/m.wall.Seconds())
		if !ok {
			rate = "invalid"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2fs\t%.0f\t%.0f\t%.2fs\t%d\t%d\t%d\t%s\t  %s\n",
			c, modVersion(clientModule(c)), fmtDur(m.wall), rate, m.cpu.Seconds(), float64(m.cpu.Microseconds())/mib,
			float64(m.allocBytes)/mib, m.brokerCPU.Seconds(), failed, missing, m.onBroker, strings.Join(runs, " "), strings.Join(uniqStrings(notes), "; "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	// Consume: one broker, preloaded once by Riffle.
	pl, err := bigPreload(ctx, spec)
	if err != nil {
		return err
	}
	defer pl.stop()
	fmt.Printf("\nconsume (one broker, preloaded by Riffle's producer in %s, every run reads all of it):\n", fmtDur(pl.took))
	cspec := consumeSpec{addr: pl.addr, topic: spec.topic, perPart: pl.perPart, riffleOpts: consumeOpts.riffleOpts, franzOpts: consumeOpts.franzOpts}
	consumers := map[string]func(context.Context, consumeSpec, *tally, *noteSet) error{"riffle": consumeRiffle, "franz-go": consumeFranz}
	cons := map[string][]consumeResult{}
	for range *rounds {
		for _, c := range clients {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			res := measureConsume(ctx, pl, *timeout, partitionTally(pl.perPart), func(ctx context.Context, t *tally, notes *noteSet) error {
				return consumers[c](ctx, cspec, t, notes)
			})
			cons[c] = append(cons[c], res)
		}
	}
	rows := map[string]resultRow{}
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "client\tversion\twall\tMiB/s\tclient CPU\tCPU µs/MiB\talloc B/MiB\tbroker CPU\trecords ok\tall runs MiB/s\t  note")
	for _, c := range clients {
		rw := summarise(cons[c], int64(*records))
		rows[c] = rw
		r := rw.res
		var runs []string
		for _, x := range cons[c] {
			mark := ""
			if !x.valid() {
				mark = "!"
			}
			runs = append(runs, fmt.Sprintf("%.0f%s", mib/x.wall.Seconds(), mark))
		}
		rate := fmt.Sprintf("%.0f", mib/r.wall.Seconds())
		if rw.invalid {
			rate = "invalid"
		}
		bcpu := "?"
		if r.brokerCPU >= 0 {
			bcpu = fmt.Sprintf("%.2fs", r.brokerCPU.Seconds())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2fs\t%.0f\t%.0f\t%s\t%d\t%s\t  %s\n",
			c, modVersion(clientModule(c)), fmtDur(r.wall), rate, r.cpu.Seconds(), float64(r.cpu.Microseconds())/mib,
			float64(r.allocBytes)/mib, bcpu, r.good, strings.Join(runs, " "), rw.note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Println()
	fmt.Printf("%d rounds; each row is the client's run with the median wall time; all runs lists every run in order (! = invalid).\n", *rounds)
	fmt.Println("produce: wall, CPU and alloc from client construction to Close; every record must be acknowledged and the broker's")
	fmt.Println("high watermarks must add up to the records. consume: wall until the last record was delivered, CPU and alloc until")
	fmt.Println("the client was closed; every offset must be delivered once, in order. CPU and alloc include the client's record structs.")
	fmt.Printf("load average after: %s\n", loadAvg())

	if !slices.Contains(clients, "franz-go") {
		fmt.Println("bigrecords riffle/franz-go produce throughput ratio: n/a (franz-go not run)")
		fmt.Println("bigrecords riffle/franz-go produce cpu ratio: n/a (franz-go not run)")
	} else if r, f := prows["riffle"], prows["franz-go"]; !r.ok || !f.ok {
		fmt.Println("bigrecords riffle/franz-go produce throughput ratio: n/a (an invalid run)")
		fmt.Println("bigrecords riffle/franz-go produce cpu ratio: n/a (an invalid run)")
	} else {
		fmt.Printf("bigrecords riffle/franz-go produce throughput ratio: %.2f\n", r.rate/f.rate)
		fmt.Printf("bigrecords riffle/franz-go produce cpu ratio: %.2f\n", r.cpu.Seconds()/f.cpu.Seconds())
	}
	ratioLines("bigrecords riffle/franz-go consume", "riffle", "franz-go", rows, int64(*records))
	return nil
}

// clientModule is the module a client's version is read from.
func clientModule(name string) string {
	if name == "riffle" {
		return "github.com/riffle-go/riffle"
	}
	return "github.com/twmb/franz-go"
}

// uniqStrings returns ss without repeats, in first-seen order.
func uniqStrings(ss []string) []string {
	var out []string
	for _, s := range ss {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
