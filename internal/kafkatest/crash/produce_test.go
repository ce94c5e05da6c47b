package crash_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// Scenario (a): 8 goroutines produce through one idempotent producer
// (acks=all, 5 requests in flight per partition) while the leaders die.
// Each record is "g/seq" (goroutine, its sequence), keyed "g/seq%4" so a
// goroutine's records go to several partitions. Read back to the end
// afterwards: no acknowledged record missing (lost), none twice (dup),
// a goroutine's records in a partition in sequence order (reorder), every
// callback called exactly once.

const (
	produceGoroutines = 8
	produceMaxSeq     = 50000 // per goroutine: far more than a run sends
)

type produceLoad struct {
	topic string
	p     *riffle.Producer
	stop  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
	// calls[g][seq] counts the callbacks of a record, failed[g][seq]
	// marks those called with an error; sent[g] is how many records
	// goroutine g produced (set when it ends).
	calls  [produceGoroutines][]atomic.Int32
	failed [produceGoroutines][]atomic.Bool
	sent   [produceGoroutines]int
	errMu  sync.Mutex
	errs   []error
	byPart map[riffle.TopicPartition]int // acknowledged, guarded by errMu
}

func (l *produceLoad) name() string     { return "produce" }
func (l *produceLoad) topics() []string { return []string{l.topic} }

func (l *produceLoad) progress() map[riffle.TopicPartition]int {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	return maps.Clone(l.byPart)
}

func startProduce(t *testing.T, cl *riffle.Client, topic string) *produceLoad {
	t.Helper()
	p, err := riffle.NewProducer(cl, riffle.Acknowledgements(riffle.AcksAll), riffle.MaxInflightPerPartition(5))
	must(t, "producer", err)
	l := &produceLoad{topic: topic, p: p, stop: make(chan struct{}), byPart: map[riffle.TopicPartition]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	for g := range produceGoroutines {
		l.calls[g] = make([]atomic.Int32, produceMaxSeq)
		l.failed[g] = make([]atomic.Bool, produceMaxSeq)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			seq := 0
			defer func() { l.sent[g] = seq }()
			for ; seq < produceMaxSeq; seq++ {
				select {
				case <-l.stop:
					return
				case <-tick.C:
				}
				seq := seq // the callback's own
				v := fmt.Sprintf("%d/%d", g, seq)
				k := fmt.Sprintf("%d/%d", g, seq%4)
				l.p.Produce(ctx, &riffle.Record{Topic: topic, Key: []byte(k), Value: []byte(v)}, func(r *riffle.Record, err error) {
					l.calls[g][seq].Add(1)
					if err == nil {
						l.errMu.Lock()
						l.byPart[riffle.TopicPartition{Topic: r.Topic, Partition: r.Partition}]++
						l.errMu.Unlock()
					}
					if err != nil {
						l.failed[g][seq].Store(true)
						l.errMu.Lock()
						l.errs = append(l.errs, fmt.Errorf("%s: %w", v, err))
						l.errMu.Unlock()
					}
				})
			}
		}()
	}
	t.Cleanup(func() {
		l.halt()
		cancel()
	})
	return l
}

func (l *produceLoad) halt() {
	l.once.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// finish stops the goroutines, closes the producer (every record gets its
// outcome), reads the topic and checks it.
func (l *produceLoad) finish(t *testing.T, cl *riffle.Client, kills []kill) {
	l.halt()
	ctx := timeout(t, 2*time.Minute)
	if err := l.p.Close(ctx); err != nil {
		t.Errorf("closing the producer: %v", err)
	}
	sent, acked, failed, badCalls := 0, 0, 0, 0
	for g := range produceGoroutines {
		sent += l.sent[g]
		for seq := range l.sent[g] {
			switch n := l.calls[g][seq].Load(); {
			case n != 1:
				badCalls++
				if badCalls <= 5 {
					t.Errorf("record %d/%d: callback called %d times", g, seq, n)
				}
			case l.failed[g][seq].Load():
				failed++
			default:
				acked++
			}
		}
	}
	l.errMu.Lock()
	for i, err := range l.errs {
		if i == 5 {
			break
		}
		t.Errorf("failed record: %v", err)
	}
	l.errMu.Unlock()

	got := readAll(t, cl, l.topic, riffle.ReadUncommitted)
	seen := map[[2]int]int{}
	dup, reorder, malformed := 0, 0, 0
	for p, rs := range got {
		last := map[int]int{} // goroutine -> last seq in this partition
		for _, r := range rs {
			g, seq, ok := parseGS(string(r.Value))
			if !ok {
				malformed++
				continue
			}
			if seen[[2]int{g, seq}]++; seen[[2]int{g, seq}] > 1 {
				dup++
				if dup <= 5 {
					t.Errorf("record %d/%d twice (partition %d offset %d)", g, seq, p, r.Offset)
				}
			}
			if prev, ok := last[g]; ok && seq <= prev {
				reorder++
				if reorder <= 5 {
					t.Errorf("partition %d offset %d: %d/%d after %d/%d", p, r.Offset, g, seq, g, prev)
				}
			}
			last[g] = seq
		}
	}
	lost, failedWritten := 0, 0
	for g := range produceGoroutines {
		for seq := range l.sent[g] {
			in := seen[[2]int{g, seq}] > 0
			switch {
			case l.failed[g][seq].Load():
				if in {
					failedWritten++
				}
			case !in:
				lost++
				if lost <= 5 {
					t.Errorf("acknowledged record %d/%d not in the log", g, seq)
				}
			}
		}
	}
	hit := hitCount(kills, l.topic)
	stalls := stallsOf(kills, l.name())
	t.Logf("accounting produce: goroutines=%d sent=%d acked=%d failed=%d lost=%d dup=%d reorder=%d callbacks_not_once=%d failed_but_written=%d stalled=%d kills=%d",
		produceGoroutines, sent, acked, failed, lost, dup, reorder, badCalls, failedWritten, len(stalls), hit)
	for _, s := range stalls {
		t.Errorf("stalled while a node was down: %s", s)
	}
	if lost+dup+reorder+badCalls+malformed+failed > 0 {
		t.Errorf("lost %d, dup %d, reorder %d, callbacks not called once %d, malformed %d, failed %d: want 0",
			lost, dup, reorder, badCalls, malformed, failed)
	}
	if hit < 3 {
		t.Errorf("%d kills took leaders of %s, want 3", hit, l.topic)
	}
	if acked == 0 {
		t.Errorf("nothing acknowledged")
	}
}

// parseGS parses "g/seq".
func parseGS(v string) (g, seq int, ok bool) {
	a, b, found := strings.Cut(v, "/")
	if !found {
		return 0, 0, false
	}
	g, err1 := strconv.Atoi(a)
	seq, err2 := strconv.Atoi(b)
	return g, seq, errors.Join(err1, err2) == nil && g >= 0 && g < produceGoroutines && seq >= 0 && seq < produceMaxSeq
}
