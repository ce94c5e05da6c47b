// Package ranges reads exact offset ranges [Low, High) of Kafka partitions,
// for batch and stream engines that split a topic into tasks (the streamz
// pattern): plan ranges from the watermarks, hand them to workers as plain
// values, and let each worker read its ranges through one long-lived Reader
// that shares the client's connections.
//
// A Reader holds no goroutines and dials nothing of its own: every read
// uses the client's per-broker read connection (separate from the
// consumer's fetch connection, so long polls never delay it), and any
// number of reads may run at once on one Reader.
//
// Transactional topics: a Reader with ReadCommitted reads up to a
// partition's last stable offset (the first offset of the oldest open
// transaction, or the high watermark when none is open), so plan its
// ranges with PlanOptions.ReadCommitted (or a Planner with ReadCommitted):
// a plan up to the high watermark has ranges such a Reader cannot finish
// while a transaction is open (ErrBeyondLastStable, or a wait with
// WaitForData). The last stable offset comes from ListOffsets at
// isolation level read_committed; Kafka and kfake (the in-process
// cluster the tests run on) answer it alike, and a transaction's marker
// counts below it once the transaction ends.
package ranges

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/internal/batch"
	"github.com/riffle-go/riffle/internal/clientinternal"
	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/fetch"
	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Range is the half-open offset range [Low, High) of one partition. It is a
// plain value (JSON-serializable) so it can travel to other processes.
type Range struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Low       int64  `json:"low"`
	High      int64  `json:"high"`
}

// Len is the number of offsets the range spans (records may be fewer:
// compaction and transaction markers leave gaps).
func (r Range) Len() int64 { return r.High - r.Low }

// String formats the range as topic[partition] [low, high).
func (r Range) String() string {
	return fmt.Sprintf("%s[%d] [%d, %d)", r.Topic, r.Partition, r.Low, r.High)
}

// Errors.
var (
	// ErrBeyondHighWatermark: the range ends past the partition's high
	// watermark and the reader does not wait for data (see WaitForData).
	ErrBeyondHighWatermark = errors.New("ranges: range ends beyond the high watermark")
	// ErrBeyondLastStable: under ReadCommitted, the range ends past the
	// partition's last stable offset (an open transaction holds reads
	// back at its first record) and the reader does not wait for data.
	// It matches ErrBeyondHighWatermark too: the end of what such a
	// reader may read. Plan with PlanOptions.ReadCommitted plans no
	// range past it.
	ErrBeyondLastStable error = beyondLastStable{}
	// ErrBelowLogStart: the range starts before the log start offset
	// (those records were deleted).
	ErrBelowLogStart = errors.New("ranges: range starts before the log start offset")
	// ErrReaderClosed: the reader was closed.
	ErrReaderClosed = errors.New("ranges: reader closed")
	// ErrInvalidRange: Low > High or negative offsets.
	ErrInvalidRange = errors.New("ranges: invalid range")
)

type beyondLastStable struct{}

func (beyondLastStable) Error() string {
	return "ranges: range ends beyond the last stable offset"
}

func (beyondLastStable) Is(target error) bool { return target == ErrBeyondHighWatermark }

// Option configures a Reader, a Planner or a Checkpoint; each ignores the
// options that are not about it.
type Option func(*config)

type config struct {
	wait          bool
	readCommitted bool
	maxBytes      int32
	checkCRC      bool
	pollWait      time.Duration
	// Planner and Checkpoint.
	maxRecords int64
	start      riffle.StartOffset
	newStart   riffle.StartOffset // Planner: partitions found after the first round
	untracked  bool               // Planner: its Checkpoint keeps no planned ranges
}

