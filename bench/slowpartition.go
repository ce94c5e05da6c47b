//go:build unix

package main

// slowpartition: the seed-000 scenario (kafkajs #683) timed. Three
// partitions are preloaded; the time until partitions 1 and 2 are fully
// handled is measured (a) with a handler that does nothing and (b) with
// a handler that sleeps on every record of partition 0 only. A consumer
// that isolates partitions finishes 1 and 2 as fast in (b) as in (a):
// the isolation ratio, time(b)/time(a), is then 1.0.
//
// Riffle runs with its record handler. franz-go runs the pattern of its
// goroutine-per-partition examples for reference: one PollFetches loop
// handing each partition's records to that partition's goroutine over a
// channel of 10 slices.

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
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register("slowpartition", "time until partitions 1 and 2 are handled, with and without a slow handler on partition 0 (seed-000)", runSlowPartition)
}

// slowSpec is one run of the scenario.
type slowSpec struct {
	addr  string
	topic string
	parts int
	delay time.Duration // per record of partition 0; 0 for case (a)
}

// slowOutcome is one run: the time from the start of consumption until
// partitions 1 and 2 were fully handled, and how far partition 0 had got
// by then.
type slowOutcome struct {
	d      time.Duration
	p0Done int64 // partition 0's records handled when 1 and 2 were complete
	err    error // the run broke down, or 1 and 2 were not complete within the cap
	notes  []string
	// cpu is this process's CPU (getrusage) over the whole run, client
	// construction to close; handled the records handled in it.
	cpu     time.Duration
	handled int64
}

// cpuPerRecord is the run's CPU per record handled (0 if none).
func (o slowOutcome) cpuPerRecord() time.Duration {
	if o.handled == 0 {
		return 0
	}
	return o.cpu / time.Duration(o.handled)
}

// slowClient is one client in slowpartition. run builds and warms the
// client (metadata fetched, outside the clock), then calls start just
// before it begins consuming, consumes feeding t, and returns once
// partitions 1 and 2 are complete in t (or ctx ends), after stopping.
type slowClient struct {
	name    string
	pattern string
	run     func(ctx context.Context, spec slowSpec, t *tally, start func(), notes *noteSet) error
}

