package ranges_test

import (
	"context"
	"fmt"
	"log"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/ranges"
	"github.com/riffle-go/riffle/rifftest"
)

// Plan a topic into ranges, then read them with one shared Reader, as a
// worker of a task engine would.
func Example() {
	cluster, err := rifftest.Start(rifftest.Topic("events", 2))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	cl, err := riffle.NewClient(riffle.SeedBrokers(cluster.Addrs()...))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	p, _ := riffle.NewProducer(cl, riffle.WithPartitioner(riffle.RoundRobinPartitioner()))
	for i := 0; i < 100; i++ {
		p.Produce(ctx, &riffle.Record{Topic: "events", Value: []byte(fmt.Sprint(i))}, nil)
	}
	p.Close(ctx)

	plan, err := ranges.Plan(ctx, cl, ranges.PlanOptions{MaxRecords: 20}, "events")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(plan), "ranges, first", plan[0])

	r := ranges.NewReader(cl)
	defer r.Close()
	total := 0
	for _, rg := range plan { // each range could go to a different worker
		err := r.Read(ctx, rg, func(rec *riffle.Record) error {
			total++
			return nil
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(total, "records")
	// Output:
	// 6 ranges, first events[0] [0, 20)
	// 100 records
}