func newConfig(opts []Option) config {
	cfg := config{maxBytes: 4 << 20, checkCRC: true, pollWait: 200 * time.Millisecond, start: riffle.AtEarliest(), newStart: riffle.AtEarliest()}
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

// WaitForData makes a read whose range ends beyond the high watermark wait
// (until its context ends) for the records to be produced, instead of
// failing with ErrBeyondHighWatermark.
func WaitForData() Option { return func(c *config) { c.wait = true } }

// ReadCommitted makes a Reader read only committed transactional records
// (up to the last stable offset), and a Planner plan only up to the last
// stable offset (ListOffsets at isolation level read_committed), so an open
// transaction holds planning back where it began.
func ReadCommitted() Option { return func(c *config) { c.readCommitted = true } }

// FetchBytes sets the most bytes asked for per fetch (default 4 MiB). A
// read asks for what its range still needs, estimated from the record
// sizes the Reader has seen on the topic, up to this.
func FetchBytes(n int32) Option { return func(c *config) { c.maxBytes = n } }

// Reader reads ranges. It is safe for concurrent use and meant to be kept
// and reused by a worker across many ranges.
type Reader struct {
	cl     *cluster.Cluster
	log    *slog.Logger
	cfg    config
	closed atomic.Bool
	reads  atomic.Int64
	sizes  sync.Map // topic -> *atomic.Int64: wire bytes per offset, learned

	// Follower fetching (KIP-392), with the client's Rack: the leader
	// may name a replica in the client's rack to read a partition from,
	// for MetadataMaxAge (the consumer's rules, fetch.ReadReplica).
	rack       string
	replicaTTL time.Duration
	replicas   sync.Map // riffle.TopicPartition -> *partReplica
}

// partReplica is a partition's preferred read replica, shared by the
// Reader's reads of the partition.
type partReplica struct {
	mu sync.Mutex
	rr fetch.ReadReplica
}

// NewReader returns a reader using the client's connections. With the
// client's Rack set, it reads a partition from the replica its leader
// names in that rack (follower fetching, KIP-392), as the consumer does:
// the preference is shared by the Reader's reads of the partition and
// holds for the client's MetadataMaxAge. When that replica fails (a
// connection error, or an error saying it cannot serve the offset), the
// read goes on at the leader, asked without the rack so that it serves
// the records itself.
func NewReader(client *riffle.Client, opts ...Option) *Reader {
	cfg := newConfig(opts)
	cl, log := clientinternal.Access(client)
	rack, ttl := clientinternal.ReadConfig(client)
	return &Reader{cl: cl, log: log, cfg: cfg, rack: rack, replicaTTL: ttl}
}

// replica returns rg's partition's preferred read replica state.
func (r *Reader) replica(rg Range) *partReplica {
	tp := riffle.TopicPartition{Topic: rg.Topic, Partition: rg.Partition}
	if v, ok := r.replicas.Load(tp); ok {
		return v.(*partReplica)
	}
	v, _ := r.replicas.LoadOrStore(tp, new(partReplica))
	return v.(*partReplica)
}

// target is the node to read the partition from: its preferred read
// replica while that is valid for the metadata (see fetch.ReadReplica),
// else its leader.
func (pr *partReplica) target(snap *cluster.Snapshot, pm cluster.PartitionMeta, now time.Time) int32 {
	pl := fetch.Placement{Leader: pm.Leader, LeaderEpoch: pm.LeaderEpoch, Replicas: pm.Replicas, Offline: pm.Offline,
		Known: func(n int32) bool { _, ok := snap.Brokers[n]; return ok }}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.rr.Target(pl, now)
}

func (pr *partReplica) named(node int32, pm cluster.PartitionMeta, now time.Time, ttl time.Duration) bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.rr.Named(node, pm.Leader, pm.LeaderEpoch, now, ttl)
}

func (pr *partReplica) failed(node int32) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.rr.Failed(node)
}

// Close marks the reader closed; reads in progress finish, later ones fail
// with ErrReaderClosed. The Reader owns no goroutines or connections.
func (r *Reader) Close() { r.closed.Store(true) }

