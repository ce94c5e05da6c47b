package riffle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kfake"
)

func TestProduceRoundTrip(t *testing.T) {
	for _, codec := range []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd} {
		t.Run(codec.String(), func(t *testing.T) {
			fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
			cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
			p, err := NewProducer(cl, WithCompression(codec), WithPartitioner(ManualPartitioner()))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			ts := time.UnixMilli(1_700_000_000_123)
			recs := []*Record{
				{Topic: "t", Key: nil, Value: []byte("null key"), Timestamp: ts},
				{Topic: "t", Key: []byte{}, Value: []byte("empty key"), Timestamp: ts},
				{Topic: "t", Key: []byte("k"), Value: nil, Timestamp: ts}, // tombstone
				{Topic: "t", Key: []byte("h"), Value: []byte("headers"), Timestamp: ts.Add(time.Second),
					Headers: []Header{{Key: "a", Value: []byte("1")}, {Key: "b", Value: nil}}},
			}
			if err := p.ProduceSync(ctx, recs...); err != nil {
				t.Fatal(err)
			}
			for i, r := range recs {
				if r.Offset != int64(i) || r.Partition != 0 {
					t.Fatalf("record %d: offset %d partition %d", i, r.Offset, r.Partition)
				}
			}
			if err := p.Close(ctx); err != nil {
				t.Fatal(err)
			}
			got := readPartition(t, ctx, cl, "t", 0)
			if len(got) != len(recs) {
				t.Fatalf("read %d records, want %d", len(got), len(recs))
			}
			for i, r := range recs {
				g := got[i]
				if (g.Key == nil) != (r.Key == nil) || !bytes.Equal(g.Key, r.Key) {
					t.Fatalf("record %d key %q (nil=%v), want %q (nil=%v)", i, g.Key, g.Key == nil, r.Key, r.Key == nil)
				}
				if (g.Value == nil) != (r.Value == nil) || !bytes.Equal(g.Value, r.Value) {
					t.Fatalf("record %d value %q, want %q", i, g.Value, r.Value)
				}
				if g.Timestamp != r.Timestamp.UnixMilli() {
					t.Fatalf("record %d timestamp %d, want %d", i, g.Timestamp, r.Timestamp.UnixMilli())
				}
				if len(g.Headers) != len(r.Headers) {
					t.Fatalf("record %d headers %v", i, g.Headers)
				}
				for j, h := range r.Headers {
					if g.Headers[j].Key != h.Key || !bytes.Equal(g.Headers[j].Value, h.Value) || (g.Headers[j].Value == nil) != (h.Value == nil) {
						t.Fatalf("record %d header %d = %+v, want %+v", i, j, g.Headers[j], h)
					}
				}
			}
		})
	}
}

