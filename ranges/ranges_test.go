package ranges_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/internal/batch"
	"github.com/riffle-go/riffle/ranges"
	"github.com/riffle-go/riffle/rifftest"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func setup(t *testing.T, opts ...rifftest.Option) (*rifftest.Cluster, *riffle.Client) {
	t.Helper()
	c := rifftest.New(t, opts...)
	cl, err := riffle.NewClient(riffle.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return c, cl
}

func produce(t *testing.T, cl *riffle.Client, topic string, partition int32, n int, key func(i int) []byte) {
	t.Helper()
	p, err := riffle.NewProducer(cl, riffle.WithPartitioner(riffle.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < n; i++ {
		r := &riffle.Record{Topic: topic, Partition: partition, Value: []byte(fmt.Sprint(i))}
		if key != nil {
			r.Key = key(i)
		}
		p.Produce(ctx, r, func(_ *riffle.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func collect(t *testing.T, r *ranges.Reader, rg ranges.Range) ([]int64, error) {
	var offs []int64
	err := r.Read(context.Background(), rg, func(rec *riffle.Record) error {
		offs = append(offs, rec.Offset)
		if rec.Topic != rg.Topic || rec.Partition != rg.Partition {
			t.Errorf("record from %s[%d]", rec.Topic, rec.Partition)
		}
		return nil
	})
	return offs, err
}

func TestExactBoundaries(t *testing.T) {
	_, cl := setup(t, rifftest.Topic("t", 2))
	produce(t, cl, "t", 1, 1000, nil)
	r := ranges.NewReader(cl, ranges.FetchBytes(4<<10)) // small fetches: many round trips
	defer r.Close()
	for _, rg := range []ranges.Range{
		{"t", 1, 0, 1000}, {"t", 1, 0, 1}, {"t", 1, 999, 1000}, {"t", 1, 137, 613}, {"t", 1, 500, 500},
	} {
		offs, err := collect(t, r, rg)
		if err != nil {
			t.Fatalf("%s: %v", rg, err)
		}
		if int64(len(offs)) != rg.Len() {
			t.Fatalf("%s: %d records", rg, len(offs))
		}
		for i, o := range offs {
			if o != rg.Low+int64(i) {
				t.Fatalf("%s: record %d has offset %d", rg, i, o)
			}
		}
	}
	if _, err := collect(t, r, ranges.Range{"t", 1, 5, 2}); !errors.Is(err, ranges.ErrInvalidRange) {
		t.Fatalf("inverted range: %v", err)
	}
}

func TestBeyondHighWatermark(t *testing.T) {
	_, cl := setup(t, rifftest.Topic("t", 1))
	produce(t, cl, "t", 0, 10, nil)
	r := ranges.NewReader(cl)
	offs, err := collect(t, r, ranges.Range{"t", 0, 5, 20})
	if !errors.Is(err, ranges.ErrBeyondHighWatermark) || len(offs) != 5 {
		t.Fatalf("got %d records, err %v", len(offs), err)
	}

	// Waiting: the rest arrives while the read waits.
	w := ranges.NewReader(cl, ranges.WaitForData())
	done := make(chan []int64, 1)
	errc := make(chan error, 1)
	go func() {
		offs, err := collect(t, w, ranges.Range{"t", 0, 5, 20})
		done <- offs
		errc <- err
	}()
	time.Sleep(100 * time.Millisecond)
	produce(t, cl, "t", 0, 15, nil)
	if offs, err := <-done, <-errc; err != nil || len(offs) != 15 || offs[14] != 19 {
		t.Fatalf("waiting read: %v records, err %v", offs, err)
	}

	// The wait ends with the context.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = w.Read(ctx, ranges.Range{"t", 0, 0, 1000}, func(*riffle.Record) error { return nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want deadline exceeded, got %v", err)
	}
}

func TestCompactedGaps(t *testing.T) {
	c, cl := setup(t, rifftest.Topic("t", 1))
	res, err := cl.Admin().AlterTopicConfigs(context.Background(), riffle.AlterConfig{Topic: "t", Name: "cleanup.policy", Value: ptr("compact")})
	if err != nil || res.Err() != nil {
		t.Fatal(err, res.Err())
	}
	// One batch per record. Key "first" at offset 0, key "dup" at 1..50
	// (compaction keeps only 50), unique keys at 51..99: the log keeps
	// 0 and 50..99, with a gap at 1..49.
	p, err := riffle.NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		key := "dup"
		switch {
		case i == 0:
			key = "first"
		case i > 50:
			key = fmt.Sprint("u", i)
		}
		if err := p.ProduceSync(context.Background(), &riffle.Record{Topic: "t", Key: []byte(key), Value: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	p.Close(context.Background())
	c.Kfake().Compact()
	r := ranges.NewReader(cl)
	offs, err := collect(t, r, ranges.Range{"t", 0, 0, 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) != 51 || offs[0] != 0 || offs[1] != 50 {
		t.Fatalf("after compaction %d records remain: %v", len(offs), offs)
	}
	for i := 1; i < len(offs); i++ {
		if offs[i] <= offs[i-1] {
			t.Fatalf("offsets not increasing: %v", offs)
		}
	}
	if offs[len(offs)-1] != 99 {
		t.Fatalf("last record %d", offs[len(offs)-1])
	}
	// A range that lies entirely in a compacted gap ends at High with no
	// records and no error.
	offs, err = collect(t, r, ranges.Range{"t", 0, 10, 20})
	if err != nil || len(offs) != 0 {
		t.Fatalf("gap range: %v %v", offs, err)
	}
}

func TestTransactionalMarkers(t *testing.T) {
	_, cl := setup(t, rifftest.Topic("t", 1))
	produce(t, cl, "t", 0, 3, nil)                 // 0..2
	txn(t, cl, "t", 0, []string{"c1", "c2"}, true) // 3,4 + commit marker 5
	txn(t, cl, "t", 0, []string{"a1"}, false)      // 6 + abort marker 7
	produce(t, cl, "t", 0, 2, nil)                 // 8, 9

	all, err := collect(t, ranges.NewReader(cl), ranges.Range{"t", 0, 0, 10})
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{0, 1, 2, 3, 4, 6, 8, 9} // markers are never records
	if fmt.Sprint(all) != fmt.Sprint(want) {
		t.Fatalf("read_uncommitted offsets %v, want %v", all, want)
	}
	committed, err := collect(t, ranges.NewReader(cl, ranges.ReadCommitted()), ranges.Range{"t", 0, 0, 10})
	if err != nil {
		t.Fatal(err)
	}
	want = []int64{0, 1, 2, 3, 4, 8, 9}
	if fmt.Sprint(committed) != fmt.Sprint(want) {
		t.Fatalf("read_committed offsets %v, want %v", committed, want)
	}
	// A range ending on a marker stops at High.
	offs, err := collect(t, ranges.NewReader(cl), ranges.Range{"t", 0, 4, 6})
	if err != nil || fmt.Sprint(offs) != "[4]" {
		t.Fatalf("range ending at a marker: %v %v", offs, err)
	}
}

func TestConcurrentRangesOneReader(t *testing.T) {
	_, cl := setup(t, rifftest.Brokers(2), rifftest.Topic("t", 4))
	for p := int32(0); p < 4; p++ {
		produce(t, cl, "t", p, 2000, nil)
	}
	plan, err := ranges.Plan(context.Background(), cl, ranges.PlanOptions{MaxRecords: 250}, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != 32 {
		t.Fatalf("plan has %d ranges, want 32", len(plan))
	}
	r := ranges.NewReader(cl)
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]int{}
	for _, rg := range plan {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			err := r.Read(context.Background(), rg, func(rec *riffle.Record) error {
				if rec.Offset < rg.Low || rec.Offset >= rg.High {
					t.Errorf("%s: offset %d out of range", rg, rec.Offset)
				}
				mu.Lock()
				seen[fmt.Sprint(rec.Partition, "/", rec.Offset)]++
				mu.Unlock()
				n++
				return nil
			})
			if err != nil || int64(n) != rg.Len() {
				t.Errorf("%s: %d records, %v", rg, n, err)
			}
		}()
	}
	wg.Wait()
	if len(seen) != 8000 {
		t.Fatalf("%d distinct records, want 8000", len(seen))
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("record %s read %d times", k, n)
		}
	}
	r.Close()
	if err := r.Read(context.Background(), plan[0], func(*riffle.Record) error { return nil }); !errors.Is(err, ranges.ErrReaderClosed) {
		t.Fatalf("read after close: %v", err)
	}
}

func TestPlanSerializable(t *testing.T) {
	_, cl := setup(t, rifftest.Topic("t", 3))
	produce(t, cl, "t", 0, 10, nil)
	produce(t, cl, "t", 2, 25, nil)
	plan, err := ranges.Plan(context.Background(), cl, ranges.PlanOptions{MaxRecords: 10}, "t")
	if err != nil {
		t.Fatal(err)
	}
	want := "[t[0] [0, 10) t[2] [0, 10) t[2] [10, 20) t[2] [20, 25)]"
	if fmt.Sprint(plan) != want {
		t.Fatalf("plan %v", plan)
	}
	if _, err := ranges.Plan(context.Background(), cl, ranges.PlanOptions{MaxRecords: -1}, "t"); !errors.Is(err, riffle.ErrInvalidConfig) {
		t.Fatalf("negative MaxRecords: %v", err)
	}
}

// A zero MaxRecords is no limit: one range per non-empty partition.
func TestPlanWholePartitions(t *testing.T) {
	_, cl := setup(t, rifftest.Topic("t", 3))
	produce(t, cl, "t", 0, 10, nil)
	produce(t, cl, "t", 2, 25, nil)
	plan, err := ranges.Plan(context.Background(), cl, ranges.PlanOptions{}, "t")
	if err != nil {
		t.Fatal(err)
	}
	if want := "[t[0] [0, 10) t[2] [0, 25)]"; fmt.Sprint(plan) != want {
		t.Fatalf("plan %v, want %s", plan, want)
	}
}

func ptr(s string) *string { return &s }

// txn writes values to topic/partition in one transaction and commits or
// aborts it, with raw requests (Riffle's transactional producer comes
// later).
func txn(t *testing.T, cl *riffle.Client, topic string, partition int32, values []string, commit bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id := fmt.Sprintf("txn-%d", time.Now().UnixNano())
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID = &id
	init.TransactionTimeoutMillis = 10000
	resp, err := cl.Request(ctx, init)
	if err != nil {
		t.Fatal(err)
	}
	ir := resp.(*kmsg.InitProducerIDResponse)
	if ir.ErrorCode != 0 {
		t.Fatalf("init: %v", riffle.KafkaErrorForCode(ir.ErrorCode))
	}
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID = id
	add.ProducerID, add.ProducerEpoch = ir.ProducerID, ir.ProducerEpoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic = topic
	at.Partitions = []int32{partition}
	add.Topics = append(add.Topics, at)
	if _, err := cl.Request(ctx, add); err != nil {
		t.Fatal(err)
	}
	b := batch.NewBuilder(batch.BuilderOptions{})
	for _, v := range values {
		b.Add(&batch.Record{Value: []byte(v), Timestamp: time.Now().UnixMilli()})
	}
	enc, err := b.Finish(batch.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	enc.SetProducer(ir.ProducerID, ir.ProducerEpoch, 0)
	enc.SetTransactional(true)
	pr := kmsg.NewPtrProduceRequest()
	pr.TransactionID = &id
	pr.Acks = -1
	pr.TimeoutMillis = 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition = partition
	pp.Records = enc.Bytes()
	pt.Partitions = append(pt.Partitions, pp)
	pr.Topics = append(pr.Topics, pt)
	resp, err = cl.Request(ctx, pr)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("txn produce: %v", riffle.KafkaErrorForCode(code))
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID = id
	end.ProducerID, end.ProducerEpoch = ir.ProducerID, ir.ProducerEpoch
	end.Commit = commit
	resp, err = cl.Request(ctx, end)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.EndTxnResponse).ErrorCode; code != 0 {
		t.Fatalf("end txn: %v", riffle.KafkaErrorForCode(code))
	}
}

// fetchBytes counts the bytes of Fetch responses a client reads.
type fetchBytes struct{ n atomic.Int64 }

func (f *fetchBytes) OnBrokerRequest(_ riffle.BrokerInfo, e riffle.RequestEvent) {
	if e.APIKey == kmsg.Fetch.Int16() {
		f.n.Add(int64(e.BytesRead))
	}
}

// A small range asks the broker for about what it needs, not for the
// Reader's 4 MiB maximum: reading 20 records of a 2,000-record partition
// (1 KiB values, 16 KiB batches) must not pull most of the partition.
func TestSmallRangeFetchesWhatItNeeds(t *testing.T) {
	c := rifftest.New(t, rifftest.Topic("t", 1))
	var fb fetchBytes
	cl, err := riffle.NewClient(riffle.SeedBrokers(c.Addrs()...), riffle.WithHooks(&fb))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	p, err := riffle.NewProducer(cl, riffle.WithPartitioner(riffle.ManualPartitioner()), riffle.MaxBatchBytes(16<<10))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	value := make([]byte, 1024)
	for range 2000 {
		p.Produce(ctx, &riffle.Record{Topic: "t", Value: value}, nil)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	r := ranges.NewReader(cl)
	defer r.Close()
	// The first read of a topic learns its record size; the later ones
	// are sized from it.
	for _, low := range []int64{0, 500, 1000, 1500} {
		before := fb.n.Load()
		offs, err := collect(t, r, ranges.Range{Topic: "t", Partition: 0, Low: low, High: low + 20})
		if err != nil || len(offs) != 20 {
			t.Fatalf("[%d, %d): %d records, %v", low, low+20, len(offs), err)
		}
		// 20 KiB of records, at most two 16 KiB batches around them,
		// and the margin: far below the partition's 2 MiB.
		if got := fb.n.Load() - before; low > 0 && got > 128<<10 {
			t.Fatalf("reading 20 records at %d read %d bytes of fetch responses", low, got)
		}
	}
}

// Headers come through as written (riffle.Header is its own type; the
// decoded ones are viewed as it without copying).
func TestReadHeaders(t *testing.T) {
	_, cl := setup(t, rifftest.Topic("t", 1))
	p, err := riffle.NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	want := []riffle.Header{{Key: "a", Value: []byte("1")}, {Key: "null", Value: nil}, {Key: "", Value: []byte{}}}
	if err := p.ProduceSync(ctx, &riffle.Record{Topic: "t", Value: []byte("v"), Headers: want}, &riffle.Record{Topic: "t"}); err != nil {
		t.Fatal(err)
	}
	p.Close(ctx)
	var got [][]riffle.Header
	err = ranges.ReadRange(ctx, cl, ranges.Range{Topic: "t", Low: 0, High: 2}, func(r *riffle.Record) error {
		got = append(got, r.Headers)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(got[1]) != 0 || fmt.Sprintf("%q", got[0]) != fmt.Sprintf("%q", want) || got[0][1].Value != nil || got[0][2].Value == nil {
		t.Fatalf("headers %q, want %q then none", got, want)
	}
}

// A read_committed plan ends at the last stable offset while a
// transaction is open, so a read_committed Reader reads every range of
// it; a range past the last stable offset fails with an error that says
// so (and still matches ErrBeyondHighWatermark).
func TestPlanReadCommittedOpenTransaction(t *testing.T) {
	_, cl := setup(t, rifftest.Topic("t", 1))
	ctx := testCtx(t)
	produce(t, cl, "t", 0, 10, nil) // 0..9
	p, err := riffle.NewProducer(cl, riffle.TransactionalID("tx"), riffle.WithPartitioner(riffle.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for range 5 { // 10..14, open
		if err := p.ProduceSync(ctx, &riffle.Record{Topic: "t", Value: []byte("tx")}); err != nil {
			t.Fatal(err)
		}
	}
	plan, err := ranges.Plan(ctx, cl, ranges.PlanOptions{MaxRecords: 4, ReadCommitted: true}, "t")
	if err != nil {
		t.Fatal(err)
	}
	if want := "[t[0] [0, 4) t[0] [4, 8) t[0] [8, 10)]"; fmt.Sprint(plan) != want {
		t.Fatalf("read_committed plan %v, want %s (up to the last stable offset)", plan, want)
	}
	r := ranges.NewReader(cl, ranges.ReadCommitted())
	defer r.Close()
	n := 0
	for _, rg := range plan {
		offs, err := collect(t, r, rg)
		if err != nil {
			t.Fatalf("read_committed read of %v: %v", rg, err)
		}
		n += len(offs)
	}
	if n != 10 {
		t.Errorf("read %d records of the read_committed plan, want 10", n)
	}
	plan, err = ranges.Plan(ctx, cl, ranges.PlanOptions{}, "t")
	if err != nil || fmt.Sprint(plan) != "[t[0] [0, 15)]" {
		t.Fatalf("read_uncommitted plan %v, %v; want up to the high watermark 15", plan, err)
	}
	_, err = collect(t, r, plan[0])
	if !errors.Is(err, ranges.ErrBeyondLastStable) || !errors.Is(err, ranges.ErrBeyondHighWatermark) {
		t.Fatalf("read_committed read past the last stable offset: %v; want ErrBeyondLastStable", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "last stable offset") || !strings.Contains(msg, "available up to 10") || strings.Contains(msg, "beyond the high watermark") {
		t.Errorf("error %q: want it to name the last stable offset, 10", msg)
	}
}
