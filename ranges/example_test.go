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

// Plan a topic incrementally for a group, read the ranges (in any order,
// on any workers), mark them done and commit the checkpoint; a planner
// started later on the group resumes from it.
func ExamplePlanner() {
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

	if err := planRound(ctx, cl); err != nil {
		log.Fatal(err)
	}
	again, _ := ranges.NewPlanner(cl, "etl", []string{"events"}, ranges.MaxRecords(20))
	more, _ := again.Next(ctx)
	fmt.Println(len(more), "ranges after a restart")
	// Output:
	// 6 ranges, checkpoint map[events[0]:50 events[1]:50]
	// 0 ranges after a restart
}

// planRound is one round of ExamplePlanner, as README.md shows it.
func planRound(ctx context.Context, cl *riffle.Client) error {
	handle := func(*riffle.Record) error { return nil }
	planner, err := ranges.NewPlanner(cl, "etl", []string{"events"}, ranges.MaxRecords(20))
	if err != nil {
		return err
	}
	reader := ranges.NewReader(cl)
	cp := planner.Checkpoint()
	plan, err := planner.Next(ctx) // only ranges not planned before
	if err != nil {
		return err
	}
	for _, rg := range plan { // on any workers, in any order
		if err := reader.Read(ctx, rg, handle); err != nil {
			return err // not marked done: the checkpoint stops before it
		}
		cp.MarkDone(rg)
	}
	// A standalone commit: the group must have no active members.
	if err := cp.Commit(ctx); err != nil {
		return err // errors.Is(err, ranges.ErrGroupActive)
	}
	fmt.Println(len(plan), "ranges, checkpoint", cp.Offsets())
	return nil
}