// Read calls fn for every record with Low <= offset < High, in offset
// order, then returns nil. Gaps (compaction, transaction markers, aborted
// records under ReadCommitted) are skipped; the read stops at High even
// if no record has offset High-1. fn's error stops the read and is
// returned. The *Record passed to fn is reused for the next call: copy the
// struct to keep it (its byte slices alias the fetch buffer and may be
// kept, at the cost of keeping that response in memory).
func (r *Reader) Read(ctx context.Context, rg Range, fn func(*riffle.Record) error) error {
	if r.closed.Load() {
		return ErrReaderClosed
	}
	if rg.Low < 0 || rg.High < rg.Low || rg.Topic == "" {
		return fmt.Errorf("%w: %s", ErrInvalidRange, rg)
	}
	r.reads.Add(1)
	offset := rg.Low
	opts := fetch.DecodeOptions{ReadCommitted: r.cfg.readCommitted, Batch: batch.DecodeOptions{SkipCRC: !r.cfg.checkCRC}, End: rg.High}
	var failures int
	var rec riffle.Record
	var sink fetch.SliceSink // reused by every fetch of this read
	est := r.estimate(rg.Topic)
	// With a rack, the leader may name a replica (answering with no
	// records); once this read saw that replica fail, it asks the leader
	// without its rack, so the leader serves it.
	rack := r.rack
	var pr *partReplica
	if rack != "" {
		pr = r.replica(rg)
	}
	// leaveReplica ends follower fetching for the rest of this read,
	// clearing the shared preference for node (-1: none).
	leaveReplica := func(node int32) {
		if node >= 0 {
			pr.failed(node)
		}
		pr, rack = nil, ""
	}
	followed := false // the last fetch went to the leader, which named a replica
	for offset < rg.High {
		if err := ctx.Err(); err != nil {
			return err
		}
		pm, err := r.cl.Leader(ctx, rg.Topic, rg.Partition)
		if err != nil {
			return err
		}
		node := pm.Leader
		if pr != nil {
			node = pr.target(r.cl.Snapshot(), pm, time.Now())
			if followed && node == pm.Leader {
				// The replica the leader just named is not usable
				// here (the metadata does not list it, or lists it
				// offline): asking again would loop.
				leaveReplica(-1)
			}
		}
		followed = false
		fromReplica := node != pm.Leader
		resp, err := r.fetchOnce(ctx, node, rack, rg, offset, 0, r.fetchSize(est, rg.High-offset))
		if err != nil {
			if fromReplica && ctx.Err() == nil {
				// Back to the leader, for this read and the next.
				leaveReplica(node)
				continue
			}
			if !errs.IsRetriable(err) {
				return err
			}
			failures++
			if err := r.pause(ctx, failures); err != nil {
				return err
			}
			continue
		}
		clear(sink.Records)
		sink.Records = sink.Records[:0]
		res := fetch.DecodePartitionTo(resp, offset, opts, &sink)
		res.Records = sink.Records
		learn(est, res.Bytes, res.NextOffset-offset)
		if pr != nil && res.Err == nil && res.PreferredReplica >= 0 && !fromReplica {
			pr.named(res.PreferredReplica, pm, time.Now(), r.replicaTTL)
			if res.PreferredReplica != pm.Leader && len(res.Records) == 0 {
				// The leader named a replica instead of answering
				// (perhaps one another read already follows): ask it.
				followed = true
				continue
			}
		}
		if res.Err != nil {
			var ke *kafkaerr.Error
			switch {
			case fromReplica && errors.As(res.Err, &ke) && fetch.ReplicaError(ke.Code) && len(res.Records) == 0:
				// The replica cannot serve the offset (not caught up,
				// not a replica any more, ...): the leader decides.
				leaveReplica(node)
				continue
			case errors.As(res.Err, &ke) && ke.Code == kafkaerr.OffsetOutOfRange:
				if res.LogStart > offset {
					return fmt.Errorf("%w: %s, log starts at %d", ErrBelowLogStart, rg, res.LogStart)
				}
				if err := r.beyond(ctx, rg, res, &failures); err != nil {
					return err
				}
				continue
			case errors.As(res.Err, &ke) && ke.Retriable:
				r.cl.TriggerMetadata()
				failures++
				if err := r.pause(ctx, failures); err != nil {
					return err
				}
				// Records before the error are still valid below.
			default:
				if len(res.Records) == 0 {
					return fmt.Errorf("%s at offset %d: %w", rg, offset, res.Err)
				}
			}
		}
		for i := range res.Records {
			br := &res.Records[i]
			if br.Offset < offset {
				continue
			}
			if br.Offset >= rg.High {
				return nil
			}
			// One Record is reused for every call (see Read's doc).
			rec = riffle.Record{
				Topic: rg.Topic, Partition: rg.Partition, Key: br.Key, Value: br.Value,
				Headers: headers(br.Headers), Timestamp: time.UnixMilli(br.Timestamp), Offset: br.Offset, LeaderEpoch: br.LeaderEpoch,
			}
			if err := fn(&rec); err != nil {
				return err
			}
		}
		if res.Err != nil && len(res.Records) > 0 && res.NextOffset == offset {
			return fmt.Errorf("%s at offset %d: %w", rg, offset, res.Err)
		}
		if res.NextOffset > offset {
			offset = res.NextOffset
			failures = 0
			continue
		}
		if fromReplica {
			// A replica may lag the leader: only the leader says
			// where the data ends.
			leaveReplica(node)
			continue
		}
		// No progress: nothing at or after offset below the high
		// watermark (or the last stable offset).
		if err := r.beyond(ctx, rg, res, &failures); err != nil {
			return err
		}
	}
	return nil
}

