package riffle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/riffle-go/riffle/internal/batch"
	"github.com/riffle-go/riffle/internal/fetch"
	"github.com/riffle-go/riffle/internal/kafkaerr"
)

type cpartState int8

const (
	stateNeedOffset cpartState = iota // start offset to resolve
	stateFetching                     // fetching and dispatching
	stateFailed                       // stopped by an error until Resume
	stateRevoked                      // unassigned; kept only for waiters
)

// cpart is one assigned partition. Its epoch is the ownership fence: it
// changes whenever the partition's fetcher changes, its offset is reset or
// it is revoked, and a fetch result is applied only if it was issued under
// the current epoch and offset. Its gen fences dispatch: it changes only on
// reset and revoke, so a leader move never disturbs a running handler. At
// most one runner holds it (running), so records are handled in offset
// order by one goroutine at a time.
type cpart struct {
	cs    *Consumer
	tp    TopicPartition
	start StartOffset

	ctx    context.Context // handler context; cancelled on loss or close
	cancel context.CancelFunc

	mu          sync.Mutex
	state       cpartState
	epoch       uint64 // fetch fence: fetcher change, reset, revoke
	gen         uint64 // dispatch fence: reset, revoke (not leader moves)
	fetcher     int32  // node whose fetcher owns the partition, -1 none
	leader      int32  // the leader as of the last metadata pass, -1 unknown
	leaderEpoch int32
	// replica is the preferred read replica a leader named (KIP-392);
	// the coordinator makes fetcher its Target.
	replica     fetch.ReadReplica
	fetchOffset int64
	position    int64 // next offset to hand to the handler
	processed   int64 // offset after the last finished record
	// Leader epochs (KIP-320): of the last finished record (committed with
	// processed), of the last fetched one (the fetch position's, checked
	// against the log after a leader change), and the leader epoch the
	// fetch position was last checked under.
	processedEpoch int32
	fetchedEpoch   int32
	checkedEpoch   int32
	checking       uint64 // the epoch+1 whose position check is out (0: none); see consume_validate.go
	hw             int64
	lso            int64    // last stable offset, -1 unknown
	buf            recQueue // fetched, not yet handed to the handler
	paused         bool
	blocked        bool   // the sink took no more; until its wake
	wakes          uint64 // sink wakes, to catch one that races a refusal
	startAt        int64  // where the current gen began (for the sink)
	// ExactlyOnce: the position of the last committed transaction (or
	// where the partition started), which an abort rewinds to, with the
	// leader epoch of the record before it.
	txnBase      int64
	txnBaseEpoch int32
	meta         string // commit metadata of the assigned committed offset
	// Start offset resolution (consume_start.go): the epoch+1 whose
	// ListOffsets is out (0: none), and when to ask again after a failure.
	resolving    uint64
	resolveAfter time.Time
	resolveFails int
	// waitErr: why the start offset waits (the metadata names the topic
	// or partition unknown), reported once per change and shown in
	// Stats once unknownSince is UnknownTopicWait ago; both cleared once
	// the partition has a leader.
	waitErr      *PartitionError
	unknownSince time.Time
	running      bool
	queued       bool
	fetchErr     *PartitionError // stops the partition once buf drains
	err          *PartitionError
	// handlerErr: err is the handler's (reported to PartitionHooks).
	handlerErr bool
	idleCh     chan struct{} // closed when a revoked partition stops running

	// The records of the chunk a runner took from buf that it has not
	// handed to the handler (or the sink) yet, and their size: they are
	// still buffered for Stats. Without them, between the take and the
	// hand-over, Stats showed nothing buffered and Position == Processed
	// while fetchOffset was already past the chunk, as if every record
	// fetched had been handled.
	inHand      int
	inHandBytes int64

	// Hook events (consume_lag.go). hookMu serialises the partition's
	// events to the FetchBatchHooks and PartitionHooks, so that none
	// follows its PartitionRemoved; it is taken before mu. told and
	// toldErr (guarded by hookMu) are what the PartitionHooks were last
	// told. fetchReports (guarded by mu) counts the fetch responses
	// reported, and refreshMark is its value at the lag refresher's last
	// look: equal, the partition got no fetch response since.
	hookMu       sync.Mutex
	told         partTold
	toldErr      *PartitionError
	fetchReports uint64
	refreshMark  uint64
}

