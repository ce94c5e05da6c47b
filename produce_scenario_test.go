package riffle

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// concurrentProduce runs `producers` goroutines that each produce `each`
// records with values "g-i" and keys spreading them over the partitions,
// and returns the first callback error (if any) and how many callbacks
// fired per record.
func concurrentProduce(t *testing.T, ctx context.Context, p *Producer, topic string, producers, each int) []int32 {
	t.Helper()
	calls := make([]int32, producers*each)
	var failed atomic.Value
	var wg sync.WaitGroup
	for g := 0; g < producers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				idx := g*each + i
				r := &Record{
					Topic: topic,
					Key:   []byte(fmt.Sprintf("%d/%d", g, i%13)),
					Value: []byte(fmt.Sprintf("%d-%d", g, i)),
				}
				p.Produce(ctx, r, func(r *Record, err error) {
					atomic.AddInt32(&calls[idx], 1)
					if err != nil {
						failed.CompareAndSwap(nil, fmt.Errorf("record %s: %w", r.Value, err))
					}
				})
			}
		}()
	}
	wg.Wait()
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	return calls
}

// verifyExactlyOnceInOrder reads every partition back and checks that each
// produced record is there exactly once and that each producer goroutine's
// records appear in production order within each partition.
func verifyExactlyOnceInOrder(t *testing.T, ctx context.Context, cl *Client, topic string, partitions int32, producers, each int, calls []int32) {
	t.Helper()
	for i, c := range calls {
		if c != 1 {
			t.Fatalf("record %d-%d: callback fired %d times", i/each, i%each, c)
		}
	}
	seen := make([]bool, producers*each)
	for part := int32(0); part < partitions; part++ {
		last := make(map[int]int)
		for _, r := range readPartition(t, ctx, cl, topic, part) {
			g, i, ok := strings.Cut(string(r.Value), "-")
			if !ok {
				t.Fatalf("unexpected value %q", r.Value)
			}
			gi, _ := strconv.Atoi(g)
			ii, _ := strconv.Atoi(i)
			idx := gi*each + ii
			if seen[idx] {
				t.Fatalf("record %s duplicated (partition %d offset %d)", r.Value, part, r.Offset)
			}
			seen[idx] = true
			if prev, ok := last[gi]; ok && ii <= prev {
				t.Fatalf("partition %d: producer %d's record %d after %d (offset %d)", part, gi, ii, prev, r.Offset)
			}
			last[gi] = ii
		}
	}
	for idx, ok := range seen {
		if !ok {
			t.Fatalf("record %d-%d acknowledged but missing from the log", idx/each, idx%each)
		}
	}
}

type lossHook struct {
	n    atomic.Int32
	last atomic.Value
}

func (h *lossHook) OnDataLoss(topic string, partition int32, err error) {
	h.n.Add(1)
	h.last.Store(err)
}