// sleepCtx sleeps for d unless ctx ends first; it reports whether it slept
// the whole time.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// waitSlots waits until the given slots of t are complete, or ctx ends.
// Then it notes in t.mark how many records slot 0 had got.
func waitSlots(ctx context.Context, t *tally, slots ...int) error {
	for _, i := range slots {
		select {
		case <-t.slots[i].done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	t.mark.Store(t.count(0))
	return nil
}

// slowRiffle: a Consumer with HandleRecord; the handler sleeps (honouring
// its context) on partition 0 in case (b). After 1 and 2 are complete the
// consumer is closed with a 100 ms grace, after which partition 0's
// handler is cancelled.
func slowRiffle(ctx context.Context, spec slowSpec, t *tally, start func(), notes *noteSet) error {
	cl, err := riffle.NewClient(riffle.SeedBrokers(spec.addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	// Warm up as franz-go does below: a metadata request for the topic,
	// which dials the broker. (Warming up with cl.Brokers, which
	// refreshes the client's metadata, would delay the consumer's own
	// refresh by the 100 ms minimum metadata age: (a) then takes about
	// 120 ms instead of 20 ms.)
	if _, err := cl.Admin().ListTopics(ctx, spec.topic); err != nil {
		return fmt.Errorf("warming up: %w", err)
	}
	start()
	cs, err := riffle.NewConsumer(cl,
		riffle.HandleRecord(func(hctx context.Context, r *riffle.Record) error {
			if r.Partition == 0 && spec.delay > 0 && !sleepCtx(hctx, spec.delay) {
				return hctx.Err()
			}
			t.add(int(r.Partition), r.Offset)
			return nil
		}),
		riffle.OnPartitionError(func(pe *riffle.PartitionError) {
			if !errors.Is(pe, context.Canceled) {
				notes.add("partition error: %v", pe)
			}
		}),
	)
	if err != nil {
		return err
	}
	as := make([]riffle.Assignment, spec.parts)
	for p := range as {
		as[p] = riffle.Assignment{TopicPartition: riffle.TopicPartition{Topic: spec.topic, Partition: int32(p)}, Start: riffle.AtEarliest()}
	}
	werr := cs.Assign(as...)
	if werr == nil {
		werr = waitSlots(ctx, t, 1, 2)
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 100*time.Millisecond)
	defer cancel()
	_, cerr := cs.Close(cctx)
	if errors.Is(cerr, context.DeadlineExceeded) {
		cerr = nil // partition 0's handler was busy and got cancelled: expected in (b)
	}
	return errors.Join(werr, cerr)
}

// slowFranz: franz-go's goroutine-per-partition pattern (its examples'
// splitConsume): a PollFetches loop sends each partition's records to
// that partition's goroutine over a channel with room for 10 slices,
// blocking when it is full; the partition goroutines run the handler.
// The partitions are added with AddConsumePartitions once the client has
// metadata, so the clock starts at the same point as Riffle's.
func slowFranz(ctx context.Context, spec slowSpec, t *tally, start func(), notes *noteSet) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(spec.addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(spec.topic)
	req.Topics = append(req.Topics, rt)
	if _, err := req.RequestWith(ctx, cl); err != nil {
		return fmt.Errorf("warming up: %w", err)
	}

	quit := make(chan struct{})
	var wg sync.WaitGroup
	recs := make([]chan []*kgo.Record, spec.parts)
	for p := range recs {
		ch := make(chan []*kgo.Record, 10)
		recs[p] = ch
		wg.Go(func() {
			for {
				select {
				case <-quit:
					return
				case rs := <-ch:
					for _, r := range rs {
						if p == 0 && spec.delay > 0 {
							select {
							case <-time.After(spec.delay):
							case <-quit:
								return
							}
						}
						t.add(int(r.Partition), r.Offset)
					}
				}
			}
		})
	}
	pctx, cancelPoll := context.WithCancel(ctx)
	defer cancelPoll()
	wg.Go(func() {
		for {
			fs := cl.PollFetches(pctx)
			if pctx.Err() != nil || fs.IsClientClosed() {
				return
			}
			fs.EachError(func(topic string, p int32, err error) { notes.add("fetch error %s[%d]: %v", topic, p, err) })
			fs.EachPartition(func(ftp kgo.FetchTopicPartition) {
				if int(ftp.Partition) >= len(recs) || len(ftp.Records) == 0 {
					return
				}
				select {
				case recs[ftp.Partition] <- ftp.Records:
				case <-quit:
				}
			})
		}
	})

	start()
	offs := map[int32]kgo.Offset{}
	for p := range spec.parts {
		offs[int32(p)] = kgo.NewOffset().AtStart()
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{spec.topic: offs})
	werr := waitSlots(ctx, t, 1, 2)
	close(quit)
	cancelPoll()
	wg.Wait()
	return werr
}

// slowOnce runs one client once against the preloaded broker.
func slowOnce(ctx context.Context, c slowClient, spec slowSpec, perPart []int64, timeout time.Duration) slowOutcome {
	t := partitionTally(perPart)
	var started time.Time
	var notes noteSet
	rctx, cancel := context.WithTimeout(ctx, timeout)
	cpu0 := cpuTime()
	err := c.run(rctx, spec, t, func() { started = time.Now() }, &notes)
	cpu := cpuTime() - cpu0
	cancel()
	out := slowOutcome{p0Done: -1, notes: notes.list(), cpu: cpu, handled: t.good()}
	a1, a2 := t.slotFinishedAt(1), t.slotFinishedAt(2)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		out.err = fmt.Errorf("partitions 1 and 2 not complete within %s (%s)", fmtDur(timeout), t.short(3))
	case err != nil:
		out.err = err
	case started.IsZero() || a1.IsZero() || a2.IsZero():
		out.err = fmt.Errorf("partitions 1 and 2 not complete (%s)", t.short(3))
	case t.bad.Load() > 0:
		out.err = errors.New(t.problem())
	default:
		end := a1
		if a2.After(end) {
			end = a2
		}
		out.d = end.Sub(started)
	}
	out.p0Done = t.mark.Load()
	runtime.GC()
	time.Sleep(100 * time.Millisecond)
	return out
}

func runSlowPartition(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("slowpartition", flag.ContinueOnError)
	records := fs.Int64("records", 3000, "records per partition (3 partitions)")
	size := fs.Int("size", 10_000, "value bytes per record (no key); the default makes a partition 30 MB, more than any client fetches or buffers at once")
	delay := fs.Duration("delay", 10*time.Millisecond, "handler time per record of partition 0 in case (b)")
	runs := fs.Int("runs", 5, "runs per client and case, alternating (a) and (b); medians are compared")
	only := fs.String("clients", "", "comma-separated clients to run (riffle, franz-go; default both); riffle is always run")
	timeout := fs.Duration("timeout", 120*time.Second, "give up on one run after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *records < 1 || *size < 1 || *delay <= 0 || *runs < 1 || *timeout <= 0 {
		return errors.New("-records, -size, -delay, -runs and -timeout must be positive")
	}
	all := []slowClient{
		{name: "riffle", pattern: "Consumer, HandleRecord", run: slowRiffle},
		{name: "franz-go", pattern: "PollFetches + goroutine per partition (chan of 10)", run: slowFranz},
	}
	selected, err := selectClients(all, func(c slowClient) string { return c.name }, *only)
	if err != nil {
		return err
	}

	const parts = 3
	perPart := []int64{*records, *records, *records}
	fmt.Printf("slowpartition: %d partitions of %d records of %d bytes; time from the start of consumption until partitions 1 and 2 are fully handled\n",
		parts, *records, *size)
	fmt.Printf("(a) the handler does nothing; (b) the handler sleeps %s on every record of partition 0 only (it would need %s for all of it)\n",
		fmtDur(*delay), fmtDur(time.Duration(*records)**delay))
	pl, err := startPreloaded(ctx, "slow", perPart, *size, "none")
	if err != nil {
		return err
	}
	defer pl.stop()
	fmt.Printf("broker: 1 kfake broker in a child process, preloaded once by Riffle's producer in %s; %s\n", fmtDur(pl.took), pl.layout)
	fmt.Printf("each run: a fresh client, warmed up (metadata fetched) before the clock starts; the clock starts as the consumer is given the\n")
	fmt.Printf("partitions (all from the earliest offset) and stops when the last record of partitions 1 and 2 has been handled; then the consumer is stopped\n")
	fmt.Printf("GOMAXPROCS %d, %d CPUs; load average before: %s\n\n", runtime.GOMAXPROCS(0), runtime.NumCPU(), loadAvg())

	type key struct {
		client string
		slow   bool
	}
	outcomes := map[key][]slowOutcome{}
	for range *runs {
		for _, slow := range []bool{false, true} {
			for _, c := range selected {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				spec := slowSpec{addr: pl.addr, topic: "slow", parts: parts}
				if slow {
					spec.delay = *delay
				}
				k := key{c.name, slow}
				outcomes[k] = append(outcomes[k], slowOnce(ctx, c, spec, perPart, *timeout))
			}
		}
	}

	// Per client and case: the median over valid runs (a failed run
	// counts as the cap, as in connect).
	medianOf := func(outs []slowOutcome) (time.Duration, bool) {
		var ds []time.Duration
		ok := true
		for _, o := range outs {
			if o.err != nil {
				ds = append(ds, *timeout)
				ok = false
				continue
			}
			ds = append(ds, o.d)
		}
		return median(ds), ok
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "client\tcase\tmedian\tmin\tmax\tp0 done\tCPU µs/rec\truns\t  note")
	for _, c := range selected {
		for _, slow := range []bool{false, true} {
			outs := outcomes[key{c.name, slow}]
			med, _ := medianOf(outs)
			var ds []time.Duration
			var cells, notes []string
			var p0 []int64
			var cpus []time.Duration
			for _, o := range outs {
				p0 = append(p0, o.p0Done)
				cpus = append(cpus, o.cpuPerRecord())
				if o.err != nil {
					cells = append(cells, "fail")
					notes = append(notes, oneLine(o.err, 100))
					continue
				}
				ds = append(ds, o.d)
				cells = append(cells, fmtDur(o.d))
				notes = append(notes, o.notes...)
			}
			var uniq []string
			for _, n := range notes {
				if !slices.Contains(uniq, n) {
					uniq = append(uniq, n)
				}
			}
			mn, mx := "-", "-"
			if len(ds) > 0 {
				mn, mx = fmtDur(slices.Min(ds)), fmtDur(slices.Max(ds))
			}
			name := "(a) none slow"
			if slow {
				name = "(b) p0 slow"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d-%d\t%.1f\t%s\t  %s\n",
				c.name, name, fmtDur(med), mn, mx, slices.Min(p0), slices.Max(p0), float64(median(cpus).Nanoseconds())/1e3,
				strings.Join(cells, " "), strings.Join(uniq, "; "))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Println()
	for _, c := range selected {
		fmt.Printf("%s: %s\n", c.name, c.pattern)
	}
	fmt.Printf("p0 done: records of partition 0 handled when partitions 1 and 2 were complete (min-max over runs); runs lists every run in order.\n")
	fmt.Printf("CPU µs/rec: this process's CPU (getrusage) over a run, client construction to close, per record handled in it; median over runs.\n")
	fmt.Printf("load average after: %s\n", loadAvg())

	ratio := func(name string) string {
		a, aok := medianOf(outcomes[key{name, false}])
		b, bok := medianOf(outcomes[key{name, true}])
		switch {
		case len(outcomes[key{name, false}]) == 0:
			return "n/a (not run)"
		case !aok || !bok:
			return fmt.Sprintf("n/a (failed runs; medians %s and %s with failures counted as the cap)", fmtDur(a), fmtDur(b))
		}
		return fmt.Sprintf("%.2f", b.Seconds()/a.Seconds())
	}
	if slices.ContainsFunc(selected, func(c slowClient) bool { return c.name == "franz-go" }) {
		fmt.Printf("slowpartition franz-go (goroutine per partition) isolation ratio: %s\n", ratio("franz-go"))
	}
	fmt.Printf("slowpartition isolation ratio: %s\n", ratio("riffle"))
	// CPU per record handled, from case (a) only: in (b) the run is
	// mostly partition 0's handler sleeping.
	medCPU := func(name string) (time.Duration, bool) {
		var cs []time.Duration
		for _, o := range outcomes[key{name, false}] {
			if o.err != nil {
				return 0, false
			}
			cs = append(cs, o.cpuPerRecord())
		}
		return median(cs), len(cs) > 0
	}
	rc, rok := medCPU("riffle")
	fc, fok := medCPU("franz-go")
	switch {
	case len(outcomes[key{"franz-go", false}]) == 0:
		fmt.Printf("slowpartition riffle/franz-go cpu ratio: n/a (franz-go not run)\n")
	case !rok || !fok || fc == 0:
		fmt.Printf("slowpartition riffle/franz-go cpu ratio: n/a (failed runs in case (a))\n")
	default:
		fmt.Printf("slowpartition riffle/franz-go cpu ratio: %.2f\n", rc.Seconds()/fc.Seconds())
	}
	return nil
}