func newCPart(cs *Consumer, a Assignment) *cpart {
	ctx, cancel := context.WithCancel(cs.ctx)
	return &cpart{
		cs: cs, tp: a.TopicPartition, start: a.Start,
		ctx: ctx, cancel: cancel,
		fetcher: -1, leader: -1, leaderEpoch: -1, hw: -1, lso: -1,
		fetchOffset: -1, position: -1, processed: -1, txnBase: -1,
		processedEpoch: -1, fetchedEpoch: -1, checkedEpoch: -1,
	}
}

// fetchWant reports whether the partition should be in fetcher node's
// next request, with what to ask for and under which epoch, and whether it
// has records past its fetch offset as of the last fetch (or may have: the
// high watermark is not known yet). The partition's cap counts the chunk a
// runner holds (taken off the buffer, not yet handed over): with a handler
// stuck on a chunk's first record, refilling the buffer to the cap would
// hold twice the cap.
func (p *cpart) fetchWant(node int32) (w fetch.Want, epoch uint64, behind, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != stateFetching || p.fetcher != node || p.paused || p.fetchErr != nil ||
		p.buf.bytes+p.inHandBytes >= p.cs.cfg.partitionBuffer || p.checking != 0 || p.needsCheckLocked(p.leaderEpoch) {
		return fetch.Want{}, 0, false, false
	}
	w = fetch.Want{
		TP:          fetch.TP{Topic: p.tp.Topic, Partition: p.tp.Partition},
		Offset:      p.fetchOffset,
		LeaderEpoch: p.leaderEpoch,
	}
	return w, p.epoch, p.hw < 0 || p.fetchOffset < p.hw, true
}

// applyFetch applies one partition's fetch result, served by node, issued
// under epoch at offset; stale results are dropped. It returns whether the
// partition's leadership looked wrong (metadata should be refreshed and
// the coordinator re-place it), and whether the partition left node's
// fetcher for another (the coordinator places it: a leader named a
// preferred read replica, KIP-392).
func (p *cpart) applyFetch(node int32, epoch uint64, offset int64, leaderEpoch int32, res fetch.Partition, recs []Record) (moved, replaced bool) {
	if len(p.cs.c.hooks.fetch) == 0 {
		p.mu.Lock()
		moved, replaced, _, _ = p.applyFetchLocked(node, epoch, offset, leaderEpoch, res, recs)
		p.mu.Unlock()
		return moved, replaced
	}
	// hookMu first: a revoke that follows reports PartitionRemoved only
	// once this event is out.
	p.hookMu.Lock()
	defer p.hookMu.Unlock()
	p.mu.Lock()
	moved, replaced, applied, bytes := p.applyFetchLocked(node, epoch, offset, leaderEpoch, res, recs)
	if !applied {
		p.mu.Unlock()
		return moved, replaced
	}
	p.fetchReports++
	e := p.fetchEventLocked(node, res, len(recs), bytes)
	st := p.hookStateLocked()
	p.mu.Unlock()
	p.tellPartitionHooks(st)
	p.cs.fetched(e)
	return moved, replaced
}

