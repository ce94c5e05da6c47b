//go:build unix

package main

// parallel: processing one partition with a slow (I/O-bound) handler,
// concurrently beyond the partition count with riffle/process, against
// the ceiling of one record at a time per partition. Throughput of such a
// handler is concurrency / latency; each row is compared with its ideal,
// min(concurrency, keys) / latency, and the efficiency is measured / ideal.
//
// franz-go runs the pattern of its goroutine-per-partition examples for
// reference: one PollFetches loop handing each partition's records to that
// partition's goroutine, which handles them one after another.

import (
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

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/process"
	"github.com/riffle-go/riffle/rifftest"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register("parallel", "one partition, a 20 ms handler: riffle/process by partition, by key and unordered against the ideal concurrency/latency", runParallel)
}

// The key counts of the key-mode rows and the concurrencies of the key
// and unordered rows. The summary line is unordered at the last
// concurrency.
var (
	parallelKeys        = []int{10, 100, 10_000}
	parallelConcurrency = []int{100, 1000}
)

// parRow is one row of the table.
type parRow struct {
	client string // riffle or franz-go
	mode   string // partition, key, unordered; goroutine-per-partition for franz-go
	keys   int    // distinct keys in the topic read (0: keys do not matter)
	conc   int    // process.Concurrency (0: irrelevant, one at a time)
	topic  string
	ideal  float64 // records/s
	target int     // records to handle (the rest of the topic is left)
	run    func(ctx context.Context, addr string, row parRow, latency time.Duration, rec *parRecorder, notes *noteSet) error
}

// cut reports whether the row handles fewer records than the topic holds.
func (r parRow) cut(records int) bool { return r.target < records }

// parRecorder watches the handler calls of one run: when the first began
// and the target-th ended, how many ran at once, and whether the ordering
// the mode promises held.
type parRecorder struct {
	target int
	order  func(r *riffle.Record) (string, bool) // the ordering key, if the mode keeps one
	done   chan struct{}                         // closed at the target-th end

	mu         sync.Mutex
	first      time.Time
	last       time.Time
	ended      int
	running    int
	peak       int
	started    map[int64]bool   // offsets begun
	busy       map[string]bool  // ordering keys with a call running
	lastOff    map[string]int64 // the last offset begun per ordering key
	dups       int              // offsets begun twice
	violations int              // calls begun while their ordering key ran, or out of offset order
}

func newParRecorder(target int, order func(r *riffle.Record) (string, bool)) *parRecorder {
	return &parRecorder{
		target: target, order: order, done: make(chan struct{}),
		started: map[int64]bool{}, busy: map[string]bool{}, lastOff: map[string]int64{},
	}
}

// byPartition is the ordering key of partition mode (and franz-go's
// pattern): one for the whole partition.
func byPartition(r *riffle.Record) (string, bool) { return fmt.Sprint(r.Partition), true }

// byKey is the ordering key of key mode.
func byKey(r *riffle.Record) (string, bool) { return string(r.Key), true }

func (p *parRecorder) begin(r *riffle.Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.first.IsZero() {
		p.first = time.Now()
	}
	if p.started[r.Offset] {
		p.dups++
	}
	p.started[r.Offset] = true
	p.running++
	p.peak = max(p.peak, p.running)
	if p.order == nil {
		return
	}
	if k, ok := p.order(r); ok {
		if last, seen := p.lastOff[k]; p.busy[k] || (seen && r.Offset <= last) {
			p.violations++
		}
		p.busy[k] = true
		p.lastOff[k] = r.Offset
	}
}

func (p *parRecorder) end(r *riffle.Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running--
	if p.order != nil {
		if k, ok := p.order(r); ok {
			delete(p.busy, k)
		}
	}
	if p.ended >= p.target {
		return // in flight when the target was reached
	}
	p.ended++
	if p.ended == p.target {
		p.last = time.Now()
		close(p.done)
	}
}

// wait waits until the target-th call ended, or ctx ends.
func (p *parRecorder) wait(ctx context.Context) error {
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		p.mu.Lock()
		defer p.mu.Unlock()
		return fmt.Errorf("%d of %d records handled: %w", p.ended, p.target, ctx.Err())
	}
}

// handle is the simulated I/O: latency, cut short if ctx ends (the
// record then counts as not handled).
func (p *parRecorder) handle(ctx context.Context, r *riffle.Record, latency time.Duration) error {
	p.begin(r)
	ok := sleepCtx(ctx, latency)
	if !ok {
		p.mu.Lock()
		p.running--
		if p.order != nil {
			if k, ok := p.order(r); ok {
				delete(p.busy, k)
			}
		}
		p.mu.Unlock()
		return ctx.Err()
	}
	p.end(r)
	return nil
}

