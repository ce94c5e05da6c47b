package process_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/process"
	"github.com/riffle-go/riffle/rifftest"
)

// closeBounded closes p for a deferred cleanup that must not hang a
// failing test.
func closeBounded(p *process.Processor) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p.Close(ctx)
}

func pstats(p *process.Processor, part int32) (process.PartitionStats, bool) {
	for _, ps := range p.Stats().Partitions {
		if ps.Partition == part {
			return ps, true
		}
	}
	return process.PartitionStats{}, false
}

func cstats(p *process.Processor, part int32) riffle.PartitionStats {
	for _, ps := range p.Consumer().Stats().Partitions {
		if ps.Partition == part {
			return ps
		}
	}
	return riffle.PartitionStats{}
}

// Backpressure: a partition whose records are stuck holds at most Window
// of them and stops fetching, while another partition keeps flowing; once
// released, it catches up.
func TestWindowBackpressure(t *testing.T) {
	const window, n = 50, 5000
	c, cl := setup(t, rifftest.Topic("b", 2))
	produce(t, cl, "b", 2, n, nil, riffle.MaxBatchBytes(1<<10)) // small batches: a fetch returns little
	release := make(chan struct{})
	defer func() {
		select {
		case <-release:
		default:
			close(release) // failed before releasing: let Close finish
		}
	}()
	var done [2]atomic.Int64
	pr, err := process.New(client(t, c), func(ctx context.Context, r *riffle.Record) error {
		if r.Partition == 0 {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		done[r.Partition].Add(1)
		return nil
	}, process.Ordering(process.Unordered), process.Concurrency(8), process.PartitionConcurrency(4), process.Window(window),
		process.ConsumerOptions(riffle.FetchPartitionMaxBytes(1<<10), riffle.PartitionBufferBytes(2<<10),
			riffle.FetchMaxWait(50*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	defer closeBounded(pr)
	if err := pr.Assign(riffle.Assignment{TopicPartition: riffle.TopicPartition{Topic: "b", Partition: 0}, Start: riffle.AtEarliest()},
		riffle.Assignment{TopicPartition: riffle.TopicPartition{Topic: "b", Partition: 1}, Start: riffle.AtEarliest()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "partition 1 to finish while 0 is stuck", func() bool { return done[1].Load() == n })
	// Its handler counts a record before returning and the processor
	// records it after: wait for the stats too, not just the counter.
	waitFor(t, 30*time.Second, "the finished partition's stats", func() bool { return cstats(pr, 1).Processed == n })
	ps, _ := pstats(pr, 0)
	if ps.Running != 4 || ps.Running+ps.Waiting != window {
		t.Fatalf("stuck partition holds %d running + %d waiting; want 4 running (partition limit) and %d in all", ps.Running, ps.Waiting, window)
	}
	// Fetching paused: the consumer took exactly the window, and its
	// buffer settles (a fetch sent before the buffer filled may still
	// land).
	var after riffle.PartitionStats
	waitFor(t, 30*time.Second, "the stuck partition's fetching to pause", func() bool {
		before := cstats(pr, 0)
		time.Sleep(200 * time.Millisecond)
		after = cstats(pr, 0)
		return before.BufferedRecords == after.BufferedRecords && before.BufferedRecords > 0
	})
	// A partition is in one fetch at a time, so once paused its buffer
	// grows at most once more: by a fetch that was in flight, which a
	// loaded machine may answer later than the 200 ms above. Fetching
	// that goes on grows it again and again.
	grew := 0
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if later := cstats(pr, 0); later.BufferedRecords != after.BufferedRecords {
			grew++
			if grew > 1 {
				t.Fatalf("the stuck partition's buffer grew twice after it settled, to %d records; fetching should have paused", later.BufferedRecords)
			}
			after = later
		}
	}
	// The partition buffer (2 KiB) may overshoot by one fetch, which
	// holds at least one whole batch; it must stay far from everything.
	if after.Position != window || after.Position+int64(after.BufferedRecords) >= n/5 {
		t.Fatalf("stuck partition: consumer position %d, buffered %d records, %d bytes; fetching should have paused",
			after.Position, after.BufferedRecords, after.BufferedBytes)
	}
	close(release)
	waitFor(t, 60*time.Second, "partition 0 to catch up", func() bool { return done[0].Load() == n })
}

// The byte budget bounds what all partitions hold together.
func TestByteBudget(t *testing.T) {
	c, cl := setup(t, rifftest.Topic("bb", 3))
	produce(t, cl, "bb", 3, 2000, nil)
	release := make(chan struct{})
	var started atomic.Int64
	const budget = 100 * 70
	pr, err := process.New(client(t, c), func(ctx context.Context, r *riffle.Record) error {
		started.Add(1)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, process.Ordering(process.Unordered), process.Concurrency(1000), process.MaxBytes(budget))
	if err != nil {
		t.Fatal(err)
	}
	defer closeBounded(pr)
	var as []riffle.Assignment
	for p := int32(0); p < 3; p++ {
		as = append(as, riffle.Assignment{TopicPartition: riffle.TopicPartition{Topic: "bb", Partition: p}, Start: riffle.AtEarliest()})
	}
	if err := pr.Assign(as...); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "records to start", func() bool { return started.Load() > 0 })
	// The budget fills (how soon depends on the machine) and is never
	// exceeded on the way.
	var st process.Stats
	waitFor(t, 30*time.Second, "the budget to fill", func() bool {
		st = pr.Stats()
		if st.HeldBytes > budget {
			t.Fatalf("held %d bytes with a budget of %d", st.HeldBytes, budget)
		}
		return st.HeldBytes >= budget/2
	})
	if started.Load() >= 1000 {
		t.Fatalf("%d records started; the budget should bound them", started.Load())
	}
	close(release)
	waitFor(t, 60*time.Second, "everything", func() bool {
		st := pr.Stats()
		n := 0
		for _, ps := range st.Partitions {
			if ps.Committable == 2000 {
				n++
			}
		}
		return n == 3
	})
}

// Unreadable commit metadata: with IgnoreBadMetadata everything from the
// committed offset runs and the metadata is reported; with
// FailBadMetadata nothing runs and the partition reports the error.
func TestBadMetadataPolicy(t *testing.T) {
	c, cl := setup(t, rifftest.Topic("bm", 1))
	produce(t, cl, "bm", 1, 100, nil)
	// commit leaves the group's commit at some offset ≤ 10 with metadata
	// meta (the committing consumer's own final commit, if any, carries
	// the same metadata) and returns that offset.
	commit := func(group, meta string) int64 {
		cs, err := riffle.NewConsumer(client(t, c), riffle.ConsumerGroup(group), riffle.SubscribeTopics("bm"),
			riffle.OffsetReset(riffle.ResetEarliest), riffle.CommitMetadata(meta), riffle.DisableAutoCommit(),
			// Stop at the first record: the consumer's position stays ≤ 10.
			riffle.HandleRecord(func(context.Context, *riffle.Record) error { return errors.New("stop here") }))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// Retry until the member has joined (before, the coordinator does
		// not know it).
		waitFor(t, 30*time.Second, "a commit", func() bool {
			return cs.CommitOffsets(ctx, map[riffle.TopicPartition]int64{{Topic: "bm", Partition: 0}: 10}) == nil
		})
		cs.Close(ctx)
		offs, err := cl.Admin().FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		om := offs[riffle.TopicPartition{Topic: "bm", Partition: 0}]
		if om.Metadata != meta || om.Offset < 0 || om.Offset > 10 {
			t.Fatalf("committed %+v (all: %+v)", om, offs)
		}
		return om.Offset
	}
	ignoreAt := commit("g-ignore", "1AAAAAAAAA") // our version, corrupt body
	commit("g-fail", "1AAAAAAAAA")
	// Another client's metadata (franz-go commits its member id) is not
	// a finished-offset map: even FailBadMetadata resumes at the
	// committed offset and reports nothing.
	foreignAt := commit("g-foreign", "franz-go-member-0a1b2c")

	for _, tc := range []struct {
		group  string
		policy process.MetadataPolicy
		runs   int64
	}{{"g-ignore", process.IgnoreBadMetadata, 100 - ignoreAt}, {"g-fail", process.FailBadMetadata, 0},
		{"g-foreign", process.FailBadMetadata, 100 - foreignAt}} {
		t.Run(tc.group, func(t *testing.T) {
			var mu sync.Mutex
			var reported []error
			var ran atomic.Int64
			var low atomic.Int64
			low.Store(1 << 62)
			pr, err := process.New(client(t, c), func(ctx context.Context, r *riffle.Record) error {
				ran.Add(1)
				if r.Offset < low.Load() {
					low.Store(r.Offset)
				}
				return nil
			}, process.OnBadMetadata(tc.policy), process.OnError(func(err error) {
				mu.Lock()
				reported = append(reported, err)
				mu.Unlock()
			}), process.ConsumerOptions(groupOpts(tc.group, "bm")...))
			if err != nil {
				t.Fatal(err)
			}
			foreign := tc.group == "g-foreign"
			if !foreign {
				waitFor(t, 30*time.Second, "the metadata report", func() bool {
					mu.Lock()
					defer mu.Unlock()
					return len(reported) > 0
				})
			}
			if tc.runs > 0 {
				waitFor(t, 30*time.Second, "the records", func() bool { return ran.Load() == tc.runs })
				want := ignoreAt
				if foreign {
					want = foreignAt
				}
				if low.Load() != want {
					t.Fatalf("first offset run %d, want the committed %d", low.Load(), want)
				}
			} else {
				// Wait for the partition's error (when it is set depends
				// on the machine); no record may run on the way.
				var ps process.PartitionStats
				waitFor(t, 30*time.Second, "the partition's ErrBadMetadata", func() bool {
					if ran.Load() != 0 {
						t.Fatalf("ran %d records over metadata it refused", ran.Load())
					}
					ps, _ = pstats(pr, 0)
					return errors.Is(ps.Err, process.ErrBadMetadata)
				})
				if ran.Load() != 0 {
					t.Fatalf("ran %d records; partition error %v", ran.Load(), ps.Err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := pr.Close(ctx); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if foreign {
				if len(reported) != 0 {
					t.Fatalf("reported %v for another client's metadata, want nothing", reported)
				}
			} else if len(reported) != 1 || !errors.Is(reported[0], process.ErrBadMetadata) {
				t.Fatalf("reported %v, want one ErrBadMetadata", reported)
			}
			if tc.policy == process.FailBadMetadata && !foreign {
				// Nothing was committed over the metadata it refused.
				offs, err := cl.Admin().FetchOffsets(ctx, tc.group)
				if err != nil {
					t.Fatal(err)
				}
				if om := offs[riffle.TopicPartition{Topic: "bm", Partition: 0}]; om.Metadata != "1AAAAAAAAA" {
					t.Fatalf("after the failed partition closed, the commit is %+v", om)
				}
			}
		})
	}
}

// A partition that stops at a failed record gives its share of the byte
// budget back, and so does an unassigned one: the other partitions are
// offered records again (no lost wakeup).
func TestBudgetReleasedByFailureAndUnassign(t *testing.T) {
	for _, how := range []string{"failure", "unassign"} {
		t.Run(how, func(t *testing.T) {
			c, cl := setup(t, rifftest.Topic("rel", 2))
			produce(t, cl, "rel", 2, 500, nil)
			var p1 atomic.Int64
			hold := make(chan struct{})
			pr, err := process.New(client(t, c), func(ctx context.Context, r *riffle.Record) error {
				if r.Partition == 0 {
					if how == "failure" {
						return errors.New("fails for good")
					}
					select { // holds partition 0's share until unassigned
					case <-hold:
					case <-ctx.Done():
					}
					return ctx.Err()
				}
				p1.Add(1)
				return nil
			}, process.Ordering(process.ByPartition), process.MaxBytes(6400), process.OnError(func(error) {}))
			if err != nil {
				t.Fatal(err)
			}
			defer closeBounded(pr)
			tp0 := riffle.TopicPartition{Topic: "rel", Partition: 0}
			// Partition 0 first, so it takes the whole budget.
			if err := pr.Assign(riffle.Assignment{TopicPartition: tp0, Start: riffle.AtEarliest()}); err != nil {
				t.Fatal(err)
			}
			if how == "failure" {
				// Without the release, its queued records would keep
				// the budget full.
				waitFor(t, 30*time.Second, "partition 0 to fail", func() bool {
					ps, ok := pstats(pr, 0)
					return ok && ps.Err != nil
				})
			} else {
				waitFor(t, 30*time.Second, "partition 0 to fill the budget", func() bool { return pr.Stats().HeldBytes > 6400/2 })
			}
			if err := pr.Assign(riffle.Assignment{TopicPartition: riffle.TopicPartition{Topic: "rel", Partition: 1}, Start: riffle.AtEarliest()}); err != nil {
				t.Fatal(err)
			}
			if how == "unassign" {
				time.Sleep(100 * time.Millisecond)
				close(hold)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if _, err := pr.Consumer().Unassign(ctx, tp0); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, 30*time.Second, "partition 1", func() bool { return p1.Load() == 500 })
		})
	}
}

// Records cancelled by Close's deadline are not failures: they are neither
// dead-lettered nor reported, and stay uncommitted.
func TestCancelledIsNotFailure(t *testing.T) {
	c, cl := setup(t, rifftest.Topic("cx", 1))
	produce(t, cl, "cx", 1, 10, nil)
	var started, dead, reported atomic.Int64
	pr, err := process.New(client(t, c), func(ctx context.Context, r *riffle.Record) error {
		started.Add(1)
		<-ctx.Done()
		return ctx.Err()
	}, process.Ordering(process.Unordered),
		process.DeadLetter(func(context.Context, *riffle.Record, error, int) error { dead.Add(1); return nil }),
		process.OnError(func(error) { reported.Add(1) }),
		process.ConsumerOptions(groupOpts("g-cx", "cx")...))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "records to start", func() bool { return started.Load() == 10 })
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := pr.Close(ctx); err == nil {
		t.Fatal("close reported nothing undone")
	}
	if dead.Load() != 0 || reported.Load() != 0 || started.Load() != 10 {
		t.Fatalf("dead-lettered %d, reported %d, attempts %d; cancellation is not a failure", dead.Load(), reported.Load(), started.Load())
	}
	if covered(t, cl, "g-cx", riffle.TopicPartition{Topic: "cx", Partition: 0}, 0) {
		t.Fatal("a cancelled record was committed")
	}
}
