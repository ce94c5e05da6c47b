package integration_test

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

var codecs = []struct {
	name  string
	codec riffle.Compression
}{
	{"none", riffle.CompressionNone},
	{"gzip", riffle.CompressionGzip},
	{"snappy", riffle.CompressionSnappy},
	{"lz4", riffle.CompressionLZ4},
	{"zstd", riffle.CompressionZstd},
}

// sent is what a produce test wrote, to compare with what it reads back.
func produced(codec string, i int) *riffle.Record {
	r := &riffle.Record{
		Key:   []byte(fmt.Sprintf("key-%d", i%17)),
		Value: bytes.Repeat([]byte(fmt.Sprintf("%s value %d ", codec, i)), 1+i%20),
		Headers: []riffle.Header{
			{Key: "codec", Value: []byte(codec)},
			{Key: "i", Value: []byte(strconv.Itoa(i))},
		},
	}
	switch i % 10 {
	case 0:
		r.Key = nil // null key: spread by the partitioner
	case 1:
		r.Key = []byte{} // empty, not null
	case 2:
		r.Value = nil // null value (a tombstone)
	case 3:
		r.Value = []byte{}
	case 4:
		r.Headers = append(r.Headers, riffle.Header{Key: "null", Value: nil}, riffle.Header{Key: "empty", Value: []byte{}})
	}
	return r
}

func sameBytes(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

// Idempotent acks=all with 5 requests in flight per partition, with every
// codec, headers, null and empty keys and values: every callback once with
// nil, and every record read back as written, in order per partition.
func TestProduceIdempotentEveryCodec(t *testing.T) {
	need(t)
	cl := client(t)
	tp := topic(t, cl, 3, nil)
	const n = 400
	ctx := timeout(t, 2*time.Minute)
	for _, c := range codecs {
		p, err := riffle.NewProducer(cl, riffle.WithCompression(c.codec), riffle.Acknowledgements(riffle.AcksAll),
			riffle.MaxInflightPerPartition(5), riffle.Linger(2*time.Millisecond), riffle.MaxBatchBytes(16<<10))
		if err != nil {
			t.Fatal(err)
		}
		var calls [n]atomic.Int32
		var failed atomic.Int32
		var wg sync.WaitGroup
		for g := range 4 { // several goroutines, each its share of i
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < n; i += 4 {
					r := produced(c.name, i)
					r.Topic = tp
					p.Produce(ctx, r, func(_ *riffle.Record, err error) {
						calls[i].Add(1)
						if err != nil && failed.Add(1) < 5 {
							t.Errorf("%s record %d: %v", c.name, i, err)
						}
					})
				}
			}()
		}
		wg.Wait()
		if err := p.Close(ctx); err != nil {
			t.Fatalf("%s: Close: %v", c.name, err)
		}
		for i := range calls {
			if k := calls[i].Load(); k != 1 {
				t.Errorf("%s record %d: callback called %d times", c.name, i, k)
			}
		}
	}
	got := readAll(t, cl, tp, riffle.ReadUncommitted)
	seen := map[string]int{}
	for part, rs := range got {
		last := map[string]int{} // per codec and goroutine, i must grow
		for _, r := range rs {
			if len(r.Headers) < 2 {
				t.Fatalf("%s[%d]@%d: headers %v", tp, part, r.Offset, r.Headers)
			}
			codec := string(r.Headers[0].Value)
			i, err := strconv.Atoi(string(r.Headers[1].Value))
			if err != nil {
				t.Fatalf("%s[%d]@%d: header i %q", tp, part, r.Offset, r.Headers[1].Value)
			}
			want := produced(codec, i)
			id := fmt.Sprintf("%s/%d", codec, i)
			seen[id]++
			if !sameBytes(r.Key, want.Key) || !sameBytes(r.Value, want.Value) || len(r.Headers) != len(want.Headers) {
				t.Errorf("%s: key %q (nil %v) value %d bytes (nil %v) %d headers; want key %q (nil %v) value %d bytes (nil %v) %d headers",
					id, r.Key, r.Key == nil, len(r.Value), r.Value == nil, len(r.Headers), want.Key, want.Key == nil, len(want.Value), want.Value == nil, len(want.Headers))
				continue
			}
			for h := range want.Headers {
				if r.Headers[h].Key != want.Headers[h].Key || !sameBytes(r.Headers[h].Value, want.Headers[h].Value) {
					t.Errorf("%s: header %d = %v (nil %v), want %v", id, h, r.Headers[h], r.Headers[h].Value == nil, want.Headers[h])
				}
			}
			g := fmt.Sprintf("%s/%d", codec, i%4)
			if prev, ok := last[g]; ok && i <= prev {
				t.Errorf("%s[%d]: %s after %s/%d: out of order", tp, part, id, codec, prev)
			}
			last[g] = i
		}
	}
	for _, c := range codecs {
		for i := range n {
			if k := seen[fmt.Sprintf("%s/%d", c.name, i)]; k != 1 {
				t.Errorf("%s/%d read %d times", c.name, i, k)
			}
		}
	}
}

