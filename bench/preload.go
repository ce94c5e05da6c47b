//go:build unix

package main

// Shared by the consuming benchmarks (consume, slowpartition, ranges): a
// kfake broker in a child process preloaded with records produced by Riffle
// before anything is timed, and a tally that checks what a client consumed,
// offset by offset.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// preloaded is a kfake-server child process holding a topic whose
// partitions have exactly the records asked for, from offset 0.
type preloaded struct {
	srv       *kfakeServer
	addr      string
	topic     string
	perPart   []int64 // records (= high watermark) per partition
	took      time.Duration
	brokerCPU time.Duration // the broker's CPU during the preload
	layout    string        // how the records are batched, for the header
}

// startPreloaded starts a broker process that stores records (no
// BlackholeProduce) with one topic of len(perPart) partitions, and
// produces perPart[p] records of size bytes to partition p with an
// idempotent Riffle producer (manual partitioning, 5 ms linger, codec
// none, lz4 or zstd). It then checks that every partition's high watermark is
// exactly what was produced.
func startPreloaded(ctx context.Context, topic string, perPart []int64, size int, codec string) (*preloaded, error) {
	srv, err := startKfakeServer(ctx, topic, len(perPart), false)
	if err != nil {
		return nil, err
	}
	pl := &preloaded{srv: srv, addr: srv.addr, topic: topic, perPart: perPart}
	cpu0, _ := procCPU(srv.cmd.Process.Pid)
	start := time.Now()
	if err := preloadRecords(ctx, srv.addr, topic, perPart, size, codec); err != nil {
		srv.stop()
		return nil, fmt.Errorf("preloading: %w", err)
	}
	pl.took = time.Since(start)
	if cpu1, ok := procCPU(srv.cmd.Process.Pid); ok {
		pl.brokerCPU = cpu1 - cpu0
	}
	hw, err := highWatermarks(ctx, srv.addr, topic, len(perPart))
	if err != nil {
		srv.stop()
		return nil, err
	}
	for p, want := range perPart {
		if hw[p] != want {
			srv.stop()
			return nil, fmt.Errorf("after preloading, partition %d has high watermark %d, want %d", p, hw[p], want)
		}
	}
	pl.layout, err = batchLayout(ctx, srv.addr, topic)
	if err != nil {
		srv.stop()
		return nil, err
	}
	return pl, nil
}

// batchLayout describes how the preloaded records are batched: the
// batches and records in the first 1 MiB of partition 0, as a consumer's
// first fetch of it (at the usual 1 MiB partition limit) gets them.
func batchLayout(ctx context.Context, addr, topic string) (string, error) {
	// Fetch v13 names topics by ID; capping versions at Kafka 2.8's keeps
	// v12, which names them, as this request does.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MaxVersions(kversion.V2_8_0()))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxBytes = 1 << 20
	req.MinBytes = 1
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rp.LogStartOffset = -1
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return "", fmt.Errorf("fetching partition 0 to see its batches: %w", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return "", errors.New("fetching partition 0 to see its batches: unexpected response shape")
	}
	if err := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); err != nil {
		return "", fmt.Errorf("fetching partition 0 to see its batches: %w", err)
	}
	data := resp.Topics[0].Partitions[0].RecordBatches
	size := len(data)
	batches, records := 0, 0
	for len(data) >= 61 {
		n := int(int32(binary.BigEndian.Uint32(data[8:12]))) + 12 // Length counts what follows it
		if n < 61 || n > len(data) {
			break // a partial batch at the end of the response
		}
		batches++
		records += int(int32(binary.BigEndian.Uint32(data[57:61])))
		data = data[n:]
	}
	if batches == 0 {
		return "", fmt.Errorf("fetching partition 0 to see its batches: no complete batch in %d bytes", size)
	}
	return fmt.Sprintf("the first 1 MiB fetch of partition 0 holds %d batches of %d records in all (%.0f a batch, %d bytes)",
		batches, records, float64(records)/float64(batches), size), nil
}

func (pl *preloaded) total() int64 {
	var n int64
	for _, c := range pl.perPart {
		n += c
	}
	return n
}

// brokerCPUNow is the broker's CPU time so far (user+system), from
// /proc; ok is false where that is not available.
func (pl *preloaded) brokerCPUNow() (time.Duration, bool) {
	return procCPU(pl.srv.cmd.Process.Pid)
}

