//go:build unix

package main

// scale: one consumer assigned many partitions (10,000 by default) of one
// topic on one broker, each holding a few records: time and CPU until
// every record was consumed, then the heap, goroutines and idle CPU of
// the consumer once it is caught up and long polling.

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
)

func init() {
	register("scale", "one consumer of 10,000 partitions: time and CPU to consume, then heap, goroutines and idle CPU; broker in a child process", runScale)
}

// scaleClient is one client in scale. start creates the client and
// starts consuming every partition of topic from the earliest offset,
// feeding t; it returns a function that stops and closes it.
type scaleClient struct {
	name, module, how string
	start             func(ctx context.Context, addr, topic string, parts int, t *tally, notes *noteSet) (stop func(), err error)
}

// scaleRiffle: NewConsumer with HandleBatch, every partition Assigned
// AtEarliest, defaults otherwise (FetchMaxWait 500 ms).
func scaleRiffle(_ context.Context, addr, topic string, parts int, t *tally, notes *noteSet) (func(), error) {
	cl, err := riffle.NewClient(riffle.SeedBrokers(addr))
	if err != nil {
		return nil, err
	}
	cs, err := riffle.NewConsumer(cl,
		riffle.HandleBatch(func(_ context.Context, b *riffle.FetchBatch) error {
			p := int(b.Partition)
			for _, r := range b.Records {
				t.add(p, r.Offset)
			}
			return nil
		}),
		riffle.OnPartitionError(func(pe *riffle.PartitionError) { notes.add("partition error: %v", pe) }),
	)
	if err != nil {
		cl.Close()
		return nil, err
	}
	as := make([]riffle.Assignment, parts)
	for p := range as {
		as[p] = riffle.Assignment{TopicPartition: riffle.TopicPartition{Topic: topic, Partition: int32(p)}, Start: riffle.AtEarliest()}
	}
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := cs.Close(ctx); err != nil {
			notes.add("close: %v", err)
		}
		cl.Close()
	}
	if err := cs.Assign(as...); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// scaleFranz: kgo.ConsumePartitions with every partition AtStart and a
// PollFetches loop on one goroutine (the application's), defaults
// otherwise (FetchMaxWait 5 s).
func scaleFranz(ctx context.Context, addr, topic string, parts int, t *tally, notes *noteSet) (func(), error) {
	offs := make(map[int32]kgo.Offset, parts)
	for p := range parts {
		offs[int32(p)] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
	)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			fs := cl.PollFetches(pctx)
			if pctx.Err() != nil || fs.IsClientClosed() {
				return
			}
			fs.EachError(func(tp string, p int32, err error) { notes.add("fetch error %s[%d]: %v", tp, p, err) })
			fs.EachPartition(func(ftp kgo.FetchTopicPartition) {
				p := int(ftp.Partition)
				for _, r := range ftp.Records {
					t.add(p, r.Offset)
				}
			})
		}
	})
	return func() {
		cancel()
		wg.Wait()
		cl.Close()
	}, nil
}

// scaleResult is one run of one client.
type scaleResult struct {
	consumed   time.Duration // construction until the last record was delivered
	cpu        time.Duration // this process, construction until consumed
	heap       int64         // HeapInuse after the settle (after a GC), minus the baseline
	goroutines int           // NumGoroutine after the settle, minus the baseline
	idleCPU    time.Duration // this process over the idle window
	idle       time.Duration // the idle window
	complete   bool
	problem    string
	err        error
	notes      []string
}

func (r scaleResult) valid() bool { return r.err == nil && r.complete }

