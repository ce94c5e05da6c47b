package process_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/internal/track"
	"github.com/riffle-go/riffle/process"
	"github.com/riffle-go/riffle/ranges"
	"github.com/riffle-go/riffle/rifftest"
)

var errPermanent = errors.New("permanent")

// covered reports whether the group's commit of tp covers offset: below
// the committed offset or listed finished in its metadata.
func covered(t *testing.T, cl *riffle.Client, group string, tp riffle.TopicPartition, offset int64) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := cl.Admin().FetchOffsets(ctx, group)
	if err != nil {
		t.Errorf("fetch offsets: %v", err)
		return false
	}
	om, ok := offs[tp]
	if !ok || om.Offset < 0 {
		return false
	}
	if offset < om.Offset {
		return true
	}
	fin, err := track.Decode(om.Offset, om.Metadata)
	if err != nil {
		t.Errorf("%s: commit metadata %q does not decode: %v", tp, om.Metadata, err)
		return false
	}
	for _, o := range fin {
		if o == offset {
			return true
		}
	}
	return false
}

// Retry and DLQ: failing records are retried the configured number of
// times (unless RetryIf says no), then written to the DLQ topic with the
// headers; the DLQ topic holds exactly those records, and the source
// partition's commit covers them only after the DLQ write.
func TestRetryAndDeadLetter(t *testing.T) {
	const parts, perPart = 2, 600
	c, cl := setup(t, rifftest.Topic("src", parts), rifftest.Topic("dlq", 1))
	produce(t, cl, "src", parts, perPart, func(p int32, i int) []byte { return []byte(fmt.Sprint(i % 7)) })

	retriable := func(off int64) bool { return off%100 == 7 }  // fails 3 times, retried
	permanent := func(off int64) bool { return off%100 == 42 } // not retried
	panicky := func(off int64) bool { return off%100 == 77 }   // panics once, then works
	var mu sync.Mutex
	calls := map[[2]int64]int{}
	h := func(ctx context.Context, r *riffle.Record) error {
		k := [2]int64{int64(r.Partition), r.Offset}
		mu.Lock()
		calls[k]++
		n := calls[k]
		mu.Unlock()
		switch {
		case retriable(r.Offset):
			return fmt.Errorf("transient failure %d", n)
		case permanent(r.Offset):
			return errPermanent
		case panicky(r.Offset) && n == 1:
			panic("boom")
		}
		return nil
	}
	dlqClient := client(t, c)
	dlqProducer, err := riffle.NewProducer(dlqClient)
	if err != nil {
		t.Fatal(err)
	}
	defer dlqProducer.Close(context.Background())
	inner := process.DeadLetterTopic(dlqProducer, "dlq")
	var dlqCalls atomic.Int64
	checkCl := client(t, c)
	dlq := func(ctx context.Context, r *riffle.Record, cause error, attempts int) error {
		dlqCalls.Add(1)
		tp := riffle.TopicPartition{Topic: r.Topic, Partition: r.Partition}
		// Let a few auto-commits pass: none may cover the record yet.
		time.Sleep(150 * time.Millisecond)
		if covered(t, checkCl, "g-dlq", tp, r.Offset) {
			t.Errorf("%s@%d committed before its DLQ write", tp, r.Offset)
		}
		return inner(ctx, r, cause, attempts)
	}
	opts := append(groupOpts("g-dlq", "src"), riffle.AutoCommitInterval(30*time.Millisecond))
	var total, hookRetries, hookFinished, hookDead atomic.Int64
	pr, err := process.New(client(t, c), func(ctx context.Context, r *riffle.Record) error {
		err := h(ctx, r)
		if err == nil {
			total.Add(1)
		}
		return err
	}, process.Ordering(process.ByKey), process.Concurrency(32),
		process.Retry(process.RetryPolicy{Attempts: 3, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
			RetryIf: func(err error) bool { return !errors.Is(err, errPermanent) }}),
		process.DeadLetter(dlq), process.ConsumerOptions(opts...),
		process.WithHooks(process.Hooks{
			OnRetry:      func(riffle.TopicPartition, int64, int, error) { hookRetries.Add(1) },
			OnFinish:     func(_ riffle.TopicPartition, _ int64, _ int, _ time.Duration, err error) { hookFinished.Add(1) },
			OnDeadLetter: func(_ riffle.TopicPartition, _ int64, err error) { hookDead.Add(1) },
		}))
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for off := int64(0); off < perPart; off++ {
		if retriable(off) || permanent(off) {
			want++
		}
	}
	want *= parts
	ok := parts*perPart - want
	waitFor(t, 60*time.Second, "processing", func() bool {
		st := pr.Stats()
		var done int64
		for _, ps := range st.Partitions {
			if ps.Committable == perPart {
				done++
			}
		}
		return total.Load() >= ok && dlqCalls.Load() >= want && done == parts
	})
	st := pr.Stats()
	var dead, retries int64
	for _, ps := range st.Partitions {
		dead += ps.DeadLettered
		retries += ps.Retries
		if ps.Err != nil {
			t.Errorf("%s stopped: %v", ps.TopicPartition, ps.Err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pr.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if dead != want || hookDead.Load() != want {
		t.Errorf("%d dead-lettered (hook: %d), want %d", dead, hookDead.Load(), want)
	}
	if hookRetries.Load() != retries || hookFinished.Load() != parts*perPart {
		t.Errorf("hooks: %d retries (stats %d), %d finished (want %d)", hookRetries.Load(), retries, hookFinished.Load(), parts*perPart)
	}
	// Attempts: 3 for retriable failures, 1 for permanent ones, 2 for the
	// panicking record (a panic is a failure, then a retry succeeds).
	mu.Lock()
	for k, n := range calls {
		wantN := 1
		switch {
		case retriable(k[1]):
			wantN = 3
		case panicky(k[1]):
			wantN = 2
		}
		if n != wantN {
			t.Errorf("record %d@%d: %d handler calls, want %d", k[0], k[1], n, wantN)
		}
	}
	if len(calls) != parts*perPart {
		t.Errorf("%d records seen, want %d", len(calls), parts*perPart)
	}
	mu.Unlock()
	if wantRetries := int64(parts * (2*countOf(perPart, retriable) + countOf(perPart, panicky))); retries != wantRetries {
		t.Errorf("stats: %d retries, want %d", retries, wantRetries)
	}

	// The DLQ topic holds exactly the failed records, once each, with the
	// headers.
	rd := ranges.NewReader(cl)
	got := map[[2]int64]bool{}
	err = rd.Read(ctx, ranges.Range{Topic: "dlq", Partition: 0, Low: 0, High: want}, func(r *riffle.Record) error {
		hs := map[string]string{}
		for _, h := range r.Headers {
			hs[h.Key] = string(h.Value)
		}
		p, _ := strconv.Atoi(hs[process.HeaderPartition])
		off, _ := strconv.ParseInt(hs[process.HeaderOffset], 10, 64)
		k := [2]int64{int64(p), off}
		if got[k] {
			t.Errorf("record %v dead-lettered twice", k)
		}
		got[k] = true
		if hs[process.HeaderTopic] != "src" {
			t.Errorf("DLQ topic header %q", hs[process.HeaderTopic])
		}
		wantAttempts, wantErr := "3", "transient failure 3"
		if permanent(off) {
			wantAttempts, wantErr = "1", "permanent"
		}
		if hs[process.HeaderAttempts] != wantAttempts || hs[process.HeaderError] != wantErr {
			t.Errorf("record %v: attempts %q error %q, want %q %q", k, hs[process.HeaderAttempts], hs[process.HeaderError], wantAttempts, wantErr)
		}
		if string(r.Value) != fmt.Sprint(off) {
			t.Errorf("record %v: value %q", k, r.Value)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p := int64(0); p < parts; p++ {
		for off := int64(0); off < perPart; off++ {
			if (retriable(off) || permanent(off)) != got[[2]int64{p, off}] {
				t.Errorf("record %d@%d: in DLQ %v", p, off, got[[2]int64{p, off}])
			}
		}
	}
	// Everything is committed now.
	for p := int32(0); p < parts; p++ {
		if !covered(t, cl, "g-dlq", riffle.TopicPartition{Topic: "src", Partition: p}, perPart-1) {
			t.Errorf("partition %d: commit does not cover the last record", p)
		}
	}
}

func countOf(n int64, f func(int64) bool) int64 {
	c := int64(0)
	for i := int64(0); i < n; i++ {
		if f(i) {
			c++
		}
	}
	return c
}

// Without a dead-letter function, a record that fails for good stops its
// partition there: the commit stays below it and the error is reported;
// other partitions keep going.
func TestFailureStopsPartition(t *testing.T) {
	c, cl := setup(t, rifftest.Topic("s", 2))
	produce(t, cl, "s", 2, 200, nil)
	errCh := make(chan error, 4)
	var total atomic.Int64
	pr, err := process.New(client(t, c), func(ctx context.Context, r *riffle.Record) error {
		if r.Partition == 0 && r.Offset == 50 {
			return errors.New("bad record")
		}
		total.Add(1)
		return nil
	}, process.Ordering(process.Unordered), process.OnError(func(err error) { errCh <- err }),
		process.ConsumerOptions(groupOpts("g-stop", "s")...))
	if err != nil {
		t.Fatal(err)
	}
	var re *process.RecordError
	select {
	case err := <-errCh:
		if !errors.As(err, &re) || re.Partition != 0 || re.Offset != 50 || re.Attempts != 1 {
			t.Fatalf("reported %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no error reported")
	}
	waitFor(t, 30*time.Second, "partition 1", func() bool {
		for _, ps := range pr.Stats().Partitions {
			if ps.Partition == 1 && ps.Committable == 200 {
				return true
			}
		}
		return false
	})
	// Records below the failed one still finish; the commit stops at it.
	// (and the records started past it to end: how soon is the
	// machine's business). A commit past 50 afterwards would go unseen
	// in the 100 ms: a false pass at worst.
	waitFor(t, 30*time.Second, "partition 0 to reach the failed record with nothing running", func() bool {
		ps, ok := pstats(pr, 0)
		return ok && ps.Committable >= 50 && ps.Running == 0
	})
	time.Sleep(100 * time.Millisecond)
	if ps, _ := pstats(pr, 0); ps.Committable != 50 || !errors.As(ps.Err, &re) || ps.Running != 0 {
		t.Fatalf("partition 0: committable %d, running %d, err %v", ps.Committable, ps.Running, ps.Err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pr.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if covered(t, cl, "g-stop", riffle.TopicPartition{Topic: "s", Partition: 0}, 50) {
		t.Fatal("the failed record was committed")
	}
}

// Two records failing for good: both are reported and the partition stops
// at the lower one, which the commit reaches but does not pass.
func TestTwoFailuresStopAtLowest(t *testing.T) {
	c, cl := setup(t, rifftest.Topic("two", 1))
	produce(t, cl, "two", 1, 100, nil)
	release := make(chan struct{})
	var mu sync.Mutex
	var reported []int64
	pr, err := process.New(client(t, c), func(ctx context.Context, r *riffle.Record) error {
		switch r.Offset {
		case 20:
			return errors.New("fails first")
		case 10:
			<-release // fails after 20 did
			return errors.New("fails second")
		}
		return nil
	}, process.Ordering(process.Unordered), process.OnError(func(err error) {
		var re *process.RecordError
		if errors.As(err, &re) {
			mu.Lock()
			reported = append(reported, re.Offset)
			n := len(reported)
			mu.Unlock()
			if n == 1 {
				close(release)
			}
		}
	}), process.ConsumerOptions(groupOpts("g-two", "two")...))
	if err != nil {
		t.Fatal(err)
	}
	defer closeBounded(pr)
	waitFor(t, 30*time.Second, "both failures", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(reported) == 2
	})
	waitFor(t, 30*time.Second, "the commit to reach the lower failure", func() bool {
		ps, ok := pstats(pr, 0)
		return ok && ps.Committable == 10 && ps.Running == 0
	})
	ps, _ := pstats(pr, 0)
	var re *process.RecordError
	if !errors.As(ps.Err, &re) || re.Offset != 10 {
		t.Fatalf("partition error %v, want the record at 10", ps.Err)
	}
	mu.Lock()
	defer mu.Unlock()
	if reported[0] != 20 || reported[1] != 10 {
		t.Fatalf("reported %v, want [20 10]", reported)
	}
}
