package riffle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/batch"
	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawRecordBatches returns what the broker sends for a fetch of
// topic/partition from offset: the partition's raw record batches.
func rawRecordBatches(t testing.TB, cl *Client, topic string, partition int32, offset int64) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pm, err := cl.cl.Leader(ctx, topic, partition)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxBytes = 8 << 20
	req.SessionEpoch = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition = partition
	fp.FetchOffset = offset
	fp.PartitionMaxBytes = 8 << 20
	fp.CurrentLeaderEpoch = -1
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	resp, err := cl.cl.Request(ctx, pm.Leader, cluster.ClassOther, req)
	if err != nil {
		t.Fatal(err)
	}
	rp := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if rp.ErrorCode != 0 {
		t.Fatalf("raw fetch: %v", KafkaErrorForCode(rp.ErrorCode))
	}
	return rp.RecordBatches
}

// One fetch answer carries a batch whose CRC does not match: the records
// before it are delivered, then only that partition stops with
// ErrCorruptBatch at the batch's offset; the others are consumed to the
// end. Resume fetches the batch again (intact this time) and goes on.
func TestConsumeCorruptBatch(t *testing.T) {
	const (
		partitions = 4
		perPart    = 50
		firstBatch = 10 // partition 1's corrupt batch starts here
		total1     = 20
	)
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(partitions, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	for _, p := range []int32{0, 2, 3} {
		var recs []*Record
		for i := 0; i < perPart; i++ {
			recs = append(recs, &Record{Topic: "t", Partition: p, Value: []byte(fmt.Sprintf("%d-%d", p, i))})
		}
		produceRecords(t, cl, recs)
	}
	// Partition 1: records 0-19, one batch each (one synchronous produce
	// after the other); the batch holding offset 10 will be corrupted.
	p1, err := NewProducer(cl, WithPartitioner(ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < total1; i++ {
		if err := p1.ProduceSync(context.Background(), &Record{Topic: "t", Partition: 1, Value: []byte(fmt.Sprintf("1-%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p1.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	// The real bytes, with one byte of the records of the batch that
	// starts at offset 10 flipped: its CRC no longer matches. Batches
	// after it stay intact (and must not be delivered before it).
	raw := append([]byte(nil), rawRecordBatches(t, cl, "t", 1, 0)...)
	it := batch.NewIterator(raw, batch.DecodeOptions{})
	start, end := -1, -1
	for {
		pos := it.Pos()
		b, err := it.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if b.BaseOffset == firstBatch {
			start, end = pos, it.Pos()
		}
		if b.LastOffset == total1-1 && end == it.Pos() {
			t.Fatalf("the batch at offset %d is the last one: nothing follows it", firstBatch)
		}
	}
	if start < 0 {
		t.Fatalf("no batch starts at offset %d", firstBatch)
	}
	raw[end-1] ^= 0xff
	if _, err := batch.NewIterator(raw[start:], batch.DecodeOptions{}).Next(); !errors.Is(err, batch.ErrCorrupt) {
		t.Fatalf("flipped batch decodes with %v, want a CRC error", err)
	}

	// Answer the first fetch that asks for partition 1 from offset 0
	// with those bytes; every other fetch goes to the broker. The
	// answer grants no session (id 0), which a broker may always do,
	// and carries nothing for the other partitions, which are simply
	// fetched again.
	tid := fake.TopicInfo("t").TopicID
	var answered atomic.Bool
	fake.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.FetchRequest)
		asks := false
		var id [16]byte // the topic's id: from v13, fetches name topics by id only
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				if (rt.Topic == "t" || rt.TopicID == tid) && rp.Partition == 1 && rp.FetchOffset == 0 {
					asks, id = true, rt.TopicID
				}
			}
		}
		if !asks || answered.Load() {
			fake.KeepControl()
			return nil, nil, false
		}
		answered.Store(true)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.SessionID = 0
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = "t", id
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = 1
		rp.HighWatermark = total1
		rp.LastStableOffset = total1
		rp.LogStartOffset = 0
		rp.RecordBatches = raw
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})

	var (
		log      = newPartLog()
		mu       sync.Mutex
		perrs    []*PartitionError
		atReport = -1
	)
	cs, err := NewConsumer(cl,
		HandleRecord(func(ctx context.Context, r *Record) error {
			if want := fmt.Sprintf("%d-%d", r.Partition, r.Offset); string(r.Value) != want {
				t.Errorf("value %q at %d@%d", r.Value, r.Partition, r.Offset)
			}
			log.add(r)
			return nil
		}),
		OnPartitionError(func(pe *PartitionError) {
			mu.Lock()
			perrs = append(perrs, pe)
			atReport = log.count(1)
			mu.Unlock()
		}))
	if err != nil {
		t.Fatal(err)
	}
	assignAll(t, cs, "t", partitions, AtEarliest())
	waitUntil(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(perrs) > 0 && log.count(0) == perPart && log.count(2) == perPart && log.count(3) == perPart
	}, func() string { return "no corrupt batch error, or other partitions not consumed: " + statsString(cs) })
	if !answered.Load() {
		t.Fatal("the corrupt answer was never sent")
	}
	mu.Lock()
	if len(perrs) != 1 {
		t.Fatalf("%d partition errors: %v", len(perrs), perrs)
	}
	pe := perrs[0]
	mu.Unlock()
	if pe.Topic != "t" || pe.Partition != 1 || pe.Offset != firstBatch || !errors.Is(pe, ErrCorruptBatch) || !errors.Is(pe, batch.ErrCorrupt) {
		t.Fatalf("partition error %+v (%v), want t[1] at %d matching ErrCorruptBatch", pe, pe, firstBatch)
	}
	if atReport != firstBatch {
		t.Fatalf("error reported after %d records of partition 1, want the %d before the corrupt batch", atReport, firstBatch)
	}
	expectRange(t, "partition 1 before resume", log.get(1), 0, firstBatch)
	var st PartitionStats
	for _, ps := range cs.Stats().Partitions {
		if ps.Partition == 1 {
			st = ps
		}
	}
	if st.Err == nil || !errors.Is(st.Err, ErrCorruptBatch) || st.Processed != firstBatch {
		t.Fatalf("stopped partition stats %+v", st)
	}

	cs.Resume(TopicPartition{"t", 1})
	waitUntil(t, 30*time.Second, func() bool { return log.count(1) >= total1 }, func() string {
		return "partition 1 not consumed after resume: " + statsString(cs)
	})
	pos := closeConsumer(t, cs)
	expectRange(t, "partition 1", log.get(1), 0, total1)
	for _, p := range []int32{0, 2, 3} {
		expectRange(t, fmt.Sprintf("partition %d", p), log.get(p), 0, perPart)
	}
	if pos[TopicPartition{"t", 1}] != total1 {
		t.Fatalf("positions %v", pos)
	}
	for _, ps := range cs.Stats().Partitions {
		t.Fatalf("closed consumer still lists %+v", ps)
	}
}
