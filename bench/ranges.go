//go:build unix

package main

// ranges: reading a preloaded topic as exact offset ranges [low, high) by
// a pool of workers (the streamz pattern riffle/ranges is for), three
// ways: (a) every worker sharing one ranges.Reader on one riffle.Client,
// (b) a fresh riffle.Client and Reader per range, dial included, and (c)
// franz-go, a client per range consuming its partition from low, stopped
// at high.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/ranges"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	register("ranges", "read a preloaded topic as offset ranges with a worker pool: a shared riffle Reader, a riffle client per range, franz-go per range", runRanges)
}

// rangeMode is one way of reading the ranges. run reads every range of
// rgs, feeding range i's records to slot i of t, with workers goroutines
// taking ranges from a queue, and returns once all are read (or one
// failed, or ctx ended), with every client closed.
type rangeMode struct {
	name    string
	version string
	how     string
	run     func(ctx context.Context, addr string, rgs []ranges.Range, workers int, t *tally, notes *noteSet) error
}

// eachRange runs read for every range index on workers goroutines and
// returns the first error.
func eachRange(ctx context.Context, n, workers int, read func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan int, n)
	for i := range n {
		work <- i
	}
	close(work)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for range workers {
		wg.Go(func() {
			for i := range work {
				if ctx.Err() != nil {
					return
				}
				if err := read(ctx, i); err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// rangesShared: one riffle.Client and one ranges.Reader for all workers.
func rangesShared(ctx context.Context, addr string, rgs []ranges.Range, workers int, t *tally, _ *noteSet) error {
	cl, err := riffle.NewClient(riffle.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	rd := ranges.NewReader(cl)
	defer rd.Close()
	return eachRange(ctx, len(rgs), workers, func(ctx context.Context, i int) error {
		return rd.Read(ctx, rgs[i], func(r *riffle.Record) error {
			t.add(i, r.Offset)
			return nil
		})
	})
}

// rangesFresh: a new riffle.Client and Reader for every range, closed
// after it (as a task that owns nothing long-lived would do).
func rangesFresh(ctx context.Context, addr string, rgs []ranges.Range, workers int, t *tally, _ *noteSet) error {
	return eachRange(ctx, len(rgs), workers, func(ctx context.Context, i int) error {
		cl, err := riffle.NewClient(riffle.SeedBrokers(addr))
		if err != nil {
			return err
		}
		defer cl.Close()
		rd := ranges.NewReader(cl)
		defer rd.Close()
		return rd.Read(ctx, rgs[i], func(r *riffle.Record) error {
			t.add(i, r.Offset)
			return nil
		})
	})
}

// rangesFranz: a kgo client per range with ConsumePartitions from the
// range's low offset; a PollFetches loop that stops once the range's last
// offset arrived (records at or past high are not delivered to the task).
func rangesFranz(ctx context.Context, addr string, rgs []ranges.Range, workers int, t *tally, notes *noteSet) error {
	return eachRange(ctx, len(rgs), workers, func(ctx context.Context, i int) error {
		rg := rgs[i]
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(addr),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{rg.Topic: {rg.Partition: kgo.NewOffset().At(rg.Low)}}),
		)
		if err != nil {
			return err
		}
		defer cl.Close()
		done := t.slots[i].done
		for {
			select {
			case <-done:
				return nil
			default:
			}
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				return err
			}
			fs.EachError(func(topic string, p int32, err error) { notes.add("fetch error %s[%d]: %v", topic, p, err) })
			fs.EachRecord(func(r *kgo.Record) {
				if r.Offset < rg.High {
					t.add(i, r.Offset)
				}
			})
		}
	})
}

func runRanges(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("ranges", flag.ContinueOnError)
	partitions := fs.Int("partitions", 10, "partitions of the topic")
	records := fs.Int64("records", 1_000_000, "records to preload (spread evenly over the partitions)")
	rangeLen := fs.Int64("range", 100_000, "offsets per range (ranges.Plan MaxRecords)")
	size := fs.Int("size", 100, "value bytes per record (no key)")
	workers := fs.Int("workers", 4, "worker goroutines reading ranges")
	rounds := fs.Int("rounds", 3, "runs per mode, in rounds; the run with the median wall time is shown")
	timeout := fs.Duration("timeout", 120*time.Second, "give up on one run after this long")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the shared-Reader runs (only) to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *partitions < 1 || *records < 1 || *rangeLen < 1 || *size < 1 || *workers < 1 || *rounds < 1 || *timeout <= 0 {
		return errors.New("every flag must be positive")
	}

	perPart := make([]int64, *partitions)
	for p := range perPart {
		perPart[p] = *records / int64(*partitions)
		if int64(p) < *records%int64(*partitions) {
			perPart[p]++
		}
	}
	const topic = "ranges"
	pl, err := startPreloaded(ctx, topic, perPart, *size, "none")
	if err != nil {
		return err
	}
	defer pl.stop()

	// The plan, made once with its own client, as a driver would before
	// handing the ranges to workers.
	pcl, err := riffle.NewClient(riffle.SeedBrokers(pl.addr))
	if err != nil {
		return err
	}
	rgs, err := ranges.Plan(ctx, pcl, ranges.PlanOptions{MaxRecords: *rangeLen}, topic)
	pcl.Close()
	if err != nil {
		return fmt.Errorf("planning: %w", err)
	}
	var lows, highs []int64
	var planned int64
	for _, rg := range rgs {
		lows = append(lows, rg.Low)
		highs = append(highs, rg.High)
		planned += rg.Len()
	}
	if planned != pl.total() {
		return fmt.Errorf("the plan covers %d offsets, %d were preloaded", planned, pl.total())
	}

	fmt.Printf("ranges: %d records of %d bytes (no key) in %d partitions of %q, read as %d ranges (ranges.Plan, MaxRecords %d) by %d workers\n",
		*records, *size, *partitions, topic, len(rgs), *rangeLen, *workers)
	fmt.Printf("broker: 1 kfake broker in a child process, preloaded once by Riffle's producer in %s; %s\n", fmtDur(pl.took), pl.layout)
	fmt.Printf("every run must deliver every offset of every range exactly once, in order; records at or past a range's high offset are not delivered\n")
	fmt.Printf("measured in this process: wall from the first client's construction until the last range was complete; CPU and allocations until every\n")
	fmt.Printf("client was closed; broker CPU from /proc over the same span\n")
	fmt.Printf("GOMAXPROCS %d, %d CPUs; load average before: %s\n\n", runtime.GOMAXPROCS(0), runtime.NumCPU(), loadAvg())

	rv, fv := modVersion("github.com/riffle-go/riffle"), modVersion("github.com/twmb/franz-go")
	modes := []rangeMode{
		{name: "(a) riffle shared Reader", version: rv, how: "one riffle.Client + one ranges.Reader shared by all workers", run: rangesShared},
		{name: "(b) riffle client per range", version: rv, how: "riffle.NewClient + ranges.NewReader per range, closed after it (dial included)", run: rangesFresh},
		{name: "(c) franz-go client per range", version: fv, how: "kgo.NewClient with ConsumePartitions at Low per range, PollFetches until High, closed after it", run: rangesFranz},
	}
	results := map[string][]consumeResult{}
	for range *rounds {
		for _, m := range modes {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			prof := m.name == modes[0].name
			res := measureConsume(ctx, pl, *timeout, newTally(lows, highs), func(ctx context.Context, t *tally, notes *noteSet) error {
				if prof {
					defer profiling(*cpuProfile)()
				}
				return m.run(ctx, pl.addr, rgs, *workers, t, notes)
			})
			if errors.Is(res.runErr, context.DeadlineExceeded) {
				res.runErr = fmt.Errorf("not complete within %s: %w", fmtDur(*timeout), res.runErr)
			}
			results[m.name] = append(results[m.name], res)
		}
	}

	rows := map[string]resultRow{}
	var names, versions []string
	for _, m := range modes {
		rows[m.name] = summarise(results[m.name], *records)
		names = append(names, m.name)
		versions = append(versions, m.version)
	}
	if err := printResultTable(names, versions, rows, *records, *size); err != nil {
		return err
	}
	fmt.Println()
	for _, m := range modes {
		fmt.Printf("%s: %s\n", m.name, m.how)
	}
	if *rounds > 1 {
		fmt.Printf("%d rounds; each row is the mode's run with the median wall time; all runs rec/s lists every run in order (! = invalid run).\n", *rounds)
	}
	fmt.Printf("load average after: %s\n", loadAvg())
	if slices.ContainsFunc(modes, func(m rangeMode) bool { return rows[m.name].invalid }) {
		fmt.Println("a mode marked invalid delivered something other than exactly the planned offsets in some run (see its note)")
	}
	ratioLine("(b)/(c)", modes[1].name, modes[2].name, rows, *records)
	ratioLines("ranges riffle/franz-go", modes[0].name, modes[2].name, rows, *records)
	return nil
}