// The seed 004 scenario at scale: 100 goroutines each produce 2,000
// records to 6 partitions at once.
func TestProduceConcurrentIdempotent(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(6, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	hook := &lossHook{}
	p, err := NewProducer(cl, WithProducerHooks(hook))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const producers, each = 100, 2000
	calls := concurrentProduce(t, ctx, p, "t", producers, each)
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if hook.n.Load() != 0 {
		t.Fatalf("data loss reported: %v", hook.last.Load())
	}
	verifyExactlyOnceInOrder(t, ctx, cl, "t", 6, producers, each, calls)
}

// The same under faults: NOT_LEADER answers, REQUEST_TIMED_OUT after the
// write applied (unknown outcome), connections killed mid-request, and
// leaders moved every 100 ms.
func TestProduceConcurrentWithFaults(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(6, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), RequestTimeout(2*time.Second))
	hook := &lossHook{}
	p, err := NewProducer(cl, WithProducerHooks(hook), Linger(2*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	notLeader := fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "t", Partitions: []int32{1, 4}, Err: kerr.NotLeaderForPartition, Count: 20})
	timedOut := fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "t", Partitions: []int32{2, 5}, Err: kerr.RequestTimedOut, Count: 20})
	notEnough := fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "t", Partitions: []int32{0}, Err: kerr.NotEnoughReplicasAfterAppend, Count: 10})
	var killed atomic.Int32
	fake.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if killed.Load() < 15 && rand.IntN(25) == 0 {
			killed.Add(1)
			return nil, errors.New("connection killed by test"), true
		}
		return nil, nil, false
	})
	stopMoves := make(chan struct{})
	movesDone := make(chan int)
	go func() {
		moves := 0
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopMoves:
				movesDone <- moves
				return
			case <-tick.C:
				part := rand.Int32N(6)
				if fake.MoveTopicPartition("t", part, rand.Int32N(3)) == nil {
					moves++
				}
			}
		}
	}()

	const producers, each = 50, 2000
	calls := concurrentProduce(t, ctx, p, "t", producers, each)
	close(stopMoves)
	moves := <-movesDone
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("faults hit: not leader %d, timed out %d, not enough replicas after append %d, killed %d, leader moves %d",
		notLeader.Hits(), timedOut.Hits(), notEnough.Hits(), killed.Load(), moves)
	if notLeader.Hits() == 0 || timedOut.Hits() == 0 || notEnough.Hits() == 0 || moves == 0 {
		t.Fatal("faults were not exercised")
	}
	if hook.n.Load() != 0 {
		t.Fatalf("data loss reported: %v", hook.last.Load())
	}
	verifyExactlyOnceInOrder(t, ctx, cl, "t", 6, producers, each, calls)
}

// UNKNOWN_PRODUCER_ID after the log start moved past the last acknowledged
// offset (retention or DeleteRecords) is not data loss (KIP-360): the
// producer bumps its epoch and goes on; nothing is lost.
func TestProduceUnknownProducerAfterTruncation(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	hook := &lossHook{}
	p, err := NewProducer(cl, WithProducerHooks(hook), WithPartitioner(ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 10; i++ {
		if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	// Delete everything: the log start moves to 10, past the last acked
	// offset 9.
	dr := kmsg.NewPtrDeleteRecordsRequest()
	dt := kmsg.NewDeleteRecordsRequestTopic()
	dt.Topic = "t"
	dp := kmsg.NewDeleteRecordsRequestTopicPartition()
	dp.Partition, dp.Offset = 0, -1
	dt.Partitions = append(dt.Partitions, dp)
	dr.Topics = append(dr.Topics, dt)
	dr.TimeoutMillis = 5000
	if _, err := cl.Request(ctx, dr); err != nil {
		t.Fatal(err)
	}
	// The broker has forgotten the producer: answer the next produce with
	// UNKNOWN_PRODUCER_ID and the new log start, as Kafka does.
	var answered atomic.Int32
	fake.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		answered.Add(1)
		req := r.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		resp.SetVersion(req.GetVersion())
		for _, rt := range req.Topics {
			t := kmsg.NewProduceResponseTopic()
			t.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				pr := kmsg.NewProduceResponseTopicPartition()
				pr.Partition = rp.Partition
				pr.ErrorCode = kerr.UnknownProducerID.Code
				pr.LogStartOffset = 10
				t.Partitions = append(t.Partitions, pr)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil, true
	})
	idBefore := p.currentIdentity()
	for i := 10; i < 20; i++ {
		if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if answered.Load() != 1 {
		t.Fatalf("control answered %d produces", answered.Load())
	}
	if hook.n.Load() != 0 {
		t.Fatalf("truncation was reported as data loss: %v", hook.last.Load())
	}
	if p.currentIdentity() == idBefore {
		t.Fatal("producer identity (id, epoch) was not bumped")
	}
	got := readPartition(t, ctx, cl, "t", 0)
	if len(got) != 10 || string(got[0].Value) != "10" || string(got[9].Value) != "19" {
		t.Fatalf("after truncation the log holds %d records", len(got))
	}
}

// OUT_OF_ORDER_SEQUENCE_NUMBER without truncation: the records fail with
// ErrDataLoss, the hook fires, and later records succeed under a new epoch.
func TestProduceOutOfOrderIsDataLoss(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	hook := &lossHook{}
	p, err := NewProducer(cl, WithProducerHooks(hook), WithPartitioner(ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "t", Err: kerr.OutOfOrderSequenceNumber, Count: 1})
	err = p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("lost")})
	if !errors.Is(err, ErrDataLoss) || !errors.Is(err, KafkaErrorForCode(45)) {
		t.Fatalf("want ErrDataLoss wrapping OUT_OF_ORDER_SEQUENCE_NUMBER, got %v", err)
	}
	if hook.n.Load() != 1 {
		t.Fatalf("data loss hook fired %d times", hook.n.Load())
	}
	for i := 0; i < 5; i++ {
		if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte(fmt.Sprint("after", i))}); err != nil {
			t.Fatalf("producer unusable after data loss: %v", err)
		}
	}
	got := readPartition(t, ctx, cl, "t", 0)
	if len(got) != 6 || string(got[0].Value) != "before" || string(got[5].Value) != "after4" {
		t.Fatalf("log: %d records", len(got))
	}
}