// applyFetchLocked is applyFetch under the partition's lock; it also says
// whether the result was applied and the size of its records.
func (p *cpart) applyFetchLocked(node int32, epoch uint64, offset int64, leaderEpoch int32, res fetch.Partition, recs []Record) (moved, replaced, applied bool, bytes int64) {
	if p.epoch != epoch || p.fetchOffset != offset || p.state != stateFetching {
		return false, false, false, 0
	}
	if res.Err == nil && leaderEpoch > p.checkedEpoch {
		// The leader of that epoch served our position: it is
		// consistent with its log.
		p.checkedEpoch = leaderEpoch
	}
	if n := len(recs); n > 0 && recs[n-1].LeaderEpoch >= 0 {
		p.fetchedEpoch = recs[n-1].LeaderEpoch
	}
	if res.NextOffset > p.fetchOffset && res.LastEpoch >= 0 {
		// The batch ending at the new fetch offset, a control batch
		// (a transaction marker) too.
		p.fetchedEpoch = res.LastEpoch
	}
	if res.HighWatermark >= 0 {
		p.hw = res.HighWatermark
	}
	if res.LastStable >= 0 {
		p.lso = res.LastStable
	}
	if len(recs) > 0 {
		seg := make([]*Record, len(recs))
		for i := range recs {
			seg[i] = &recs[i]
			bytes += int64(recs[i].size())
		}
		p.buf.push(seg, bytes)
		p.cs.buffered.Add(bytes)
	}
	if res.NextOffset > p.fetchOffset {
		p.fetchOffset = res.NextOffset
	}
	if res.Err != nil {
		moved = p.fetchFailedLocked(node, offset, res)
	} else if res.PreferredReplica >= 0 && p.replica.Named(res.PreferredReplica, p.leader, leaderEpoch, time.Now(), p.cs.c.cfg.metadataMaxAge) {
		// Records that came with the answer are buffered and
		// fetchOffset is past them: the replica's fetcher goes on from
		// there. The epoch fences whatever node's fetcher still has in
		// flight for the partition.
		p.epoch++
		p.fetcher = -1
		replaced = true
	}
	p.scheduleLocked()
	return moved, replaced, true, bytes
}

// replicaUnreachable handles a failed fetch request to node issued under
// epoch: if node is the partition's preferred read replica, the partition
// goes back to its leader (the coordinator places it) and it returns true.
func (p *cpart) replicaUnreachable(node int32, epoch uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.epoch != epoch || p.fetcher != node || !p.replica.Failed(node) {
		return false
	}
	p.epoch++
	p.fetcher = -1
	return true
}

// fetchFailedLocked handles a partition-level fetch error from node.
func (p *cpart) fetchFailedLocked(node int32, offset int64, res fetch.Partition) (moved bool) {
	var be *batch.BatchError
	var ke *kafkaerr.Error
	switch {
	case errors.As(res.Err, &ke) && fetch.ReplicaError(ke.Code) && p.replica.Failed(node):
		// The preferred read replica cannot serve the offset (it lags,
		// or is no replica any more): back to the leader, from the
		// same offset; the leader decides about out of range.
		p.epoch++
		p.fetcher = -1
		return true
	case errors.As(res.Err, &be):
		// Deliver what came before the corrupt batch, then stop.
		p.fetchErr = &PartitionError{Topic: p.tp.Topic, Partition: p.tp.Partition, Offset: res.NextOffset,
			Err: fmt.Errorf("%w: %w", ErrCorruptBatch, res.Err)}
	case errors.As(res.Err, &ke) && ke.Code == kafkaerr.OffsetOutOfRange:
		switch p.cs.cfg.reset {
		case ResetNone:
			p.fetchErr = &PartitionError{Topic: p.tp.Topic, Partition: p.tp.Partition, Offset: offset,
				Err: fmt.Errorf("%w (log %d..%d): %w", ErrOffsetOutOfRange, res.LogStart, res.HighWatermark, res.Err)}
		case ResetEarliest:
			p.resetLocked(AtEarliest())
		default:
			p.resetLocked(AtLatest())
		}
	case errors.As(res.Err, &ke) && ke.Retriable:
		// NOT_LEADER, UNKNOWN_TOPIC_OR_PARTITION, FENCED_LEADER_EPOCH...:
		// the partition leaves this fetcher until metadata says where.
		p.epoch++
		p.fetcher = -1
		return true
	default:
		p.fetchErr = &PartitionError{Topic: p.tp.Topic, Partition: p.tp.Partition, Offset: offset, Err: res.Err}
	}
	return false
}