func TestProduceAsyncManyPartitions(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(6, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	p, err := NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 5000
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		r := &Record{Topic: "t", Key: []byte(fmt.Sprint(i % 50)), Value: []byte(fmt.Sprint(i))}
		p.Produce(ctx, r, func(_ *Record, err error) { errs <- err })
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	total := 0
	for part := int32(0); part < 6; part++ {
		total += len(readPartition(t, ctx, cl, "t", part))
	}
	if total != n {
		t.Fatalf("broker has %d records, want %d", total, n)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestProducerInvalidConfig(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	for name, opts := range map[string][]ProducerOption{
		"acks1 idempotent": {Acknowledgements(AcksLeader)},
		"acks0 idempotent": {Acknowledgements(AcksNone)},
		"6 in flight":      {MaxInflightPerPartition(6)},
		"tiny batch":       {MaxBatchBytes(10)},
		"bad codec":        {WithCompression(Compression(9))},
		"short delivery":   {DeliveryTimeout(time.Second)},
	} {
		if _, err := NewProducer(cl, opts...); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: want ErrInvalidConfig, got %v", name, err)
		}
	}
	for name, opts := range map[string][]ProducerOption{
		"acks1": {DisableIdempotence(), Acknowledgements(AcksLeader)},
		"acks0": {DisableIdempotence(), Acknowledgements(AcksNone)},
	} {
		p, err := NewProducer(cl, opts...)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		p.Close(context.Background())
	}
}

func TestProduceAcksLeaderAndNone(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, acks := range []Acks{AcksLeader, AcksNone} {
		p, err := NewProducer(cl, DisableIdempotence(), Acknowledgements(acks))
		if err != nil {
			t.Fatal(err)
		}
		recs := []*Record{{Topic: "t", Value: []byte("a")}, {Topic: "t", Value: []byte("b")}}
		if err := p.ProduceSync(ctx, recs...); err != nil {
			t.Fatalf("acks=%d: %v", acks, err)
		}
		if acks == AcksNone && recs[0].Offset != -1 {
			t.Fatalf("acks=0 cannot know offsets, got %d", recs[0].Offset)
		}
		if err := p.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// acks=0 gives no answer: wait until the broker has all four.
	deadline := time.Now().Add(30 * time.Second)
	for len(readPartition(t, ctx, cl, "t", 0)) != 4 {
		if time.Now().After(deadline) {
			t.Fatal("records produced with acks=1 and acks=0 are not all in the log")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFlushWaitsForCallbacks: Flush returns only once the callback of every
// record it waited for has returned, both for records that were written
// and for records that failed before joining a batch. Before, the records
// were counted off first, and a Flush could return while a callback had
// not run yet (TestLeaderHintProducer saw "callback fired 0 times" after
// Flush returned nil).
func TestFlushWaitsForCallbacks(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	p, err := NewProducer(cl, WithPartitioner(ManualPartitioner()), Linger(0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	canceled, cancelNow := context.WithCancel(ctx)
	cancelNow()

	for _, tc := range []struct {
		name      string
		partition int32
		wantErr   error
	}{
		{"written", 0, nil},
		{"failed before a batch", 7, ErrInvalidPartition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entered, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			unblock := func() { once.Do(func() { close(release) }) }
			defer unblock() // a failing test must not leave the callback blocked
			var got error
			fired := make(chan struct{})
			go p.Produce(ctx, &Record{Topic: "t", Partition: tc.partition, Value: []byte("v")}, func(_ *Record, err error) {
				got = err
				close(entered)
				<-release
				close(fired)
			})
			<-entered
			// The callback runs and has not returned: a Flush must
			// still be waiting for it, so with a done context it fails.
			if err := p.Flush(canceled); !errors.Is(err, context.Canceled) {
				t.Fatalf("Flush returned %v while a callback was running, want context.Canceled", err)
			}
			unblock()
			if err := p.Flush(ctx); err != nil {
				t.Fatalf("Flush after the callback returned: %v", err)
			}
			select {
			case <-fired:
			default:
				t.Fatal("Flush returned before the callback did")
			}
			if !errors.Is(got, tc.wantErr) && got != tc.wantErr {
				t.Fatalf("callback got %v, want %v", got, tc.wantErr)
			}
		})
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// MaxBufferedBytes bounds the memory the producer holds, not only the
// payload: a buffer of small records counts each record's encoding and the
// Record itself too. Counting the payload alone, a 64 KiB buffer admitted
// 655 records of 100 value bytes (about 250 KiB held).
func TestBufferCountsRecordMemory(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	const buf = 64 << 10
	// One batch can hold the whole buffer and lingers: nothing is sent,
	// so no acknowledgement frees room while the buffer fills.
	p, err := NewProducer(cl, MaxBufferedBytes(buf), MaxBatchBytes(buf), Linger(time.Minute), FailFast())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var mu sync.Mutex
	var admitted, written int
	var full bool
	for !full {
		p.Produce(ctx, &Record{Topic: "t", Value: make([]byte, 100)}, func(_ *Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, ErrBufferFull):
				full = true
			case err != nil:
				t.Errorf("record failed: %v", err)
			default:
				written++
			}
		})
		mu.Lock()
		if !full {
			admitted++
		}
		done := full
		mu.Unlock()
		if done {
			break
		}
	}
	st := p.Stats()
	if st.BufferedRecords != int64(admitted) || st.BufferedBytes > buf {
		t.Fatalf("stats %+v after %d records admitted", st, admitted)
	}
	// Each record holds its 100 value bytes, its encoding (over 100
	// bytes) and its Record.
	perRecord := 2*100 + int(unsafe.Sizeof(Record{}))
	if admitted*perRecord > buf || st.BufferedBytes < int64(admitted*perRecord) {
		t.Fatalf("%d records admitted into %d bytes (%d counted): at least %d bytes each", admitted, buf, st.BufferedBytes, perRecord)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if written != admitted {
		t.Fatalf("%d of %d admitted records written", written, admitted)
	}
	if st := p.Stats(); st.BufferedBytes != 0 || st.BufferedRecords != 0 {
		t.Fatalf("stats after Close: %+v", st)
	}
}
