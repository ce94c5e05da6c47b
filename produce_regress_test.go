package riffle

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A callback that produces again while the buffer is full must not
// deadlock the response handler: the finished batch's room is freed first.
func TestProduceFromCallbackWithFullBuffer(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	p, err := NewProducer(cl, MaxBufferedRecords(2), Linger(0))
	if err != nil {
		t.Fatal(err)
	}
	var again sync.WaitGroup
	again.Add(2)
	for i := 0; i < 2; i++ {
		p.Produce(context.Background(), &Record{Topic: "t", Value: []byte("x")}, func(r *Record, err error) {
			p.Produce(context.Background(), &Record{Topic: "t", Value: []byte("again")}, func(_ *Record, err error) {
				if err != nil {
					t.Error(err)
				}
				again.Done()
			})
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { again.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("records produced from callbacks never completed (handler deadlocked)")
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// A batch that could not be sent at all (the broker refuses connections)
// was certainly never written, so the delivery timeout fails it.
func TestProduceDeliveryTimeoutWhenUnreachable(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	var fail atomic.Bool
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if fail.Load() {
			return nil, errors.New("refused by test")
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), Dialer(dial), RequestTimeout(500*time.Millisecond), ConnIdleTimeout(time.Hour))
	p, err := NewProducer(cl, DeliveryTimeout(time.Second), Linger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("warm")}); err != nil {
		t.Fatal(err)
	}
	// Lose the produce connection and refuse new ones.
	fail.Store(true)
	cn, err := cl.cl.Conn(ctx, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	cn.Close()
	got := make(chan error, 1)
	p.Produce(ctx, &Record{Topic: "t", Value: []byte("x")}, func(_ *Record, err error) { got <- err })
	select {
	case err := <-got:
		if !errors.Is(err, ErrDeliveryTimeout) {
			t.Fatalf("want ErrDeliveryTimeout, got %v", err)
		}
	case <-ctx.Done():
		t.Fatal("a never-sent record was not failed by its delivery timeout")
	}
}

// A Produce in progress (looking up a new topic) when Close runs still gets
// its callback.
func TestProduceRacingCloseGetsCallback(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"), kfake.SeedTopics(1, "t2"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	p, err := NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release := make(chan struct{})
	entered := make(chan struct{})
	fake.ControlKey(int16(kmsg.DescribeConfigs), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		once.Do(func() { close(entered); <-release })
		return nil, nil, false
	})
	got := make(chan error, 1)
	go p.Produce(context.Background(), &Record{Topic: "t2", Value: []byte("x")}, func(r *Record, err error) { got <- err })
	<-entered
	cctx, ccancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer ccancel()
	p.Close(cctx)
	close(release)
	select {
	case err := <-got:
		if !errors.Is(err, ErrProducerClosed) {
			t.Fatalf("want ErrProducerClosed, got %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("callback never fired for a record produced concurrently with Close")
	}
}

// stallConn blocks writes, like a broker that stopped reading.
type stallConn struct {
	net.Conn
	stall   *atomic.Bool
	stalled chan<- struct{} // sent to (if not full) when a write stalls
	mu      sync.Mutex
	wd      time.Time
}

func (c *stallConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.wd = t
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

func (c *stallConn) Write(b []byte) (int, error) {
	if c.stall.Load() && c.stalled != nil {
		select {
		case c.stalled <- struct{}{}:
		default:
		}
	}
	for c.stall.Load() {
		c.mu.Lock()
		wd := c.wd
		c.mu.Unlock()
		if !time.Now().Before(wd) {
			return 0, os.ErrDeadlineExceeded
		}
		time.Sleep(5 * time.Millisecond)
	}
	return c.Conn.Write(b)
}

// Close returns by its deadline even when a write is stuck.
func TestProduceCloseWithStuckWrite(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	var stall atomic.Bool
	stalled := make(chan struct{}, 1)
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &stallConn{Conn: nc, stall: &stall, stalled: stalled}, nil
	}
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), Dialer(dial), RequestTimeout(20*time.Second))
	p, err := NewProducer(cl, Linger(0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("warm")}); err != nil {
		t.Fatal(err)
	}
	stall.Store(true)
	defer stall.Store(false)
	got := make(chan error, 1)
	p.Produce(ctx, &Record{Topic: "t", Value: []byte("x")}, func(_ *Record, err error) { got <- err })
	select { // the write is stuck (not merely slow to start on a loaded machine)
	case <-stalled:
	case <-ctx.Done():
		t.Fatal("the record's write never started")
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer ccancel()
	closed := make(chan error, 1)
	go func() { closed <- p.Close(cctx) }()
	select {
	case err := <-closed:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(10 * time.Second): // under the 20 s RequestTimeout a hung write would wait for
		t.Fatal("Close hung on a stuck write far past its deadline")
	}
	if err := <-got; !errors.Is(err, ErrProducerClosed) {
		t.Fatalf("record: %v", err)
	}
}

// Flush waits only for records produced before it, however fast other
// goroutines keep producing.
func TestFlushNotStarvedByConcurrentProducers(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	p, err := NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("warm")}); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				p.Produce(ctx, &Record{Topic: "t", Value: []byte("x")}, nil)
			}
		}()
	}
	var before atomic.Int32
	marker := &Record{Topic: "t", Value: []byte("before flush")}
	p.Produce(ctx, marker, func(*Record, error) { before.Add(1) })
	fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
	defer fcancel()
	err = p.Flush(fctx)
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatalf("Flush never returned while others kept producing: %v", err)
	}
	if before.Load() != 1 {
		t.Fatal("Flush returned before a record produced earlier finished")
	}
	p.Close(ctx)
}

