package riffle

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// BenchmarkShareMembers (issue 20 point 3): 3 share members accept 1,000
// no-op records, on one Client and on a Client each. Before each member
// had a fetch connection of its own, the members on one Client queued
// their long-poll ShareFetches behind each other (23-28 s against under
// 1 s). Compare the two sub-benchmarks of one run:
//
//	go test -run '^$' -bench BenchmarkShareMembers -benchtime 1x -count 5 .
func BenchmarkShareMembers(b *testing.B) {
	const members, records = 3, 1000
	fake := newFake(b, kfake.NumBrokers(1), kfake.SeedTopics(3, "t"), kfake.BrokerConfigs(map[string]string{
		"group.share.heartbeat.interval.ms": "200",
	}))
	pcl := shareClient(b, fake)
	run := 0
	for _, oneClient := range []bool{true, false} {
		name := "clients=3"
		if oneClient {
			name = "clients=1"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				run++
				// A topic and a group of its own a run; the records
				// are written once every member has its assignment,
				// so that all of them fetch.
				group, topic := fmt.Sprintf("g%d", run), fmt.Sprintf("t%d", run)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				if res, err := pcl.Admin().CreateTopics(ctx, TopicSpec{Name: topic, Partitions: 3}); err != nil || res.Err() != nil {
					b.Fatalf("create %s: %v %v", topic, err, res.Err())
				}
				cancel()
				shareFromEarliest(b, pcl, group)
				var accepted atomic.Int64
				done := make(chan struct{})
				noop := HandleRecord(func(context.Context, *Record) error {
					if accepted.Add(1) == records {
						close(done)
					}
					return nil
				})
				var cl *Client
				var scs []*ShareConsumer
				for range members {
					if cl == nil || !oneClient {
						cl = shareClient(b, fake)
					}
					sc, err := NewShareConsumer(cl, ShareGroup(group), SubscribeTopics(topic), noop)
					if err != nil {
						b.Fatal(err)
					}
					scs = append(scs, sc)
				}
				deadline := time.Now().Add(60 * time.Second)
				for _, sc := range scs {
					for len(sc.Stats().Assigned) == 0 {
						if time.Now().After(deadline) {
							b.Fatal("a member got no assignment in 60 s")
						}
						time.Sleep(10 * time.Millisecond)
					}
				}
				var recs []*Record
				for i := range records {
					recs = append(recs, &Record{Topic: topic, Partition: int32(i % 3), Value: []byte("v")})
				}
				start, cpu0 := time.Now(), processCPU()
				produceRecords(b, pcl, recs)
				select {
				case <-done:
				case <-time.After(120 * time.Second):
					b.Fatalf("%d of %d records accepted in 120 s", accepted.Load(), records)
				}
				el, cpu := time.Since(start), processCPU()-cpu0
				for _, sc := range scs {
					closeShare(b, sc)
				}
				b.ReportMetric(float64(records)/el.Seconds(), "records/s")
				b.ReportMetric(float64(el.Milliseconds()), "ms/1000rec")
				// The process's CPU: the client's and kfake's (in
				// process), producing included.
				b.ReportMetric(float64(cpu.Microseconds())/records, "cpu-µs/record")
			}
		})
	}
}

// processCPU is the user and system CPU time of the process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