func (pl *preloaded) stop() {
	if _, err := pl.srv.stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the broker: %v\n", err)
	}
}

func preloadRecords(ctx context.Context, addr, topic string, perPart []int64, size int, codec string) error {
	c, err := riffleCodec(codec)
	if err != nil {
		return err
	}
	cl, err := riffle.NewClient(riffle.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	p, err := riffle.NewProducer(cl,
		riffle.WithPartitioner(riffle.ManualPartitioner()),
		riffle.WithCompression(c),
		riffle.Linger(produceLinger))
	if err != nil {
		return err
	}
	var total int64
	for _, n := range perPart {
		total += n
	}
	values := newValuePool(size, min(10007, max(1, (16<<20)/size)))
	var counts produceCounts
	cb := func(_ *riffle.Record, err error) { counts.done(err) }
	// Round-robin over the partitions that still need records, so every
	// partition's batches look alike.
	left := append([]int64(nil), perPart...)
	for i := int64(0); i < total; {
		for part := range left {
			if left[part] == 0 {
				continue
			}
			left[part]--
			p.Produce(ctx, &riffle.Record{Topic: topic, Partition: int32(part), Value: values.at(int(i))}, cb)
			i++
		}
	}
	ferr := p.Flush(ctx)
	cerr := p.Close(ctx)
	if err := errors.Join(ferr, cerr); err != nil {
		return err
	}
	if f := counts.failed.Load(); f > 0 {
		return fmt.Errorf("%d records failed, first: %s", f, *counts.firstErr.Load())
	}
	if ok := counts.ok.Load(); ok != total {
		return fmt.Errorf("%d of %d records acknowledged", ok, total)
	}
	return nil
}

// highWatermarks lists the partitions' high watermarks with a kgo client
// (an independent check of what Riffle's producer wrote).
func highWatermarks(ctx context.Context, addr, topic string, partitions int) ([]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = int32(p)
		rp.Timestamp = -1 // latest
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("listing offsets: %w", err)
	}
	out := make([]int64, partitions)
	seen := 0
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("listing offsets of %s[%d]: %w", t.Topic, p.Partition, err)
			}
			if p.Partition >= 0 && int(p.Partition) < partitions {
				out[p.Partition] = p.Offset
				seen++
			}
		}
	}
	if seen != partitions {
		return nil, fmt.Errorf("listing offsets: %d partitions answered, want %d", seen, partitions)
	}
	return out, nil
}

// procCPU reads a process's user+system CPU time from /proc/<pid>/stat
// (Linux). ok is false elsewhere.
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces;
	// fields are counted after its closing parenthesis.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const ticks = 100 // USER_HZ, 100 on every Linux this runs on
	return time.Duration(ut+st) * time.Second / ticks, true
}

// tally checks consumption slot by slot (a slot is a partition, or one
// range of one): slot i must receive exactly the offsets [low, high), each
// once, in order. Any other offset (a duplicate, a gap, one out of range)
// is counted as bad. add is safe for concurrent use as long as one slot is
// fed by one goroutine at a time, which every client here guarantees for a
// partition (calls for a slot may move between goroutines, provided the
// client orders them, as every client's own synchronisation does).
type tally struct {
	slots    []tallySlot
	left     atomic.Int64 // slots not complete yet
	all      chan struct{}
	bad      atomic.Int64
	firstBad atomic.Pointer[string]
	doneAt   atomic.Int64 // time.Now().UnixNano() when the last slot completed
	mark     atomic.Int64 // free for a benchmark to note a count in
}

type tallySlot struct {
	low, high int64
	next      atomic.Int64
	done      chan struct{}
	doneAt    atomic.Int64 // time.Now().UnixNano() when the slot completed
	_         [32]byte     // keep slots on separate cache lines
}

// newTally makes a tally of one slot per [low, high) pair.
func newTally(lows, highs []int64) *tally {
	t := &tally{slots: make([]tallySlot, len(lows)), all: make(chan struct{})}
	for i := range lows {
		s := &t.slots[i]
		s.low, s.high = lows[i], highs[i]
		s.next.Store(lows[i])
		s.done = make(chan struct{})
		if s.low == s.high {
			close(s.done)
		} else {
			t.left.Add(1)
		}
	}
	if t.left.Load() == 0 {
		close(t.all)
	}
	return t
}

