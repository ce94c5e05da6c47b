// Command beambench measures the Beam engine's overhead on a bounded read:
// the same topic read through riffbeam.Read on the in-process Prism runner
// and through one ranges.Reader directly (a goroutine per partition), on
// an embedded cluster. It prints each round, the medians and
//
//	beam read efficiency: X
//
// where X is the reader's median time over the pipeline's (1: no
// overhead).
//
//	go run ./cmd/beambench -records 1000000 -partitions 12 -rounds 5
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"github.com/riffle-go/riffle"
	riffbeam "github.com/riffle-go/riffle/plugin/beam"
	"github.com/riffle-go/riffle/ranges"
	"github.com/riffle-go/riffle/rifftest"
)

var (
	records    = flag.Int("records", 1_000_000, "records to produce and read")
	partitions = flag.Int("partitions", 12, "partitions of the topic")
	valueSize  = flag.Int("value", 100, "value bytes per record")
	rounds     = flag.Int("rounds", 5, "rounds of each read")
)

// counted counts the records the pipeline's sink saw (the pipeline runs
// in this process: Prism's loopback worker).
var counted atomic.Int64

func init() { register.DoFn1x0[riffbeam.Record](&countFn{}) }

// countFn counts records.
type countFn struct{}

// ProcessElement counts r.
func (countFn) ProcessElement(riffbeam.Record) { counted.Add(1) }

func main() {
	flag.Parse()
	beam.Init()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err := bench(); err != nil {
		log.Fatal(err)
	}
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:3], " ")
}

func bench() error {
	ctx := context.Background()
	c, err := rifftest.Start(rifftest.Topic("bench", int32(*partitions)))
	if err != nil {
		return err
	}
	defer c.Close()
	cl, err := riffle.NewClient(riffle.SeedBrokers(c.Addrs()...))
	if err != nil {
		return err
	}
	defer cl.Close()

	start := time.Now()
	p, err := riffle.NewProducer(cl, riffle.WithPartitioner(riffle.RoundRobinPartitioner()))
	if err != nil {
		return err
	}
	value := make([]byte, *valueSize)
	var failed atomic.Value
	for i := range *records {
		p.Produce(ctx, &riffle.Record{Topic: "bench", Key: fmt.Appendf(nil, "k%d", i), Value: value}, func(_ *riffle.Record, err error) {
			if err != nil {
				failed.Store(err)
			}
		})
	}
	if err := p.Close(ctx); err != nil {
		return err
	}
	if err, _ := failed.Load().(error); err != nil {
		return err
	}
	fmt.Printf("produced %d records of %d bytes over %d partitions in %v\n", *records, *valueSize, *partitions, time.Since(start).Round(time.Millisecond))
	fmt.Printf("load average before: %s (%d CPUs)\n", loadavg(), cpus())

	plan, err := ranges.Plan(ctx, cl, ranges.PlanOptions{}, "bench")
	if err != nil {
		return err
	}
	var readerTimes, beamTimes []time.Duration
	for round := 1; round <= *rounds; round++ {
		rt, err := readDirect(ctx, cl, plan)
		if err != nil {
			return err
		}
		bt, err := readBeam(ctx, c.Addrs())
		if err != nil {
			return err
		}
		readerTimes, beamTimes = append(readerTimes, rt), append(beamTimes, bt)
		fmt.Printf("round %d: ranges.Reader %v (%.0f rec/s), beam on prism %v (%.0f rec/s)\n", round,
			rt.Round(time.Millisecond), float64(*records)/rt.Seconds(), bt.Round(time.Millisecond), float64(*records)/bt.Seconds())
	}
	rm, bm := median(readerTimes), median(beamTimes)
	fmt.Printf("median: ranges.Reader %v, beam on prism %v\n", rm.Round(time.Millisecond), bm.Round(time.Millisecond))
	fmt.Printf("load average after: %s\n", loadavg())
	fmt.Printf("beam read efficiency: %.3f\n", rm.Seconds()/bm.Seconds())
	return nil
}

// readDirect reads the plan with one Reader, a goroutine per range.
func readDirect(ctx context.Context, cl *riffle.Client, plan []ranges.Range) (time.Duration, error) {
	r := ranges.NewReader(cl)
	defer r.Close()
	var n atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, len(plan))
	start := time.Now()
	for i, rg := range plan {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.Read(ctx, rg, func(*riffle.Record) error { n.Add(1); return nil })
		}()
	}
	wg.Wait()
	d := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	if got := n.Load(); got != int64(*records) {
		return 0, fmt.Errorf("the reader read %d records, want %d", got, *records)
	}
	return d, nil
}

// readBeam runs riffbeam.Read into a counting sink on Prism.
func readBeam(ctx context.Context, brokers []string) (time.Duration, error) {
	counted.Store(0)
	p, s := beam.NewPipelineWithRoot()
	beam.ParDo0(s, countFn{}, riffbeam.Read(s, brokers, []string{"bench"}))
	start := time.Now()
	if _, err := beam.Run(ctx, "prism", p); err != nil {
		return 0, err
	}
	d := time.Since(start)
	if got := counted.Load(); got != int64(*records) {
		return 0, fmt.Errorf("the pipeline read %d records, want %d", got, *records)
	}
	return d, nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func cpus() int { return runtime.NumCPU() }