// parOutcome is one run of one row.
type parOutcome struct {
	rate       float64 // records/s, from the first call's start to the target-th call's end
	d          time.Duration
	peak       int
	violations int
	dups       int
	err        error
	notes      []string
}

// parRiffle runs a process.Processor in mode m at concurrency conc
// (0: the default) with no group, the partition assigned at the earliest
// offset, and closes it once the target was handled.
func parRiffle(m process.Mode) func(ctx context.Context, addr string, row parRow, latency time.Duration, rec *parRecorder, notes *noteSet) error {
	return func(ctx context.Context, addr string, row parRow, latency time.Duration, rec *parRecorder, notes *noteSet) error {
		cl, err := riffle.NewClient(riffle.SeedBrokers(addr))
		if err != nil {
			return err
		}
		defer cl.Close()
		if _, err := cl.Admin().ListTopics(ctx, row.topic); err != nil {
			return fmt.Errorf("warming up: %w", err)
		}
		opts := []process.Option{
			process.Ordering(m),
			process.OnError(func(err error) {
				if !errors.Is(err, context.Canceled) {
					notes.add("%v", err)
				}
			}),
		}
		if row.conc > 0 {
			opts = append(opts, process.Concurrency(row.conc), process.Window(max(2*row.conc, 1024)))
		}
		p, err := process.New(cl, func(hctx context.Context, r *riffle.Record) error {
			return rec.handle(hctx, r, latency)
		}, opts...)
		if err != nil {
			return err
		}
		werr := p.Assign(riffle.Assignment{TopicPartition: riffle.TopicPartition{Topic: row.topic, Partition: 0}, Start: riffle.AtEarliest()})
		if werr == nil {
			werr = rec.wait(ctx)
		}
		// Records past the target are still running: they end within a
		// latency, or are cancelled at the deadline.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		cerr := p.Close(cctx)
		if werr != nil {
			return werr
		}
		if cerr != nil {
			notes.add("close: %v", cerr)
		}
		return nil
	}
}

// parFranz is franz-go's goroutine-per-partition pattern (its examples'
// goroutine_per_partition_consuming): a PollFetches loop sends each
// partition's records to that partition's goroutine over a channel with
// room for 10 slices; the goroutine handles them one after another.
func parFranz(ctx context.Context, addr string, row parRow, latency time.Duration, rec *parRecorder, notes *noteSet) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(row.topic)
	req.Topics = append(req.Topics, rt)
	if _, err := req.RequestWith(ctx, cl); err != nil {
		return fmt.Errorf("warming up: %w", err)
	}

	rctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	ch := make(chan []*kgo.Record, 10)
	wg.Go(func() {
		for {
			select {
			case <-rctx.Done():
				return
			case rs := <-ch:
				for _, r := range rs {
					rr := &riffle.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value}
					if rec.handle(rctx, rr, latency) != nil {
						return
					}
				}
			}
		}
	})
	wg.Go(func() {
		for {
			fs := cl.PollFetches(rctx)
			if rctx.Err() != nil || fs.IsClientClosed() {
				return
			}
			fs.EachError(func(topic string, p int32, err error) { notes.add("fetch error %s[%d]: %v", topic, p, err) })
			fs.EachPartition(func(ftp kgo.FetchTopicPartition) {
				if len(ftp.Records) == 0 {
					return
				}
				select {
				case ch <- ftp.Records:
				case <-rctx.Done():
				}
			})
		}
	})
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{row.topic: {0: kgo.NewOffset().AtStart()}})
	werr := rec.wait(ctx)
	stop()
	wg.Wait()
	return werr
}

// parOnce runs one row once.
func parOnce(ctx context.Context, addr string, row parRow, latency, timeout time.Duration) parOutcome {
	var order func(*riffle.Record) (string, bool)
	switch row.mode {
	case "key":
		order = byKey
	case "unordered":
	default:
		order = byPartition
	}
	rec := newParRecorder(row.target, order)
	var notes noteSet
	rctx, cancel := context.WithTimeout(ctx, timeout)
	err := row.run(rctx, addr, row, latency, rec, &notes)
	cancel()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := parOutcome{peak: rec.peak, violations: rec.violations, dups: rec.dups, err: err, notes: notes.list()}
	if err == nil {
		out.d = rec.last.Sub(rec.first)
		if out.d > 0 {
			out.rate = float64(rec.target) / out.d.Seconds()
		}
	}
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	return out
}