type batchCounter struct{ batches, records atomic.Int64 }

func (b *batchCounter) OnBatchWritten(_ BrokerInfo, _ string, _ int32, records, _ int) {
	b.batches.Add(1)
	b.records.Add(int64(records))
}

// With no linger, records produced while the partition's pipeline is busy
// wait in one open batch instead of each sealing a batch (and a request)
// of its own: at most one sealed batch waits for the sender. With one
// record per batch, a broker answering slowly turned 2,000 records into
// 2,000 requests (and the latency of a queue of them).
func TestNoLingerBatchesWhilePipelineBusy(t *testing.T) {
	fake := newFake(t, kfake.SeedTopics(1, "t"))
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	fake.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		fake.SleepControl(func() {
			select {
			case <-time.After(20 * time.Millisecond):
			case <-stop:
			}
		})
		return nil, nil, false
	})
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	var bc batchCounter
	p, err := NewProducer(cl, Linger(0), WithProducerHooks(&bc))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 2000
	var failed atomic.Int64
	for i := range n {
		p.Produce(ctx, &Record{Topic: "t", Value: []byte(fmt.Sprint(i))}, func(_ *Record, err error) {
			if err != nil {
				failed.Add(1)
			}
		})
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if failed.Load() != 0 || bc.records.Load() != n {
		t.Fatalf("%d failed, %d written", failed.Load(), bc.records.Load())
	}
	// Produce is far faster than 20 ms per request: nearly everything
	// queues behind the first requests.
	if b := bc.batches.Load(); b > n/10 {
		t.Fatalf("%d records went out in %d batches: records produced while the pipeline was busy were not batched", n, b)
	}
}

type batchSizes struct {
	mu    sync.Mutex
	sizes []int
	recs  int
}

func (b *batchSizes) OnBatchWritten(_ BrokerInfo, _ string, _ int32, records, bytes int) {
	b.mu.Lock()
	b.sizes = append(b.sizes, bytes)
	b.recs += records
	b.mu.Unlock()
}

// Records are encoded when their batch is sealed, the batch sized by each
// record's bound: batches stay within MaxBatchBytes whatever the mix of
// sizes, and every record is written once, in order.
func TestBatchesStayWithinMaxBatchBytes(t *testing.T) {
	fake := newFake(t, kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	var bs batchSizes
	p, err := NewProducer(cl, MaxBatchBytes(4096), WithProducerHooks(&bs), Linger(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 3000
	var failed atomic.Int64
	var order sync.Mutex
	var offsets []int64
	for i := range n {
		rec := &Record{Topic: "t", Value: make([]byte, (i*37)%1500), Key: []byte(fmt.Sprint(i))}
		if i%5 == 0 {
			rec.Headers = []Header{{Key: "h", Value: make([]byte, i%200)}}
		}
		p.Produce(ctx, rec, func(r *Record, err error) {
			if err != nil {
				failed.Add(1)
				return
			}
			order.Lock()
			offsets = append(offsets, r.Offset)
			order.Unlock()
		})
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if failed.Load() != 0 || bs.recs != n || len(offsets) != n {
		t.Fatalf("%d failed, %d written, %d acknowledged", failed.Load(), bs.recs, len(offsets))
	}
	for i, o := range offsets {
		if o != int64(i) {
			t.Fatalf("record %d acknowledged at offset %d", i, o)
		}
	}
	for _, s := range bs.sizes {
		if s > 4096 {
			t.Fatalf("a batch of %d bytes, MaxBatchBytes 4096", s)
		}
	}
	if len(bs.sizes) > n/2 {
		t.Fatalf("%d batches for %d records: batches are not being filled", len(bs.sizes), n)
	}
}

// A batch the broker keeps refusing with a retriable error
// (NOT_ENOUGH_REPLICAS: too few replicas in sync for acks=all) is retried
// until the delivery timeout fails it; the error is ErrDeliveryTimeout and
// names that last error, which errors.Is finds.
func TestProduceDeliveryTimeoutNamesLastError(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	refused := fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "t", Err: kerr.NotEnoughReplicas, Count: -1})
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), RetryBackoff(50*time.Millisecond, 100*time.Millisecond), RequestTimeout(500*time.Millisecond))
	p, err := NewProducer(cl, DeliveryTimeout(time.Second), Linger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("x")})
	if !errors.Is(err, ErrDeliveryTimeout) {
		t.Fatalf("want ErrDeliveryTimeout, got %v", err)
	}
	if !errors.Is(err, KafkaErrorForCode(kerr.NotEnoughReplicas.Code)) || !strings.Contains(err.Error(), "NOT_ENOUGH_REPLICAS") {
		t.Errorf("the delivery timeout does not name the last error NOT_ENOUGH_REPLICAS: %v", err)
	}
	if n := strings.Count(err.Error(), "t[0]: "); n != 1 {
		t.Errorf("the error names the partition %d times: %v", n, err)
	}
	if refused.Hits() < 2 {
		t.Errorf("the broker refused %d produce requests, want retries", refused.Hits())
	}
}
