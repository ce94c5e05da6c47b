//go:build unix

package main

// latency: end-to-end produce→consume latency at a steady rate. One
// process produces records carrying their send time and consumes them
// back; latency is the receive time minus the send time, read from the
// same clock. The broker is a kfake child process storing records.

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	register("latency", "end-to-end produce→consume latency at a steady rate (riffle, franz-go); broker in a child process", runLatency)
}

// latencySpec is one client run.
type latencySpec struct {
	addr     string
	topic    string
	start    []int64 // per partition: the offset to consume from (the high watermark before the run)
	rate     int     // records per second
	size     int     // value bytes (≥ 8: the send time is in the first 8)
	warmup   time.Duration
	duration time.Duration
	linger   time.Duration
}

// latRecorder collects what the consumer received: the latency of every
// record sent inside the measured window, and a check that every
// partition delivers its offsets in order, each once, from its start.
type latRecorder struct {
	from, to atomic.Int64 // measured window of send times (UnixNano); to = 0 while unknown

	mu       sync.Mutex
	lats     []time.Duration
	received int64
	next     []int64 // per partition, the next offset expected
	bad      int64
	firstBad string
	last     time.Time // when the last record arrived
}

func newLatRecorder(start []int64, capacity int) *latRecorder {
	return &latRecorder{next: slices.Clone(start), lats: make([]time.Duration, 0, capacity)}
}

// add records one received record.
func (l *latRecorder) add(part int32, off int64, value []byte) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.received++
	l.last = now
	switch {
	case part < 0 || int(part) >= len(l.next):
		l.failLocked(fmt.Sprintf("record of unknown partition %d", part))
		return
	case off != l.next[part]:
		l.failLocked(fmt.Sprintf("partition %d: offset %d delivered, expected %d", part, off, l.next[part]))
	case len(value) < 8:
		l.failLocked(fmt.Sprintf("partition %d offset %d: value of %d bytes", part, off, len(value)))
		return
	}
	l.next[part] = off + 1
	sent := int64(binary.BigEndian.Uint64(value))
	if from, to := l.from.Load(), l.to.Load(); from != 0 && sent >= from && (to == 0 || sent < to) {
		l.lats = append(l.lats, now.Sub(time.Unix(0, sent)))
	}
}

func (l *latRecorder) failLocked(msg string) {
	l.bad++
	if l.firstBad == "" {
		l.firstBad = msg
	}
}

func (l *latRecorder) receivedCount() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.received
}

// pacer produces at spec.rate for warmup+duration: every millisecond it
// produces the records due by then (rate × elapsed), so a late tick is
// caught up rather than lost. produce gets a fresh value with the send
// time in its first 8 bytes. It sets the recorder's window once the
// warm-up ends and returns the records handed to produce.
func pacer(ctx context.Context, spec latencySpec, rec *latRecorder, produce func(value []byte)) int64 {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	rec.from.Store(start.Add(spec.warmup).UnixNano())
	total := spec.warmup + spec.duration
	var sent int64
	for {
		select {
		case <-ctx.Done():
			return sent
		case <-tick.C:
		}
		el := time.Since(start)
		if el >= total {
			el = total
		}
		due := int64(float64(spec.rate) * el.Seconds())
		for ; sent < due; sent++ {
			v := make([]byte, spec.size)
			binary.BigEndian.PutUint64(v, uint64(time.Now().UnixNano()))
			produce(v)
		}
		if el == total {
			rec.to.Store(start.Add(total).UnixNano())
			return sent
		}
	}
}

