package riffbeam_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"
	"github.com/riffle-go/riffle"
	riffbeam "github.com/riffle-go/riffle/plugin/beam"
	"github.com/riffle-go/riffle/rifftest"
)

func init() {
	register.Function1x1(valueOf)
	register.Function2x1(countRecord)
}

// valueOf keeps a record's value.
func valueOf(r riffbeam.Record) string { return string(r.Value) }

// countRecord prints a count and makes it a record to write.
func countRecord(v string, n int) riffbeam.Record {
	fmt.Printf("%s: %d\n", v, n)
	return riffbeam.Record{Key: []byte(v), Value: fmt.Append(nil, n)}
}

// Read a topic into a Beam pipeline, count the records per value, and
// write the counts to another topic; run on Prism, Beam's local runner,
// against an embedded cluster. On a real cluster, give its brokers and a
// runner (Dataflow, Flink, Spark) instead.
func Example() {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	cluster, err := rifftest.Start(rifftest.Topic("events", 3), rifftest.Topic("counts", 1))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.Addrs()
	cl, err := riffle.NewClient(riffle.SeedBrokers(brokers...))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	pr, err := riffle.NewProducer(cl)
	if err != nil {
		log.Fatal(err)
	}
	for i := range 90 {
		v := []string{"red", "green", "blue"}[i%3]
		pr.Produce(ctx, &riffle.Record{Topic: "events", Value: []byte(v)}, nil)
	}
	if err := pr.Close(ctx); err != nil {
		log.Fatal(err)
	}

	p, s := beam.NewPipelineWithRoot()
	records := riffbeam.Read(s, brokers, []string{"events"}, riffbeam.Group("colors"), riffbeam.CommitOffsets())
	counts := stats.Count(s, beam.ParDo(s, valueOf, records))
	riffbeam.Write(s, brokers, "counts", beam.ParDo(s, countRecord, counts))
	if _, err := beam.Run(ctx, "prism", p); err != nil {
		log.Fatal(err)
	}
	offs, err := cl.Admin().FetchOffsets(ctx, "colors")
	if err != nil {
		log.Fatal(err)
	}
	total := int64(0)
	for _, o := range offs {
		total += o.Offset
	}
	fmt.Println("committed offsets:", total)
	ends, err := cl.Admin().ListOffsets(ctx, riffle.OffsetLatest, "counts")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("records in counts:", ends[0].Offset)
	// Unordered output:
	// red: 30
	// green: 30
	// blue: 30
	// committed offsets: 90
	// records in counts: 3
}