// Close with records buffered and the cluster unreachable returns by its
// deadline, and every callback fires with an error.
func TestProduceCloseUnreachable(t *testing.T) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "t"))
	if err != nil {
		t.Fatal(err)
	}
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	p, err := NewProducer(cl, Linger(time.Hour), DeliveryTimeout(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Learn the topic, then lose the cluster.
	if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("warm")}); err != nil {
		t.Fatal(err)
	}
	fake.Close()
	const n = 500
	var fired, withErr atomic.Int32
	for i := 0; i < n; i++ {
		p.Produce(ctx, &Record{Topic: "t", Value: []byte(fmt.Sprint(i))}, func(_ *Record, err error) {
			fired.Add(1)
			if errors.Is(err, ErrProducerClosed) {
				withErr.Add(1)
			}
		})
	}
	closeCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = p.Close(closeCtx)
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close: want deadline exceeded, got %v", err)
	}
	if took > 5*time.Second {
		t.Fatalf("Close took %v with a 500ms deadline", took)
	}
	if fired.Load() != n || withErr.Load() != n {
		t.Fatalf("%d callbacks fired, %d with ErrProducerClosed, want %d", fired.Load(), withErr.Load(), n)
	}
	// After Close, Produce fails at once.
	var after error
	p.Produce(ctx, &Record{Topic: "t"}, func(_ *Record, err error) { after = err })
	if !errors.Is(after, ErrProducerClosed) {
		t.Fatalf("produce after close: %v", after)
	}
}

func TestProduceBadInput(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), UnknownTopicRetries(2))
	p, err := NewProducer(cl, MaxBatchBytes(4<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	err = p.ProduceSync(ctx, &Record{Topic: "t", Value: make([]byte, 8<<10)})
	if !errors.Is(err, ErrRecordTooLarge) || !strings.Contains(err.Error(), "4096") {
		t.Fatalf("oversized: %v", err)
	}
	err = p.ProduceSync(ctx, &Record{Topic: "no-such-topic", Value: []byte("x")})
	if !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("unknown topic: %v", err)
	}
	mp, err := NewProducer(cl, WithPartitioner(ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer mp.Close(context.Background())
	if err := mp.ProduceSync(ctx, &Record{Topic: "t", Partition: 7, Value: []byte("x")}); !errors.Is(err, ErrInvalidPartition) {
		t.Fatalf("bad partition: %v", err)
	}
	// Nothing else was affected.
	if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("fine")}); err != nil {
		t.Fatal(err)
	}
}