// A record just under the topic's max.message.bytes is written; one just
// over fails with ErrRecordTooLarge, and the records around it are written.
func TestProduceMaxMessageBytes(t *testing.T) {
	need(t)
	cl := client(t)
	const limit = 64 << 10
	tp := topic(t, cl, 1, map[string]string{"max.message.bytes": strconv.Itoa(limit)})
	ctx := timeout(t, time.Minute)
	p, err := riffle.NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	// A batch of one record adds 61 bytes of batch header and about 20 of
	// record framing to the value.
	under := &riffle.Record{Topic: tp, Value: bytes.Repeat([]byte{'u'}, limit-200)}
	over := &riffle.Record{Topic: tp, Value: bytes.Repeat([]byte{'o'}, limit+1)}
	before := &riffle.Record{Topic: tp, Value: []byte("before")}
	after := &riffle.Record{Topic: tp, Value: []byte("after")}
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i, r := range []*riffle.Record{before, under, over, after} {
		wg.Add(1)
		p.Produce(ctx, r, func(_ *riffle.Record, err error) { errs[i] = err; wg.Done() })
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil || errs[3] != nil {
		t.Fatalf("records around the large one failed: %v", errs)
	}
	if !errors.Is(errs[2], riffle.ErrRecordTooLarge) {
		t.Fatalf("record over max.message.bytes: %v, want ErrRecordTooLarge", errs[2])
	}
	t.Logf("over the limit: %v", errs[2])
	got := values(readAll(t, cl, tp, riffle.ReadUncommitted)[0])
	if len(got) != 3 || got[0] != "before" || len(got[1]) != limit-200 || got[2] != "after" {
		short := make([]string, len(got))
		for i, v := range got {
			short[i] = v[:min(len(v), 10)]
		}
		t.Fatalf("read %d records %q, want before, the one under the limit, after", len(got), short)
	}
}

// Producing to a topic created a moment ago succeeds with the default
// options: its leaders may be unknown for a while
// (UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE) and the producer waits
// through that (UnknownTopicTimeout; defect D1, fixed).
func TestProduceToNewTopic(t *testing.T) {
	need(t)
	cl := client(t)
	for round := range 3 {
		tp := topic(t, cl, 6, nil)
		ctx := timeout(t, time.Minute)
		p, err := riffle.NewProducer(cl, riffle.DeliveryTimeout(45*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var recs []*riffle.Record
		for i := range 60 {
			recs = append(recs, &riffle.Record{Topic: tp, Key: []byte(strconv.Itoa(i)), Value: []byte("v")})
		}
		if err := p.ProduceSync(ctx, recs...); err != nil {
			t.Fatalf("round %d: producing to a topic created a moment ago: %v", round, err)
		}
		if err := p.Close(ctx); err != nil {
			t.Fatal(err)
		}
		total := int64(0)
		for _, o := range endOffsets(t, cl, tp) {
			total += o
		}
		if total != 60 {
			t.Fatalf("round %d: %d records in the topic, want 60", round, total)
		}
	}
}