// resetLocked restarts the partition at a symbolic offset, dropping what is
// buffered (an out-of-range reset may move backwards).
func (p *cpart) resetLocked(to StartOffset) {
	p.epoch++
	p.gen++
	p.dropBufferLocked()
	p.start = to
	p.resolveAfter, p.resolveFails = time.Time{}, 0
	p.meta = "" // belongs to the committed offset, not to a reset one
	p.blocked = false
	p.state = stateNeedOffset
	p.cs.poke()
}

func (p *cpart) dropBufferLocked() {
	p.cs.buffered.Add(-p.buf.reset())
}

// scheduleLocked puts the partition on the run queue if it has work and no
// runner holds it.
func (p *cpart) scheduleLocked() {
	if p.running || p.queued || p.paused || p.blocked || p.state != stateFetching {
		return
	}
	if p.buf.len() == 0 && p.fetchErr == nil {
		if !p.tailLocked() {
			return
		}
		if p.cs.cfg.sink == nil && p.cs.eos == nil {
			// Nothing to run: every record fetched finished.
			// (Under ExactlyOnce a runner moves past the gap in
			// the open transaction, which commits it.)
			p.position, p.processed = p.fetchOffset, p.fetchOffset
			p.processedEpoch = p.fetchedEpoch
			return
		}
		// The sink learns the gap from an empty offer (offer).
	}
	p.queued = true
	p.cs.runq.push(p)
}

// tailLocked reports whether the fetch offset is past the position with
// nothing buffered and nothing in hand: the offsets in between hold no
// record for the handler (transaction markers, aborted records skipped
// under read_committed, records compacted away). They count as handled
// once every record before them is (a consumer at the end of a
// transactional topic is at its high watermark, and commits it, as the
// Java client commits its position past the markers), so with a handler
// once processed caught up with the position; a sink is told by an offer
// without records (Batch.Next) and decides itself.
func (p *cpart) tailLocked() bool {
	return p.position >= 0 && p.fetchOffset > p.position && p.inHand == 0 && !p.running &&
		(p.cs.cfg.sink != nil || p.processed == p.position)
}

func (p *cpart) setPaused(paused bool) {
	p.mu.Lock()
	p.paused = paused
	if !paused && p.state == stateFailed {
		p.err, p.handlerErr = nil, false
		if p.fetchOffset < 0 {
			// It stopped before its start offset was resolved:
			// resolve it again, rather than fetch from nowhere (an
			// out-of-range answer would apply the reset policy in
			// place of the assigned start).
			p.state = stateNeedOffset
			p.resolveAfter, p.resolveFails = time.Time{}, 0
		} else {
			p.state = stateFetching
		}
	}
	p.scheduleLocked()
	p.mu.Unlock()
	p.syncHooks()
}

// revoke stops the partition: no more dispatch, fetch results fenced,
// buffer dropped. When lost, the handler's context is cancelled as well.
func (p *cpart) revoke(lost bool) {
	p.mu.Lock()
	p.state = stateRevoked
	p.epoch++
	p.gen++
	p.dropBufferLocked()
	p.idleCh = make(chan struct{})
	if !p.running {
		close(p.idleCh)
	}
	p.mu.Unlock()
	p.syncHooks()
	if lost {
		p.cancel()
	}
}

func (p *cpart) cancelHandler() { p.cancel() }

// idle returns a channel closed once no handler runs for the revoked
// partition.
func (p *cpart) idle() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.idleCh
}

func (p *cpart) stats() PartitionStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := PartitionStats{
		TopicPartition: p.tp, Position: p.position, Processed: p.processed, HighWatermark: p.hw, LastStable: p.lso,
		BufferedRecords: p.buf.len() + p.inHand, BufferedBytes: p.buf.bytes + p.inHandBytes, Paused: p.paused, Leader: p.leader,
		ReadReplica: -1,
	}
	if n, ok := p.replica.Node(); ok && p.fetcher == n {
		st.ReadReplica = n
	}
	if p.err != nil {
		st.Err = p.err
	} else if p.waitErr != nil {
		st.Err = p.waitErr
	}
	return st
}