// parProduce writes records records of size bytes to partition 0 of
// topic, with keys k0, k1, … k(keys-1) in turn.
func parProduce(ctx context.Context, addr, topic string, records, keys, size int) error {
	cl, err := riffle.NewClient(riffle.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	p, err := riffle.NewProducer(cl, riffle.WithPartitioner(riffle.ManualPartitioner()), riffle.Linger(produceLinger))
	if err != nil {
		return err
	}
	values := newValuePool(size, 1009)
	var counts produceCounts
	cb := func(_ *riffle.Record, err error) { counts.done(err) }
	for i := range records {
		p.Produce(ctx, &riffle.Record{Topic: topic, Partition: 0, Key: fmt.Appendf(nil, "k%d", i%keys), Value: values.at(i)}, cb)
	}
	if err := errors.Join(p.Flush(ctx), p.Close(ctx)); err != nil {
		return err
	}
	if f := counts.failed.Load(); f > 0 {
		return fmt.Errorf("%d records failed, first: %s", f, *counts.firstErr.Load())
	}
	if ok := counts.ok.Load(); ok != int64(records) {
		return fmt.Errorf("%d of %d records acknowledged", ok, records)
	}
	return nil
}

func runParallel(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("parallel", flag.ContinueOnError)
	records := fs.Int("records", 20_000, "records in the partition (one topic per key count)")
	latency := fs.Duration("latency", 20*time.Millisecond, "handler time per record (a sleep, as I/O)")
	budget := fs.Duration("budget", 4*time.Second, "a row handles at most ideal rate × budget records, so the slow rows end in about this long")
	size := fs.Int("size", 100, "value bytes per record")
	runs := fs.Int("runs", 1, "runs per row, in rounds; the median rate is shown")
	only := fs.String("clients", "", "comma-separated clients to run (riffle, franz-go; default both); riffle is always run")
	timeout := fs.Duration("timeout", 60*time.Second, "give up on one run after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *records < 1 || *latency <= 0 || *budget <= 0 || *size < 1 || *runs < 1 || *timeout <= 0 {
		return errors.New("-records, -latency, -budget, -size, -runs and -timeout must be positive")
	}
	clients, err := selectClients([]string{"riffle", "franz-go"}, func(s string) string { return s }, *only)
	if err != nil {
		return err
	}

	topicOf := func(keys int) string { return fmt.Sprintf("par-k%d", keys) }
	perLat := 1 / latency.Seconds()
	target := func(ideal float64) int {
		return min(*records, max(20, int(ideal*budget.Seconds()+0.5)))
	}
	mostKeys := slices.Max(parallelKeys)
	var rows []parRow
	add := func(r parRow) {
		r.target = target(r.ideal)
		rows = append(rows, r)
	}
	add(parRow{client: "riffle", mode: "partition", topic: topicOf(mostKeys), ideal: perLat, run: parRiffle(process.ByPartition)})
	for _, k := range parallelKeys {
		for _, c := range parallelConcurrency {
			add(parRow{client: "riffle", mode: "key", keys: k, conc: c, topic: topicOf(k), ideal: float64(min(c, k)) * perLat, run: parRiffle(process.ByKey)})
		}
	}
	for _, c := range parallelConcurrency {
		add(parRow{client: "riffle", mode: "unordered", conc: c, topic: topicOf(mostKeys), ideal: float64(c) * perLat, run: parRiffle(process.Unordered)})
	}
	if slices.Contains(clients, "franz-go") {
		add(parRow{client: "franz-go", mode: "goroutine per partition", topic: topicOf(mostKeys), ideal: perLat, run: parFranz})
	}

	fmt.Printf("parallel: 1 partition of %d records of %d bytes; the handler sleeps %s per record (simulated I/O), honouring its context\n",
		*records, *size, fmtDur(*latency))
	fmt.Printf("ideal = min(concurrency, keys) / latency: 1/latency (%.0f records/s) one at a time, concurrency/latency unordered; efficiency = measured / ideal\n", perLat)
	copts := []rifftest.Option{rifftest.Brokers(1)}
	for _, k := range parallelKeys {
		copts = append(copts, rifftest.Topic(topicOf(k), 1))
	}
	cluster, err := rifftest.Start(copts...)
	if err != nil {
		return err
	}
	defer cluster.Close()
	addr := cluster.Addrs()[0]
	t0 := time.Now()
	pctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	for _, k := range parallelKeys {
		if err := parProduce(pctx, addr, topicOf(k), *records, k, *size); err != nil {
			return fmt.Errorf("producing to %s: %w", topicOf(k), err)
		}
	}
	fmt.Printf("broker: rifftest (kfake in-process), 1 broker; topics %s of 1 partition, keys k0, k1, … in turn, produced by Riffle in %s\n",
		strings.Join(func() []string {
			var ts []string
			for _, k := range parallelKeys {
				ts = append(ts, fmt.Sprintf("%s (%d keys)", topicOf(k), k))
			}
			return ts
		}(), ", "), fmtDur(time.Since(t0)))
	fmt.Printf("partition, unordered and franz-go rows read %s (keys do not matter to them)\n", topicOf(mostKeys))
	fmt.Printf("each run: a fresh client, warmed up (metadata fetched), reading from the earliest offset; timed from the start of the first\n")
	fmt.Printf("handler call to the end of the N-th, so startup is left out. Rows whose ideal would need more than %s for all %d records\n", fmtDur(*budget), *records)
	fmt.Printf("handle only the first N = ideal × %s records (marked *), then stop\n", fmtDur(*budget))
	fmt.Printf("GOMAXPROCS %d, %d CPUs; load average before: %s\n\n", runtime.GOMAXPROCS(0), runtime.NumCPU(), loadAvg())

	outcomes := make([][]parOutcome, len(rows))
	for range *runs {
		for i, r := range rows {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			outcomes[i] = append(outcomes[i], parOnce(ctx, addr, r, *latency, *timeout))
		}
	}

	// medianRate is the median rate of a row's runs; ok is false if any
	// failed or broke the mode's ordering.
	medianRate := func(outs []parOutcome) (float64, bool) {
		var rs []float64
		ok := true
		for _, o := range outs {
			if o.err != nil || o.violations > 0 || o.dups > 0 {
				ok = false
				continue
			}
			rs = append(rs, o.rate)
		}
		if len(rs) == 0 {
			return 0, false
		}
		slices.Sort(rs)
		n := len(rs)
		if n%2 == 1 {
			return rs[n/2], ok
		}
		return (rs[n/2-1] + rs[n/2]) / 2, ok
	}
	num := func(n int) string {
		if n == 0 {
			return "-"
		}
		return fmt.Sprint(n)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "client\tmode\tkeys\tconcurrency\trecords\ttook\trecords/s\tideal\tefficiency\tpeak\tviolations\t  note")
	for i, r := range rows {
		outs := outcomes[i]
		rate, ok := medianRate(outs)
		var notes []string
		var took []string
		peak, viol, dups := 0, 0, 0
		for _, o := range outs {
			peak = max(peak, o.peak)
			viol += o.violations
			dups += o.dups
			if o.err != nil {
				notes = append(notes, oneLine(o.err, 100))
				took = append(took, "fail")
				continue
			}
			notes = append(notes, o.notes...)
			took = append(took, fmtDur(o.d))
		}
		if dups > 0 {
			notes = append(notes, fmt.Sprintf("%d records handled twice", dups))
		}
		var uniq []string
		for _, n := range notes {
			if !slices.Contains(uniq, n) {
				uniq = append(uniq, n)
			}
		}
		n := fmt.Sprint(r.target)
		if r.cut(*records) {
			n += "*"
		}
		rateCell, effCell := "n/a", "n/a"
		if rate > 0 {
			rateCell = fmt.Sprintf("%.0f", rate)
			effCell = fmt.Sprintf("%.2f", rate/r.ideal)
			if !ok {
				effCell += "!"
			}
		}
		keys := "-"
		if r.keys > 0 {
			keys = fmt.Sprint(r.keys)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t%s\t%d\t%d\t  %s\n",
			r.client, r.mode, keys, num(r.conc), n, strings.Join(took, " "), rateCell, r.ideal, effCell, peak, viol, strings.Join(uniq, "; "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Println()
	fmt.Printf("riffle: process.New(cl, handler, Ordering(mode), Concurrency(n), Window(max(2n, 1024))) without a group, Assign(partition 0, AtEarliest());\n")
	fmt.Printf("        partition mode with the default concurrency (one record at a time per partition whatever it is)\n")
	fmt.Printf("franz-go: PollFetches + a goroutine for the partition (chan of 10 slices) handling its records one after another\n")
	fmt.Printf("records: handled per run (* = cut to ideal × %s); took: every run; peak: most handler calls running at once;\n", fmtDur(*budget))
	fmt.Printf("violations: calls begun while a call of the same key (key mode) or partition (partition, franz-go) ran, or out of offset order\n")
	fmt.Printf("(! after an efficiency: a run failed, broke the ordering or handled a record twice)\n")
	fmt.Printf("load average after: %s\n", loadAvg())

	last := len(rows) - 1
	for i, r := range rows {
		if r.client == "riffle" && r.mode == "unordered" && r.conc == slices.Max(parallelConcurrency) {
			last = i
		}
	}
	rate, ok := medianRate(outcomes[last])
	switch {
	case rate > 0 && ok:
		fmt.Printf("parallel unordered efficiency: %.2f\n", rate/rows[last].ideal)
	default:
		fmt.Printf("parallel unordered efficiency: n/a\n")
	}
	return nil
}
