package crash_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// feeder produces a steady stream of unique values ("<prefix><n>") to a
// topic with an idempotent producer (acks=all), spread over its
// partitions, and keeps the values acknowledged: what the consumers of
// the topic must see.
type feeder struct {
	t      *testing.T
	p      *riffle.Producer
	topic  string
	prefix string
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once

	mu     sync.Mutex
	acked  []string
	failed []error
}

// newFeeder starts producing perTick records every 10 ms.
func newFeeder(t *testing.T, cl *riffle.Client, topic, prefix string, perTick int) *feeder {
	t.Helper()
	p, err := riffle.NewProducer(cl)
	must(t, "feeder producer", err)
	f := &feeder{t: t, p: p, topic: topic, prefix: prefix, stop: make(chan struct{}), done: make(chan struct{})}
	go f.run(perTick)
	t.Cleanup(f.halt) // a test that failed halfway
	return f
}

func (f *feeder) run(perTick int) {
	defer close(f.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-f.stop:
		case <-f.done:
		}
		cancel() // a Produce blocked on a full buffer returns
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for n := 0; ; {
		select {
		case <-f.stop:
			return
		case <-tick.C:
		}
		for range perTick {
			v := fmt.Sprintf("%s%d", f.prefix, n)
			n++
			f.p.Produce(ctx, &riffle.Record{Topic: f.topic, Key: []byte(v), Value: []byte(v)}, func(r *riffle.Record, err error) {
				f.mu.Lock()
				defer f.mu.Unlock()
				if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
					return // stopped while Produce waited for room: never sent
				}
				if err != nil {
					f.failed = append(f.failed, fmt.Errorf("%s: %w", v, err))
					return
				}
				f.acked = append(f.acked, v)
			})
		}
	}
}

// finish stops producing, waits for every record's outcome and returns
// the values acknowledged. A record that failed fails the test: the
// delivery timeout (2 minutes) outlasts every outage the kills make.
func (f *feeder) finish() []string {
	f.t.Helper()
	f.halt()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := f.p.Close(ctx); err != nil {
		f.t.Errorf("closing the feeder of %s: %v", f.topic, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, err := range f.failed {
		if i == 5 {
			f.t.Errorf("... %d records failed in all", len(f.failed))
			break
		}
		f.t.Errorf("feeder of %s: %v", f.topic, err)
	}
	return append([]string(nil), f.acked...)
}

// halt stops producing and waits for the loop to end.
func (f *feeder) halt() {
	f.once.Do(func() { close(f.stop) })
	<-f.done
}