func scaleOnce(ctx context.Context, c scaleClient, pl *preloaded, settle, idle, timeout time.Duration, cpuProfile string) scaleResult {
	t := partitionTally(pl.perPart)
	var notes noteSet
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	baseHeap := int64(m.HeapInuse)
	baseG := runtime.NumGoroutine()

	if c.name == "riffle" {
		defer profiling(cpuProfile)()
	}
	cpu0 := cpuTime()
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stop, err := c.start(rctx, pl.addr, pl.topic, len(pl.perPart), t, &notes)
	if err != nil {
		return scaleResult{err: err}
	}
	werr := t.wait(rctx)
	res := scaleResult{cpu: cpuTime() - cpu0, consumed: time.Since(start)}
	if at := t.finishedAt(); !at.IsZero() {
		res.consumed = at.Sub(start)
	}
	if werr != nil {
		res.err = fmt.Errorf("not every record consumed within %s (%d of %d)", fmtDur(timeout), t.good(), pl.total())
	} else {
		time.Sleep(settle)
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		res.heap = int64(m.HeapInuse) - baseHeap
		res.goroutines = runtime.NumGoroutine() - baseG
		i0, s0 := cpuTime(), time.Now()
		time.Sleep(idle)
		res.idleCPU, res.idle = cpuTime()-i0, time.Since(s0)
	}
	stop()
	res.complete, res.problem, res.notes = t.complete(), t.problem(), notes.list()
	runtime.GC()
	time.Sleep(500 * time.Millisecond)
	return res
}