// partitionTally is a tally of whole partitions from offset 0.
func partitionTally(perPart []int64) *tally {
	return newTally(make([]int64, len(perPart)), perPart)
}

// add records that the client delivered offset off of slot i.
func (t *tally) add(i int, off int64) {
	if i < 0 || i >= len(t.slots) {
		t.fail(fmt.Sprintf("record of unknown slot %d at offset %d", i, off))
		return
	}
	s := &t.slots[i]
	next := s.next.Load()
	if off != next || off >= s.high {
		t.fail(fmt.Sprintf("slot %d: offset %d delivered, expected %d (range [%d, %d))", i, off, next, s.low, s.high))
		return
	}
	s.next.Store(off + 1)
	if off+1 == s.high {
		s.doneAt.Store(time.Now().UnixNano())
		close(s.done)
		if t.left.Add(-1) == 0 {
			t.doneAt.Store(time.Now().UnixNano())
			close(t.all)
		}
	}
}

func (t *tally) fail(msg string) {
	t.bad.Add(1)
	t.firstBad.CompareAndSwap(nil, &msg)
}

// finishedAt is when the last slot completed (zero if none did yet).
func (t *tally) finishedAt() time.Time {
	if n := t.doneAt.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// slotFinishedAt is when slot i completed (zero if it did not yet).
func (t *tally) slotFinishedAt(i int) time.Time {
	if n := t.slots[i].doneAt.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// wait blocks until every slot is complete or ctx ends.
func (t *tally) wait(ctx context.Context) error {
	select {
	case <-t.all:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// finished reports whether every slot is complete (without waiting).
func (t *tally) finished() bool {
	select {
	case <-t.all:
		return true
	default:
		return false
	}
}

// count is the records delivered correctly to slot i.
func (t *tally) count(i int) int64 { return t.slots[i].next.Load() - t.slots[i].low }

// good is the records delivered correctly, over all slots.
func (t *tally) good() int64 {
	var n int64
	for i := range t.slots {
		n += t.count(i)
	}
	return n
}

// complete reports whether every slot got all its records and nothing
// else was delivered.
func (t *tally) complete() bool {
	select {
	case <-t.all:
		return t.bad.Load() == 0
	default:
		return false
	}
}

// short lists the slots that did not get all their records, as
// "slot:got/want", at most n of them.
func (t *tally) short(n int) string {
	var out []string
	for i := range t.slots {
		s := &t.slots[i]
		if got := t.count(i); got != s.high-s.low {
			if len(out) == n {
				out = append(out, "…")
				break
			}
			out = append(out, fmt.Sprintf("%d:%d/%d", i, got, s.high-s.low))
		}
	}
	return strings.Join(out, " ")
}

// problem describes what is wrong with the tally, or "" when complete.
func (t *tally) problem() string {
	var ps []string
	if s := t.short(4); s != "" {
		ps = append(ps, "short slots "+s)
	}
	if b := t.bad.Load(); b > 0 {
		ps = append(ps, fmt.Sprintf("%d bad deliveries, first: %s", b, *t.firstBad.Load()))
	}
	return strings.Join(ps, "; ")
}

// cpuProfileRuns counts the runs profiling has profiled.
var cpuProfileRuns int

// profiling starts a CPU profile into path (path, path.2, path.3, … for
// later runs; `go tool pprof` merges them when given all) and returns
// the function that stops it. An empty path profiles nothing.
func profiling(path string) func() {
	if path == "" {
		return func() {}
	}
	cpuProfileRuns++
	name := path
	if cpuProfileRuns > 1 {
		name = fmt.Sprintf("%s.%d", path, cpuProfileRuns)
	}
	f, err := os.Create(name)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cpuprofile: %v\n", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "cpuprofile: %v\n", err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// writeHeapProfile writes the allocation profile: every allocation since
// the process started, sampled. Take one before the runs of interest and
// one after, and read the difference with
// `go tool pprof -sample_index=alloc_space -diff_base before after`.
func writeHeapProfile(path string) error {
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("allocs").WriteTo(f, 0)
}