// beyond handles a read that reached the end of the available data before
// High: fail or wait for more.
func (r *Reader) beyond(ctx context.Context, rg Range, res fetch.Partition, failures *int) error {
	if !r.cfg.wait {
		if r.cfg.readCommitted && res.LastStable >= 0 {
			return fmt.Errorf("%w: %s, available up to %d (the high watermark is %d: a transaction is open at the last stable offset)",
				ErrBeyondLastStable, rg, res.LastStable, res.HighWatermark)
		}
		return fmt.Errorf("%w: %s, available up to %d", ErrBeyondHighWatermark, rg, res.HighWatermark)
	}
	*failures = 0
	t := time.NewTimer(r.cfg.pollWait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Reader) pause(ctx context.Context, failures int) error {
	if failures > 20 {
		return fmt.Errorf("ranges: giving up after %d retriable failures", failures)
	}
	t := time.NewTimer(time.Duration(min(failures, 10)) * 50 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// A read sizes each fetch from what its range still needs: offsets left
// times the wire bytes per offset seen so far on the topic (so a task of
// 100 small records does not pull 4 MiB from the broker and decode it),
// plus a margin, within [minFetch, FetchBytes]. A topic never read yet
// starts from a guess of initialBytesPerOffset; too small a guess costs
// one more fetch, and the broker always returns at least one whole batch.
const (
	minFetch              = 16 << 10
	initialBytesPerOffset = 1 << 10
)

// estimate returns the topic's learned bytes per offset.
func (r *Reader) estimate(topic string) *atomic.Int64 {
	if v, ok := r.sizes.Load(topic); ok {
		return v.(*atomic.Int64)
	}
	est := new(atomic.Int64)
	est.Store(initialBytesPerOffset)
	v, _ := r.sizes.LoadOrStore(topic, est)
	return v.(*atomic.Int64)
}

// learn folds one fetch (bytes received covering offsets) into est, half
// old and half new so one odd fetch (a trailing partial batch, a gap of
// compacted offsets) does not swing it far.
func learn(est *atomic.Int64, bytes int, offsets int64) {
	if offsets <= 0 || bytes <= 0 {
		return
	}
	per := max(int64(bytes)/offsets, 1)
	est.Store((est.Load() + per + 1) / 2)
}

// fetchSize is how many bytes to ask for to read left more offsets.
func (r *Reader) fetchSize(est *atomic.Int64, left int64) int32 {
	want := left*est.Load() + left*est.Load()/8 + minFetch // an eighth more, and room for one batch's overhead
	if left > int64(r.cfg.maxBytes) || want > int64(r.cfg.maxBytes) || want < 0 {
		return r.cfg.maxBytes
	}
	return int32(max(want, minFetch))
}

// fetchOnce fetches one partition at offset on node's read connection (the
// leader's or the preferred read replica's), without a fetch session
// (reads are short-lived), asking for up to maxBytes.
func (r *Reader) fetchOnce(ctx context.Context, node int32, rack string, rg Range, offset int64, wait time.Duration, maxBytes int32) (*kmsg.FetchResponseTopicPartition, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(wait.Milliseconds())
	req.MinBytes = 1
	req.MaxBytes = maxBytes
	req.SessionEpoch = -1
	req.Rack = rack // v11+: the leader may name a replica in this rack
	if r.cfg.readCommitted {
		req.IsolationLevel = 1
	}
	t := kmsg.NewFetchRequestTopic()
	t.Topic = rg.Topic
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition = rg.Partition
	p.FetchOffset = offset
	p.PartitionMaxBytes = maxBytes
	p.CurrentLeaderEpoch = -1
	p.LogStartOffset = -1
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp, err := r.cl.Request(ctx, node, cluster.ClassRead, req)
	if err != nil {
		return nil, err
	}
	fr := resp.(*kmsg.FetchResponse)
	if fr.ErrorCode != 0 {
		return nil, kafkaerr.ForCode(fr.ErrorCode)
	}
	for i := range fr.Topics {
		for j := range fr.Topics[i].Partitions {
			rp := &fr.Topics[i].Partitions[j]
			if fr.Topics[i].Topic == rg.Topic && rp.Partition == rg.Partition {
				return rp, nil
			}
		}
	}
	return nil, fmt.Errorf("%w: fetch response lacks %s[%d]", riffle.ErrMalformedResponse, rg.Topic, rg.Partition)
}

// headers views decoded headers as riffle.Headers, an identical struct,
// without copying (the pointer conversion compiles only while they are).
func headers(hs []batch.Header) []riffle.Header {
	return unsafe.Slice((*riffle.Header)(unsafe.SliceData(hs)), len(hs))
}

// ReadRange reads one range with a fresh Reader; prefer keeping a Reader
// for many ranges.
func ReadRange(ctx context.Context, client *riffle.Client, rg Range, fn func(*riffle.Record) error, opts ...Option) error {
	return NewReader(client, opts...).Read(ctx, rg, fn)
}

// PlanOptions bounds the ranges Plan makes.
type PlanOptions struct {
	// MaxRecords is the most offsets per range. Zero means no limit: one
	// range per partition, from its log start to its end.
	MaxRecords int64
	// Partitions restricts planning to these partitions (all if empty).
	Partitions []int32
	// ReadCommitted plans up to the last stable offset instead of the
	// high watermark (ListOffsets at isolation level read_committed), as
	// a Reader with the ReadCommitted option reads: while a transaction
	// is open, the plan ends where it began. Without it, such a Reader
	// fails the ranges past the last stable offset with
	// ErrBeyondLastStable.
	ReadCommitted bool
}

// Plan splits the topics' partitions, from the log start offset to the
// high watermark as of now (the last stable offset with ReadCommitted),
// into ranges of at most MaxRecords offsets (the whole partition when
// MaxRecords is 0), ordered by topic, partition and offset. Empty
// partitions yield none.
func Plan(ctx context.Context, client *riffle.Client, opts PlanOptions, topics ...string) ([]Range, error) {
	if opts.MaxRecords < 0 {
		return nil, fmt.Errorf("%w: MaxRecords must not be negative (0: no limit)", riffle.ErrInvalidConfig)
	}
	step := opts.MaxRecords
	if step == 0 {
		step = math.MaxInt64
	}
	cl, _ := clientinternal.Access(client)
	lows, err := listOffsets(ctx, cl, topics, riffle.OffsetEarliest, false)
	if err != nil {
		return nil, err
	}
	ends, err := listOffsets(ctx, cl, topics, riffle.OffsetLatest, opts.ReadCommitted)
	if err != nil {
		return nil, err
	}
	want := map[int32]bool{}
	for _, p := range opts.Partitions {
		want[p] = true
	}
	var out []Range
	for tp, end := range ends {
		if len(want) > 0 && !want[tp.Partition] {
			continue
		}
		for low := lows[tp]; low < end; {
			high := end
			if end-low > step {
				high = low + step
			}
			out = append(out, Range{Topic: tp.Topic, Partition: tp.Partition, Low: low, High: high})
			low = high
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.Partition != b.Partition {
			return a.Partition < b.Partition
		}
		return a.Low < b.Low
	})
	return out, nil
}