func runScale(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	partitions := fs.Int("partitions", 10_000, "partitions of the topic, all assigned to the one consumer")
	perPartition := fs.Int64("per-partition", 10, "records preloaded into each partition")
	size := fs.Int("size", 100, "value bytes per record (no key)")
	settle := fs.Duration("settle", 2*time.Second, "wait after the last record before measuring heap and goroutines")
	idle := fs.Duration("idle", 5*time.Second, "idle window (all partitions caught up, long polling) whose CPU is measured")
	rounds := fs.Int("rounds", 3, "runs per client, in rounds; medians are compared")
	only := fs.String("clients", "", "comma-separated clients to run (riffle, franz-go; default both); riffle is always run")
	timeout := fs.Duration("timeout", 3*time.Minute, "give up consuming in one run after this long")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of riffle's runs (only) to this file (file, file.2, ...)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *partitions < 1 || *perPartition < 1 || *size < 1 || *settle < 0 || *idle <= 0 || *rounds < 1 || *timeout <= 0 {
		return errors.New("-partitions, -per-partition, -size, -idle, -rounds and -timeout must be positive, -settle not negative")
	}
	selected, err := selectClients([]scaleClient{
		{name: "riffle", module: "github.com/riffle-go/riffle", how: "NewConsumer(HandleBatch) + Assign(every partition AtEarliest), defaults (FetchMaxWait 500ms)", start: scaleRiffle},
		{name: "franz-go", module: "github.com/twmb/franz-go", how: "ConsumePartitions(every partition AtStart) + a PollFetches goroutine, defaults (FetchMaxWait 5s)", start: scaleFranz},
	}, func(c scaleClient) string { return c.name }, *only)
	if err != nil {
		return err
	}

	perPart := make([]int64, *partitions)
	for p := range perPart {
		perPart[p] = *perPartition
	}
	total := int64(*partitions) * *perPartition
	fmt.Printf("scale: one consumer of %d partitions of %q, %d records of %d bytes each (%d records), read from the earliest offsets\n",
		*partitions, "scale", *perPartition, *size, total)
	t0 := time.Now()
	pl, err := startPreloaded(ctx, "scale", perPart, *size, "none")
	if err != nil {
		return err
	}
	defer pl.stop()
	fmt.Printf("broker: 1 kfake broker in a child process (started and preloaded in %s; the preload itself %s), storing records; %s\n",
		fmtDur(time.Since(t0)), fmtDur(pl.took), pl.layout)
	fmt.Printf("measured in this process: consumed, from construction until the last record was delivered, and its CPU (getrusage);\n")
	fmt.Printf("after a %s settle: heap (HeapInuse after GC) and goroutines, each minus a baseline taken before the client was created;\n", fmtDur(*settle))
	fmt.Printf("then the CPU over %s of idle (every partition caught up, fetches long polling)\n", fmtDur(*idle))
	fmt.Printf("GOMAXPROCS %d, %d CPUs; load average before: %s\n\n", runtime.GOMAXPROCS(0), runtime.NumCPU(), loadAvg())

	results := map[string][]scaleResult{}
	for range *rounds {
		for _, c := range selected {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			results[c.name] = append(results[c.name], scaleOnce(ctx, c, pl, *settle, *idle, *timeout, *cpuProfile))
		}
	}

	type summary struct {
		consumed, cpu, idleCPU time.Duration
		heap                   int64
		goroutines             int
		ok                     bool
	}
	medInt := func(xs []int64) int64 {
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[len(s)/2]
	}
	sums := map[string]summary{}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "client\tversion\trun\tconsumed\tCPU\tCPU µs/rec\theap MiB\theap B/partition\tgoroutines\tidle CPU\tidle CPU %\t  note")
	for _, c := range selected {
		var cons, cpus, idles []time.Duration
		var heaps, gs []int64
		ok := true
		for i, r := range results[c.name] {
			mark := ""
			if !r.valid() {
				mark, ok = "!", false
			}
			var notes []string
			if r.err != nil {
				notes = append(notes, oneLine(r.err, 100))
			}
			if r.problem != "" {
				notes = append(notes, r.problem)
			}
			notes = append(notes, r.notes...)
			idlePct := 0.0
			if r.idle > 0 {
				idlePct = 100 * r.idleCPU.Seconds() / r.idle.Seconds()
			}
			fmt.Fprintf(tw, "%s\t%s\t%d%s\t%s\t%.2fs\t%.1f\t%.1f\t%.0f\t%d\t%.1fms\t%.2f%%\t  %s\n",
				c.name, modVersion(c.module), i+1, mark, fmtDur(r.consumed), r.cpu.Seconds(),
				float64(r.cpu.Microseconds())/float64(total), float64(r.heap)/(1<<20), float64(r.heap)/float64(*partitions),
				r.goroutines, float64(r.idleCPU.Microseconds())/1000, idlePct, strings.Join(notes, "; "))
			cons = append(cons, r.consumed)
			cpus = append(cpus, r.cpu)
			idles = append(idles, r.idleCPU)
			heaps = append(heaps, r.heap)
			gs = append(gs, int64(r.goroutines))
		}
		s := summary{consumed: median(cons), cpu: median(cpus), idleCPU: median(idles), heap: medInt(heaps), goroutines: int(medInt(gs)), ok: ok}
		sums[c.name] = s
		if *rounds > 1 {
			fmt.Fprintf(tw, "%s\t\tmedian\t%s\t%.2fs\t%.1f\t%.1f\t%.0f\t%d\t%.1fms\t\t\n", c.name, fmtDur(s.consumed), s.cpu.Seconds(),
				float64(s.cpu.Microseconds())/float64(total), float64(s.heap)/(1<<20), float64(s.heap)/float64(*partitions), s.goroutines, float64(s.idleCPU.Microseconds())/1000)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Println()
	for _, c := range selected {
		fmt.Printf("%s: %s\n", c.name, c.how)
	}
	fmt.Println("goroutines include the application's own: franz-go's count has the PollFetches goroutine; riffle's handler runs on its runners.")
	fmt.Println("idle CPU depends on how often each client long-polls an idle broker: riffle's FetchMaxWait is 500 ms, franz-go's 5 s.")
	fmt.Println("! = the run did not deliver every record exactly once in order, or failed; its client gets no ratio.")
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
		for _, what := range []string{"heap", "time", "cpu", "idle cpu"} {
			fmt.Printf("scale riffle/franz-go %s ratio: n/a (%s)\n", what, why)
		}
		return nil
	}
	fmt.Printf("scale riffle/franz-go time ratio: %.2f\n", r.consumed.Seconds()/f.consumed.Seconds())
	fmt.Printf("scale riffle/franz-go cpu ratio: %.2f\n", r.cpu.Seconds()/f.cpu.Seconds())
	fmt.Printf("scale riffle/franz-go idle cpu ratio: %.2f\n", r.idleCPU.Seconds()/f.idleCPU.Seconds())
	fmt.Printf("scale riffle/franz-go heap ratio: %.2f\n", float64(r.heap)/float64(f.heap))
	return nil
}