// waitReceived waits until the consumer has received want records, or
// ctx ends, or nothing arrived for 5 s.
func waitReceived(ctx context.Context, rec *latRecorder, want int64) {
	for rec.receivedCount() < want && ctx.Err() == nil {
		rec.mu.Lock()
		stalled := !rec.last.IsZero() && time.Since(rec.last) > 5*time.Second
		rec.mu.Unlock()
		if stalled {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// latencyRiffle: one riffle.Client carrying a Producer (linger as given,
// defaults otherwise: idempotent, acks=all, sticky keyless partitioner)
// and a Consumer (HandleRecord, every partition assigned at its high
// watermark, defaults otherwise: FetchMaxWait 500 ms, min bytes 1).
func latencyRiffle(ctx context.Context, spec latencySpec, rec *latRecorder, counts *produceCounts) (int64, error) {
	cl, err := riffle.NewClient(riffle.SeedBrokers(spec.addr))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	var notes noteSet
	cs, err := riffle.NewConsumer(cl,
		riffle.HandleRecord(func(_ context.Context, r *riffle.Record) error {
			rec.add(r.Partition, r.Offset, r.Value)
			return nil
		}),
		riffle.OnPartitionError(func(pe *riffle.PartitionError) { notes.add("partition error: %v", pe) }),
	)
	if err != nil {
		return 0, err
	}
	as := make([]riffle.Assignment, len(spec.start))
	for p := range as {
		as[p] = riffle.Assignment{TopicPartition: riffle.TopicPartition{Topic: spec.topic, Partition: int32(p)}, Start: riffle.AtOffset(spec.start[p])}
	}
	if err := cs.Assign(as...); err != nil {
		return 0, err
	}
	// Positioned: every partition has had a fetch response (its high
	// watermark is known), so fetches are in flight.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := cs.Stats()
		ready := len(st.Partitions) == len(spec.start)
		for _, p := range st.Partitions {
			ready = ready && p.HighWatermark >= 0
		}
		if ready {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, errors.New("consumer not positioned within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	p, err := riffle.NewProducer(cl, riffle.Linger(spec.linger))
	if err != nil {
		return 0, err
	}
	cb := func(_ *riffle.Record, err error) { counts.done(err) }
	sent := pacer(ctx, spec, rec, func(v []byte) {
		p.Produce(ctx, &riffle.Record{Topic: spec.topic, Value: v}, cb)
	})
	ferr := p.Flush(ctx)
	waitReceived(ctx, rec, sent)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	perr := p.Close(cctx)
	_, cerr := cs.Close(cctx)
	if n := notes.list(); len(n) > 0 {
		return sent, fmt.Errorf("%s", strings.Join(n, "; "))
	}
	return sent, errors.Join(ferr, perr, cerr)
}

// latencyFranz: one kgo client producing (linger as given, defaults
// otherwise: idempotent, acks=all, sticky keyless partitioner) and
// consuming every partition from its high watermark (ConsumePartitions,
// a PollFetches loop; defaults otherwise: FetchMaxWait 5 s, min bytes 1).
func latencyFranz(ctx context.Context, spec latencySpec, rec *latRecorder, counts *produceCounts) (int64, error) {
	offs := map[int32]kgo.Offset{}
	for p, o := range spec.start {
		offs[int32(p)] = kgo.NewOffset().At(o)
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(spec.addr),
		kgo.ProducerLinger(spec.linger),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{spec.topic: offs}),
	)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	var notes noteSet
	pctx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			fs := cl.PollFetches(pctx)
			if pctx.Err() != nil || fs.IsClientClosed() {
				return
			}
			fs.EachError(func(t string, p int32, err error) { notes.add("fetch error %s[%d]: %v", t, p, err) })
			fs.EachRecord(func(r *kgo.Record) { rec.add(r.Partition, r.Offset, r.Value) })
		}
	})
	// No stat says when kgo's first fetch is in flight; give it the
	// same head start riffle needs at most (one fetch wait), and the
	// warm-up covers the rest.
	time.Sleep(500 * time.Millisecond)
	cb := func(_ *kgo.Record, err error) { counts.done(err) }
	sent := pacer(ctx, spec, rec, func(v []byte) {
		cl.Produce(ctx, &kgo.Record{Topic: spec.topic, Value: v}, cb)
	})
	ferr := cl.Flush(ctx)
	waitReceived(ctx, rec, sent)
	stopPoll()
	wg.Wait()
	if n := notes.list(); len(n) > 0 {
		return sent, fmt.Errorf("%s", strings.Join(n, "; "))
	}
	return sent, ferr
}

// latencyResult is one run of one client.
type latencyResult struct {
	p50, p90, p99, p999, max time.Duration
	measured                 int   // latencies in the window
	sent, received           int64 // all records, warm-up included
	failed                   int64 // producer callbacks with an error
	bad                      int64 // out-of-order, duplicate or malformed deliveries
	cpu                      time.Duration
	err                      error
	note                     string
}

func (r latencyResult) valid() bool {
	return r.err == nil && r.failed == 0 && r.bad == 0 && r.sent == r.received && r.measured > 0
}

// pct returns the q-quantile of sorted ds (nearest rank).
func pct(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(q*float64(len(ds))+0.5) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

func latencyOnce(ctx context.Context, run func(context.Context, latencySpec, *latRecorder, *produceCounts) (int64, error), spec latencySpec, partitions int, timeout time.Duration) latencyResult {
	hw, err := highWatermarks(ctx, spec.addr, spec.topic, partitions)
	if err != nil {
		return latencyResult{err: err}
	}
	spec.start = hw
	rec := newLatRecorder(hw, int(float64(spec.rate)*spec.duration.Seconds()*1.1))
	var counts produceCounts
	runtime.GC()
	cpu0 := cpuTime()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	sent, err := run(rctx, spec, rec, &counts)
	cancel()
	cpu := cpuTime() - cpu0
	rec.mu.Lock()
	defer rec.mu.Unlock()
	lats := rec.lats
	slices.Sort(lats)
	res := latencyResult{
		p50: pct(lats, 0.50), p90: pct(lats, 0.90), p99: pct(lats, 0.99), p999: pct(lats, 0.999),
		measured: len(lats), sent: sent, received: rec.received,
		failed: counts.failed.Load(), bad: rec.bad, cpu: cpu, err: err,
	}
	if len(lats) > 0 {
		res.max = lats[len(lats)-1]
	}
	var notes []string
	if err != nil {
		notes = append(notes, "run error: "+oneLine(err, 80))
	}
	if e := counts.firstErr.Load(); e != nil {
		notes = append(notes, "first produce error: "+oneLine(errors.New(*e), 80))
	}
	if rec.firstBad != "" {
		notes = append(notes, rec.firstBad)
	}
	res.note = strings.Join(notes, "; ")
	runtime.GC()
	time.Sleep(200 * time.Millisecond)
	return res
}

func runLatency(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("latency", flag.ContinueOnError)
	rate := fs.Int("rate", 10_000, "records produced per second (paced every 1 ms)")
	size := fs.Int("size", 100, "value bytes per record (the send time is in the first 8)")
	duration := fs.Duration("duration", 10*time.Second, "measured time per run, after the warm-up")
	warmup := fs.Duration("warmup", 2*time.Second, "time produced and consumed before the measured window, not counted")
	linger := fs.Duration("linger", produceLinger, "producer linger of both clients (riffle.Linger, kgo.ProducerLinger)")
	partitions := fs.Int("partitions", 12, "partitions of the topic")
	rounds := fs.Int("rounds", 3, "runs per client, in rounds; medians of the per-run p50 and p99 are compared")
	only := fs.String("clients", "", "comma-separated clients to run (riffle, franz-go; default both); riffle is always run")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up on one client run after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *rate < 1 || *size < 8 || *duration <= 0 || *warmup < 0 || *linger < 0 || *partitions < 1 || *rounds < 1 || *timeout <= 0:
		return errors.New("-rate, -duration, -partitions, -rounds and -timeout must be positive, -size at least 8, -warmup and -linger not negative")
	}
	type client struct {
		name, module string
		run          func(context.Context, latencySpec, *latRecorder, *produceCounts) (int64, error)
	}
	selected, err := selectClients([]client{
		{"riffle", "github.com/riffle-go/riffle", latencyRiffle},
		{"franz-go", "github.com/twmb/franz-go", latencyFranz},
	}, func(c client) string { return c.name }, *only)
	if err != nil {
		return err
	}

	const topic = "latency"
	srv, err := startKfakeServer(ctx, topic, *partitions, false)
	if err != nil {
		return err
	}
	defer srv.stop()
	fmt.Printf("latency: %d records/s of %d bytes (no key), paced every 1 ms, to %q (%d partitions); %s warm-up (not counted), then %s measured\n",
		*rate, *size, topic, *partitions, fmtDur(*warmup), fmtDur(*duration))
	fmt.Printf("each client produces and consumes in this process with one client object; latency = receive time - send time (in the value)\n")
	fmt.Printf("producers: linger %s, idempotent, acks=all, no compression; consumers from the high watermark, default fetch settings\n", fmtDur(*linger))
	fmt.Printf("broker: 1 kfake broker in a child process, storing records, shared by every run\n")
	fmt.Printf("GOMAXPROCS %d, %d CPUs; load average before: %s\n\n", runtime.GOMAXPROCS(0), runtime.NumCPU(), loadAvg())

	spec := latencySpec{addr: srv.addr, topic: topic, rate: *rate, size: *size, warmup: *warmup, duration: *duration, linger: *linger}
	results := map[string][]latencyResult{}
	for range *rounds {
		for _, c := range selected {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			results[c.name] = append(results[c.name], latencyOnce(ctx, c.run, spec, *partitions, *timeout))
		}
	}

	type summary struct {
		p50, p99, cpu time.Duration
		ok            bool
	}
	sums := map[string]summary{}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "client\tversion\trun\tp50\tp90\tp99\tp99.9\tmax\tmeasured\tsent\treceived\terrors\tbad\tCPU µs/rec\t  note")
	for _, c := range selected {
		var p50s, p99s, cpus []time.Duration
		ok := true
		for i, r := range results[c.name] {
			mark := ""
			if !r.valid() {
				mark, ok = "!", false
			}
			p50s = append(p50s, r.p50)
			p99s = append(p99s, r.p99)
			var perRec time.Duration
			if r.sent > 0 {
				perRec = r.cpu / time.Duration(r.sent)
				cpus = append(cpus, perRec)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%.1f\t  %s\n",
				c.name, modVersion(c.module), i+1, mark, fmtLat(r.p50), fmtLat(r.p90), fmtLat(r.p99), fmtLat(r.p999), fmtLat(r.max),
				r.measured, r.sent, r.received, r.failed, r.bad, float64(perRec.Nanoseconds())/1e3, r.note)
		}
		sums[c.name] = summary{p50: median(p50s), p99: median(p99s), cpu: median(cpus), ok: ok}
		fmt.Fprintf(tw, "%s\t\tmedian\t%s\t\t%s\t\t\t\t\t\t\t\t%.1f\t\n", c.name, fmtLat(sums[c.name].p50), fmtLat(sums[c.name].p99), float64(sums[c.name].cpu.Nanoseconds())/1e3)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Println()
	fmt.Printf("latency includes: the producer's linger (%s, up to that long per batch), batching and the produce request (idempotent, acks=all),\n", fmtDur(*linger))
	fmt.Println("kfake's append and its wake-up of the waiting fetch, the fetch response, decoding, and the hand-off to the handler (riffle: a")
	fmt.Println("HandleRecord call on a runner goroutine; franz-go: PollFetches returning, then EachRecord); both ends run in this process,")
	fmt.Println("and the broker is another process on the same CPUs. Percentiles per run, by nearest rank over the records sent in the")
	fmt.Println("measured window; measured: those records; sent and received count the warm-up too and must be equal. CPU µs/rec: this")
	fmt.Println("process's CPU (getrusage) from client construction to close, over the records sent, producing and consuming together.")
	fmt.Println("! = the run had produce errors, bad deliveries (gap, duplicate, reorder) or missing records; its client gets no ratio.")
	fmt.Printf("load average after: %s\n", loadAvg())

	r, f := sums["riffle"], sums["franz-go"]
	_, franzRan := sums["franz-go"]
	why := ""
	switch {
	case !franzRan:
		why = "franz-go not run"
	case !r.ok:
		why = "riffle had an invalid run"
	case !f.ok:
		why = "franz-go had an invalid run"
	}
	if why != "" {
		fmt.Printf("latency riffle/franz-go p99 ratio: n/a (%s)\n", why)
		fmt.Printf("latency riffle/franz-go p50 ratio: n/a (%s)\n", why)
		fmt.Printf("latency riffle/franz-go cpu ratio: n/a (%s)\n", why)
		return nil
	}
	fmt.Printf("latency riffle/franz-go p99 ratio: %.2f\n", r.p99.Seconds()/f.p99.Seconds())
	fmt.Printf("latency riffle/franz-go p50 ratio: %.2f\n", r.p50.Seconds()/f.p50.Seconds())
	fmt.Printf("latency riffle/franz-go cpu ratio: %.2f\n", r.cpu.Seconds()/f.cpu.Seconds())
	return nil
}

// fmtLat prints a latency with two decimals of milliseconds.
func fmtLat(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000)
}
