package riffle

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riffle-go/riffle/internal/batch"
	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/riffle-go/riffle/internal/conn"
	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/riffle-go/riffle/internal/share"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareRef ties a record to the acquisition a ShareConsumer acknowledges:
// the fetcher of the broker it came from and its key there. The key's id
// fences acknowledgements of an earlier acquisition of the same offset.
type shareRef struct {
	f   *shareFetcher
	key share.Key
	fin uint32 // set (atomically) once Acknowledge gave it a final type
}

type shareTP struct {
	share.TP
	topic string
}

// shareFetcher is one broker's share fetch loop: its share session, the
// records acquired through it and their locks, and the acknowledgements
// waiting to be sent. Only loop touches the session; mu guards the rest,
// which runners and Acknowledge reach.
type shareFetcher struct {
	sc     *ShareConsumer
	node   int32
	wake   chan struct{}
	roomy  chan struct{} // coalesceAt runners became idle (see shareCoalesce)
	placed chan struct{} // the partitions it owns changed (see setOwned)
	owned  atomic.Pointer[[]shareTP]
	lockMs atomic.Int64 // the broker's acquisition lock duration

	session share.Session

	mu   sync.Mutex
	tr   share.Tracker
	acks share.Acks
	// renewing are the keys a renewal in flight covers, extended when its
	// answer comes; renewOK says whether the broker supports KIP-1222.
	renewOK   atomic.Int32 // 0 unknown, 1 yes, -1 no
	warnedOld bool
	taken     int               // records the last fetch queued (loop only)
	offs      []int64           // take's buffer of a batch's offsets (loop only)
	events    []FetchBatchEvent // take's buffer of hook events (loop only)
	pinned    *conn.Conn        // the connection kept from the idle reaper (loop only)
	// unresolved: the last ShareFetch had leader errors that hints did
	// not all resolve (loop only; see applyHints); leaderWait paces the
	// fetches that follow such ones.
	unresolved bool
	leaderWait share.LeaderWait
}

const defaultShareLock = 30 * time.Second

// shareCoalesce is how long a fetcher waits, once per fetch, for more
// runners to be idle when fewer than coalesceAt are and the last fetch
// acquired records: with long handlers a runner frees every few µs, and
// without the wait each fetch would acquire the few freed during the
// last one's round trip (the share bench's 20 ms handler: 88 records a
// fetch).
const shareCoalesce = time.Millisecond

// coalesceAt is a quarter of the records a fetch may acquire.
func (sc *ShareConsumer) coalesceAt() int { return max(1, min(sc.cfg.share.maxRecords, sc.runners)/4) }

func newShareFetcher(sc *ShareConsumer, node int32) *shareFetcher {
	f := &shareFetcher{sc: sc, node: node, wake: make(chan struct{}, 1), roomy: make(chan struct{}, 1), placed: make(chan struct{}, 1)}
	f.lockMs.Store(defaultShareLock.Milliseconds())
	return f
}

func (f *shareFetcher) setOwned(tps []shareTP) {
	if old := f.owned.Swap(&tps); old == nil || !slices.Equal(*old, tps) {
		nudge(f.placed)
	}
	nudge(f.wake)
}

func (f *shareFetcher) lock() time.Duration { return time.Duration(f.lockMs.Load()) * time.Millisecond }

func (f *shareFetcher) start(k share.Key) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tr.Start(k, time.Now())
}

func (f *shareFetcher) hold(k share.Key) {
	f.mu.Lock()
	f.tr.Hold(k)
	f.mu.Unlock()
}

// finishIfHeld acknowledges k with typ if this member still holds it.
func (f *shareFetcher) finishIfHeld(k share.Key, typ int8) { _ = f.ack(k, typ) }

func (f *shareFetcher) ack(k share.Key, typ int8) error {
	if typ == share.Renew {
		now := time.Now()
		f.mu.Lock()
		if f.renewOK.Load() < 0 {
			f.mu.Unlock()
			return ErrRenewUnsupported
		}
		if !f.tr.Alive(k, now) {
			f.mu.Unlock()
			return ErrNotAcquired
		}
		f.acks.Add(k.TP, k.Offset, typ)
		f.mu.Unlock()
		nudge(f.wake)
		return nil
	}
	err, _ := f.finish(k, typ, nil)
	return err
}

// finish acknowledges k with the final type typ and, if next is not nil,
// starts the record next names in the same critical section (a runner
// going from one record to the next takes the lock once).
func (f *shareFetcher) finish(k share.Key, typ int8, next *share.Key) (err error, started bool) {
	now := time.Now()
	f.mu.Lock()
	held := f.tr.Finish(k, now)
	if held {
		f.acks.Add(k.TP, k.Offset, typ)
	}
	if next != nil {
		started = f.tr.Start(*next, now)
	}
	f.mu.Unlock()
	if !held {
		// Acknowledged already (by the handler, before its return
		// acknowledged it again), or its lock ended: only the latter
		// is an expiry, and the tracker counted it.
		return ErrNotAcquired, started
	}
	switch typ {
	case share.Accept:
		f.sc.accepted.Add(1)
	case share.Release:
		f.sc.released.Add(1)
	case share.Reject:
		f.sc.rejected.Add(1)
	}
	nudge(f.wake)
	return nil, started
}

// loop runs requests one at a time (a share session takes one request
// per epoch): a RENEW when running handlers' locks near their end, a
// ShareFetch carrying the waiting acknowledgements when there is room for
// records, a ShareAcknowledge when there is not, a ShareFetch forgetting
// the session's partitions once the broker leads none of ours, a
// keep-alive (share.KeepAlive) when it holds records on a connection
// about to be idle for the broker's idle timeout, and waits otherwise.
func (f *shareFetcher) loop() {
	sc := f.sc
	defer sc.fetchWG.Done()
	ctx := sc.life.Context()
	fails := 0
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	active := false
	defer func() {
		if active {
			sc.active.Add(-1)
		}
		f.pin(false)
	}()
	// empty: the last fetch acquired nothing. Such a fetcher yields to
	// another broker's fetcher waiting for an idle runner, rather than
	// claim it for a long poll.
	empty := false
	// coalesced: since its last fetch, the loop waited once for more
	// runners to be idle (see shareCoalesce).
	coalesced := false
	pause := time.NewTimer(time.Hour)
	pause.Stop()
	defer pause.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sc.final:
			f.closeSession(ctx)
			return
		default:
		}
		now := time.Now()
		lock := f.lock()
		var owned []shareTP
		select {
		case <-f.placed: // owned is read below: the current placement
		default:
		}
		if p := f.owned.Load(); p != nil {
			owned = *p
		}
		fetching := len(owned) > 0 && !isClosed(sc.noFetch)
		if fetching != active {
			active = fetching
			if active {
				sc.active.Add(1)
			} else {
				sc.active.Add(-1)
			}
		}
		f.mu.Lock()
		f.tr.Expire(now)
		var renew []share.Key
		if sc.cfg.share.autoRenew && f.renewOK.Load() >= 0 {
			renew = f.tr.Due(share.Running, now, lock/2)
			for _, k := range renew {
				f.acks.Add(k.TP, k.Offset, share.Renew)
			}
		}
		// Acquire only what idle runners can start: a record waiting in
		// the queue would hold its lock from other members, and could
		// lose it before a handler took it.
		queued := f.tr.Count(share.Queued)
		room := min(sc.cfg.share.maxRecords-queued, sc.runners-int(sc.busy.Load()))
		pending := f.acks.Len()
		hasRenew := pending > 0 && f.acks.HasRenew()
		nextRenew, anyRunning := f.tr.Next(share.Running)
		held := f.tr.Len()
		f.mu.Unlock()
		// While it holds records, the session's connection must not be
		// closed as idle: the broker would end the session and release
		// everything acquired through it. Neither by the client's idle
		// reaper (pinned) nor by the broker's (a keep-alive).
		f.pin(held > 0)
		var last time.Time
		if f.pinned != nil {
			last = f.pinned.LastUsed()
		}
		keepAt, keeping := sc.keepAlive.At(last, held, f.session.Open())

		yield := empty && sc.starved.Load() > 0
		var err error
		switch {
		case hasRenew || (pending > 0 && (!fetching || room <= 0)):
			if !f.session.Open() {
				err = f.fetch(ctx, owned, 0, 0, now) // opens the session, acquires nothing
				break
			}
			err = f.acknowledge(ctx, false, now)
		case fetching && room > 0 && !yield:
			// Under load (records flowing, few runners idle), wait a
			// moment, once, for more runners to be idle: one ShareFetch
			// for many records costs much less than many for a few.
			if at := sc.coalesceAt(); !coalesced && !empty && room < at {
				coalesced = true
				select {
				case <-f.roomy:
				default:
				}
				// unbusy signals roomy when at runners are idle; the
				// check after draining it closes the race with that.
				if sc.runners-int(sc.busy.Load()) < at {
					pause.Reset(shareCoalesce)
					select {
					case <-ctx.Done():
						return
					case <-sc.final:
					case <-f.roomy:
					case <-pause.C:
					}
					pause.Stop()
				}
				continue
			}
			coalesced = false
			// Claim the idle runners (room was an estimate): another
			// broker's fetcher may be claiming them too.
			room = sc.reserve(sc.cfg.share.maxRecords - queued)
			if room <= 0 {
				continue
			}
			wait := sc.cfg.fetchMaxWait
			if anyRunning && sc.cfg.share.autoRenew && f.renewOK.Load() >= 0 {
				wait = min(wait, max(0, time.Until(nextRenew.Add(-lock/2))))
			}
			f.taken = 0
			err = f.fetch(ctx, owned, room, wait, now)
			sc.unbusy(room) // take counted what was acquired
			empty = err == nil && f.taken == 0
			if n := f.leaderWait.Fetched(err == nil && f.unresolved, f.taken); n > 0 {
				// Partitions this broker no longer leads, and no
				// hint said where they went: it answered at once
				// and would again until metadata moves them.
				if !f.pause(ctx, sc.c.cfg.retryBackoff.Delay(n, rand.Float64())) {
					return
				}
			}
		case len(owned) == 0 && f.session.Open() && f.session.Len() > 0 && !isClosed(sc.noFetch):
			// The broker leads none of our partitions any more (they
			// moved, or the group took them): take them out of the
			// session, which would otherwise keep them until it
			// closes (a broker may release what the member acquired
			// in them then, wherever it acquired it). With none left
			// in the session, the ShareFetch acquires nothing.
			err = f.fetch(ctx, nil, 0, 0, now)
		case keeping && !now.Before(keepAt):
			// Records held, nothing else to send: renew the running
			// handlers' locks early if renewal applies (the request
			// does the work the next renewal would), or send an empty
			// ShareAcknowledge, which only moves the session's epoch.
			if sc.cfg.share.autoRenew && f.renewOK.Load() >= 0 {
				f.mu.Lock()
				for _, k := range f.tr.Due(share.Running, now, 2*lock) {
					f.acks.Add(k.TP, k.Offset, share.Renew)
				}
				f.mu.Unlock()
			}
			err = f.acknowledge(ctx, true, now)
			sc.keepAlives.Add(1)
		default:
			d := time.Hour
			if yield {
				// Our own reservation's release nudged us too: wait
				// for the next nudge (a runner freed or a fetch of
				// the other broker done), or a poll's length.
				select {
				case <-f.wake:
				default:
				}
				d = sc.cfg.fetchMaxWait
			}
			starved := fetching && room <= 0 && queued < sc.cfg.share.maxRecords
			if starved {
				sc.starved.Add(1)
			}
			if anyRunning && sc.cfg.share.autoRenew && f.renewOK.Load() >= 0 {
				d = max(time.Millisecond, time.Until(nextRenew.Add(-lock/2)))
			}
			if keeping {
				d = max(time.Millisecond, min(d, time.Until(keepAt)))
			}
			timer.Reset(d)
			select {
			case <-ctx.Done():
				if starved {
					sc.starved.Add(-1)
				}
				return
			case <-sc.final:
			case <-f.wake:
			case <-timer.C:
			}
			if starved {
				sc.starved.Add(-1)
			}
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			fails++
			sc.c.log.Debug("share fetch failed", append(sc.log(), "broker", f.node, "err", err)...)
			f.session.Reset()
			// The broker may be gone (its partitions led elsewhere
			// now, and no answer of its will say so): metadata says
			// where they went, and the placement loop moves them.
			sc.cl.TriggerMetadata()
			t := time.NewTimer(sc.c.cfg.retryBackoff.Delay(fails, 0.5))
			select {
			case <-t.C:
			case <-ctx.Done():
			case <-sc.final:
			}
			t.Stop()
			continue
		}
		fails = 0
	}
}

// pause waits d, or until the partitions the fetcher owns change or the
// consumer ends its fetching; false when the consumer is closing.
func (f *shareFetcher) pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-f.placed:
	case <-f.sc.final:
	case <-ctx.Done():
		return false
	}
	return true
}

// pin keeps the fetch connection to the broker from the client's idle
// reaper while on (the fetcher holds records), and lets it go otherwise.
func (f *shareFetcher) pin(on bool) {
	var cn *conn.Conn
	if on {
		cn = f.sc.cl.OpenConn(f.node, f.sc.fetchClass)
	}
	if cn == f.pinned {
		return
	}
	if f.pinned != nil {
		f.pinned.Pin(false)
	}
	if cn != nil {
		cn.Pin(true)
	}
	f.pinned = cn
}

// deref is *s, "" for nil (a nullable string of a response).
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
	}
	return false
}

// drainAcks takes the waiting acknowledgements and the renewals among them.
func (f *shareFetcher) drainAcks() ([]share.PartAcks, []share.Key) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pas := f.acks.Drain()
	var renew []share.Key
	for _, pa := range pas {
		for _, b := range pa.Batches {
			if b.Type != share.Renew {
				continue
			}
			for o := b.First; o <= b.Last && o-b.First < 1<<20; o++ {
				renew = append(renew, share.Key{TP: pa.TP, Offset: o})
			}
		}
	}
	return pas, renew
}

// requeue puts back acknowledgements a request did not deliver because
// the session was out of step (the broker applied none of them).
func (f *shareFetcher) requeue(pas []share.PartAcks) {
	f.mu.Lock()
	for _, pa := range pas {
		for _, b := range pa.Batches {
			f.acks.AddRange(pa.TP, b.First, b.Last, b.Type)
		}
	}
	f.mu.Unlock()
}

func (f *shareFetcher) extend(renew []share.Key, sent time.Time) {
	if len(renew) == 0 {
		return
	}
	deadline := sent.Add(f.lock())
	f.mu.Lock()
	for _, k := range renew {
		f.tr.ExtendOffset(k.TP, k.Offset, deadline)
	}
	f.mu.Unlock()
	f.sc.renewed.Add(int64(len(renew)))
}

// acknowledge sends a ShareAcknowledge with the waiting acknowledgements
// (IsRenewAck when some are renewals; a broker without KIP-1222 gets the
// others, its renewals dropped). keepAlive sends it even with none (a
// keep-alive: see share.KeepAlive).
func (f *shareFetcher) acknowledge(ctx context.Context, keepAlive bool, sent time.Time) error {
	sc := f.sc
	cn, err := sc.cl.Conn(ctx, f.node, sc.fetchClass)
	if err != nil {
		return err
	}
	pas, renew := f.drainAcks()
	if len(renew) > 0 {
		if v, ok := cn.Versions().Max(79, 2); !ok || v < 2 {
			f.renewOK.Store(-1)
			pas, _ = share.SplitRenew(pas)
			renew = nil
			if !f.warnedOld {
				f.warnedOld = true
				sc.c.log.Warn("broker does not support acquisition lock renewal (KIP-1222); long handlers may see their records delivered again", append(sc.log(), "broker", f.node)...)
			}
		} else {
			f.renewOK.Store(1)
		}
	}
	if len(pas) == 0 && !keepAlive {
		return nil
	}
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID = &sc.cfg.share.group, &sc.memberID
	req.ShareSessionEpoch = f.session.Epoch()
	req.IsRenewAck = len(renew) > 0
	for _, pa := range pas {
		t := kmsg.NewShareAcknowledgeRequestTopic()
		t.TopicID = pa.TP.ID
		p := kmsg.NewShareAcknowledgeRequestTopicPartition()
		p.Partition = pa.TP.Partition
		for _, b := range pa.Batches {
			ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
			ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = b.First, b.Last, []int8{b.Type}
			p.AcknowledgementBatches = append(p.AcknowledgementBatches, ab)
		}
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
	}
	rctx, cancel := context.WithTimeout(ctx, sc.c.cfg.requestTimeout)
	defer cancel()
	kresp, err := cn.Request(rctx, req)
	if err != nil {
		return err // the acknowledgements are lost: the locks expire
	}
	resp := kresp.(*kmsg.ShareAcknowledgeResponse)
	if resp.AcquisitionLockTimeoutMillis > 0 {
		f.lockMs.Store(int64(resp.AcquisitionLockTimeoutMillis))
	}
	if resp.ErrorCode != 0 {
		if share.IsSessionError(resp.ErrorCode) {
			f.session.Reset()
			f.requeue(pas)
			return nil
		}
		return kafkaerr.ForCode(resp.ErrorCode)
	}
	f.session.Acked()
	bad := map[share.TP]bool{}
	var hints []cluster.LeaderHint
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				bad[share.TP{ID: t.TopicID, Partition: p.Partition}] = true
				hints = f.partitionError(hints, p.ErrorCode, "", t.TopicID, p.Partition, p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch)
			}
		}
	}
	if len(hints) > 0 {
		eps := make([]cluster.BrokerMeta, len(resp.NodeEndpoints))
		for i, e := range resp.NodeEndpoints {
			eps[i] = cluster.BrokerMeta{NodeID: e.NodeID, Host: e.Host, Port: e.Port, Rack: deref(e.Rack)}
		}
		f.applyHints(hints, eps)
	}
	f.extend(keep(renew, bad), sent)
	return nil
}

func keep(ks []share.Key, bad map[share.TP]bool) []share.Key {
	if len(bad) == 0 {
		return ks
	}
	out := ks[:0]
	for _, k := range ks {
		if !bad[k.TP] {
			out = append(out, k)
		}
	}
	return out
}

// partitionError counts a partition a broker refused (a fetch or
// acknowledgements) and reacts to the error: a partition whose leader
// moved gets a leader hint (KIP-951: the CurrentLeader the response
// carries with the error, leader -1 without one) appended to hints; an
// unknown topic or partition triggers a metadata refresh.
func (f *shareFetcher) partitionError(hints []cluster.LeaderHint, code int16, topic string, id [16]byte, partition, leader, epoch int32) []cluster.LeaderHint {
	f.sc.ackErrors.Add(1)
	switch code {
	case kafkaerr.NotLeaderForPartition, kafkaerr.FencedLeaderEpoch:
		hints = append(hints, cluster.LeaderHint{Topic: topic, TopicID: id, Partition: partition, Leader: leader, Epoch: epoch})
	case kafkaerr.UnknownTopicOrPartition, kafkaerr.UnknownTopicID:
		f.sc.cl.TriggerMetadata()
	}
	return hints
}

// applyHints moves partitions to the leaders hints name, as Java's share
// consumer does (Metadata.updatePartitionLeadership), and places the
// assigned partitions again at once when that changed a leader: no wait
// for a metadata refresh, which happens only for hints that cannot be
// applied (no leader named, unknown broker, ...). It says whether every
// hint is resolved: satisfied, and its partition led by another broker in
// the metadata now. Otherwise some partition stays here (only part of the
// hints applied, a hint older than what the metadata knows, or the
// metadata naming this broker, which is behind), and the next fetch would
// be refused for it again at once.
func (f *shareFetcher) applyHints(hints []cluster.LeaderHint, eps []cluster.BrokerMeta) (resolved bool) {
	changed, all := f.sc.cl.ApplyLeaderHints(hints, eps)
	if changed {
		nudge(f.sc.wake)
	}
	if !all {
		return false
	}
	snap := f.sc.cl.Snapshot()
	return !slices.ContainsFunc(hints, func(h cluster.LeaderHint) bool { return snap.HintLeader(h) == f.node })
}

// fetch sends a ShareFetch for owned with the waiting acknowledgements
// (none when it opens the session, which takes none) and queues the
// records it acquires. room 0 acquires nothing (a session opener); owned
// empty forgets every partition of the session.
func (f *shareFetcher) fetch(ctx context.Context, owned []shareTP, room int, wait time.Duration, sent time.Time) error {
	sc := f.sc
	f.unresolved = false
	cn, err := sc.cl.Conn(ctx, f.node, sc.fetchClass)
	if err != nil {
		return err
	}
	want := make([]share.TP, len(owned))
	names := make(map[[16]byte]string, len(owned))
	for i, tp := range owned {
		want[i] = tp.TP
		names[tp.ID] = tp.topic
	}
	opening := !f.session.Open()
	add, forget := f.session.Plan(want)
	var pas []share.PartAcks
	// Acknowledgements ride on a fetch that names partitions; one that
	// only forgets them (owned empty) leaves them to a ShareAcknowledge.
	if !opening && len(owned) > 0 {
		pas, _ = f.drainAcks()
		// Renewals go in ShareAcknowledge (IsRenewAck): put any back
		// rather than send them in a fetch (or drop them, where the
		// broker does not renew).
		var rn []share.PartAcks
		pas, rn = share.SplitRenew(pas)
		if f.renewOK.Load() >= 0 {
			f.requeue(rn)
		}
	}
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = &sc.cfg.share.group, &sc.memberID
	req.ShareSessionEpoch = f.session.Epoch()
	req.MaxWaitMillis = int32(wait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = sc.cfg.fetchMaxBytes
	req.MaxRecords = int32(room)
	req.BatchSize = int32(room)
	req.ShareAcquireMode = 0
	if room <= 0 {
		req.MaxWaitMillis = 0
		req.MaxRecords, req.BatchSize = 1, 1
		if opening {
			add = nil // open without partitions: acquire nothing
			f.session.Plan(nil)
		}
	}
	topics := map[[16]byte]int{}
	part := func(tp share.TP) *kmsg.ShareFetchRequestTopicPartition {
		i, ok := topics[tp.ID]
		if !ok {
			i = len(req.Topics)
			topics[tp.ID] = i
			t := kmsg.NewShareFetchRequestTopic()
			t.TopicID = tp.ID
			req.Topics = append(req.Topics, t)
		}
		t := &req.Topics[i]
		for j := range t.Partitions {
			if t.Partitions[j].Partition == tp.Partition {
				return &t.Partitions[j]
			}
		}
		p := kmsg.NewShareFetchRequestTopicPartition()
		p.Partition = tp.Partition
		p.PartitionMaxBytes = sc.cfg.partitionMax
		t.Partitions = append(t.Partitions, p)
		return &t.Partitions[len(t.Partitions)-1]
	}
	for _, tp := range add {
		part(tp)
	}
	for _, pa := range pas {
		p := part(pa.TP)
		for _, b := range pa.Batches {
			ab := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
			ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = b.First, b.Last, []int8{b.Type}
			p.AcknowledgementBatches = append(p.AcknowledgementBatches, ab)
		}
	}
	fg := map[[16]byte]int{}
	for _, tp := range forget {
		i, ok := fg[tp.ID]
		if !ok {
			i = len(req.ForgottenTopicsData)
			fg[tp.ID] = i
			ft := kmsg.NewShareFetchRequestForgottenTopicsData()
			ft.TopicID = tp.ID
			req.ForgottenTopicsData = append(req.ForgottenTopicsData, ft)
		}
		req.ForgottenTopicsData[i].Partitions = append(req.ForgottenTopicsData[i].Partitions, tp.Partition)
	}
	rctx, cancel := context.WithTimeout(ctx, wait+sc.c.cfg.requestTimeout)
	defer cancel()
	kresp, err := cn.Request(rctx, req)
	if err != nil {
		return err
	}
	resp := kresp.(*kmsg.ShareFetchResponse)
	if resp.AcquisitionLockTimeoutMillis > 0 {
		f.lockMs.Store(int64(resp.AcquisitionLockTimeoutMillis))
	}
	if resp.ErrorCode != 0 {
		if share.IsSessionError(resp.ErrorCode) {
			f.session.Reset()
			f.requeue(pas)
			return nil
		}
		return kafkaerr.ForCode(resp.ErrorCode)
	}
	f.session.Applied()
	f.take(resp, names, sent)
	return nil
}

// take queues the records a ShareFetch acquired: only the offsets the
// response names as acquired, each with its delivery count, under a lock
// counted from when the request was sent (never later than the broker's).
// Acquired offsets without a record (control records, compaction) are
// acknowledged as gaps at once.
func (f *shareFetcher) take(resp *kmsg.ShareFetchResponse, names map[[16]byte]string, sent time.Time) {
	sc := f.sc
	deadline := sent.Add(f.lock())
	var slab recordSlab
	slab.chunk = acquiredCount(resp)
	out := make([]*Record, 0, slab.chunk)
	// The records of each partition in out: out[prev end:end] are tp's.
	type seg struct {
		tp  share.TP
		end int
	}
	var segs []seg
	offs := f.offs[:0]
	defer func() { f.offs = offs[:0] }()
	opts := batch.DecodeOptions{SkipCRC: !sc.cfg.checkCRC, MaxDecompressedSize: sc.cfg.maxDecompressed}
	var hints []cluster.LeaderHint
	// The FetchBatchHooks' events, one per partition of ours in the
	// response, reported once the records are queued (in a buffer kept
	// for the next fetch: hooks cost no allocation).
	hooked := len(sc.c.hooks.fetch) > 0
	events := f.events[:0]
	defer func() {
		clear(events)
		f.events = events[:0]
	}()
	for ti := range resp.Topics {
		rt := &resp.Topics[ti]
		topic := names[rt.TopicID]
		for pi := range rt.Partitions {
			rp := &rt.Partitions[pi]
			if hooked && topic != "" {
				events = append(events, FetchBatchEvent{
					Topic: topic, Partition: rp.Partition, Node: f.node, Bytes: len(rp.Records),
					HighWatermark: -1, Lag: -1, Err: kafkaerr.ForCode(rp.ErrorCode),
				})
			}
			pstart := len(out)
			if rp.AcknowledgeErrorCode != 0 {
				// No CurrentLeader for acknowledgements: the
				// fetch's error, if any, carries it.
				if rp.ErrorCode == 0 || rp.CurrentLeader.LeaderID < 0 {
					hints = f.partitionError(hints, rp.AcknowledgeErrorCode, topic, rt.TopicID, rp.Partition, -1, -1)
				} else {
					sc.ackErrors.Add(1)
				}
			}
			if rp.ErrorCode != 0 {
				hints = f.partitionError(hints, rp.ErrorCode, topic, rt.TopicID, rp.Partition, rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch)
				continue
			}
			if len(rp.AcquiredRecords) == 0 {
				continue
			}
			tp := share.TP{ID: rt.TopicID, Partition: rp.Partition}
			acq := share.NewAcquired(len(rp.AcquiredRecords), func(i int) (int64, int64, int16) {
				a := rp.AcquiredRecords[i]
				return a.FirstOffset, a.LastOffset, a.DeliveryCount
			})
			if topic == "" {
				// Not a partition we asked for: give it back.
				f.mu.Lock()
				for _, g := range acqRelease(acq, 0, 1<<63-1) {
					f.acks.AddRange(tp, g.First, g.Last, g.Type)
				}
				f.mu.Unlock()
				continue
			}
			it := batch.NewIterator(rp.Records, opts)
			var gaps []share.Range
			for {
				b, err := it.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					sc.c.log.Warn("corrupt share fetch batch; its records go back to the group", append(sc.log(), "topic", topic, "partition", rp.Partition, "err", err)...)
					gaps = append(gaps, acqRelease(acq, b.BaseOffset, b.LastOffset)...)
					continue
				}
				if b.BaseOffset <= b.LastOffset && !acq.Overlaps(b.BaseOffset, b.LastOffset) {
					continue // nothing of it is ours: no records, no gaps
				}
				offs = offs[:0]
				if !b.Control {
					start := len(out)
					markBuf, markN := slab.mark()
					cur := 0
					_, derr := b.EachRecord(func(br batch.Record) {
						d, ok := acq.LookupFrom(br.Offset, &cur)
						if !ok {
							return
						}
						// Field by field: a struct copy into the slab
						// would run the GC's bulk write barrier.
						r := slab.next()
						r.Topic, r.Partition, r.LeaderEpoch = topic, rp.Partition, b.PartitionLeaderEpoch
						r.Key, r.Value, r.Headers = br.Key, br.Value, headersFromBatch(br.Headers)
						r.Timestamp, r.Offset, r.DeliveryCount = time.UnixMilli(br.Timestamp), br.Offset, d
						out = append(out, r)
						offs = append(offs, br.Offset)
					})
					if derr != nil {
						clear(out[start:])
						out = out[:start]
						slab.reset(markBuf, markN)
						offs = offs[:0]
						gaps = append(gaps, acqRelease(acq, b.BaseOffset, b.LastOffset)...)
						continue
					}
				}
				gaps = append(gaps, acq.Gaps(b.BaseOffset, b.LastOffset, offs)...)
			}
			if n := len(segs); len(out) > 0 && (n == 0 || segs[n-1].end < len(out)) {
				segs = append(segs, seg{tp, len(out)})
			}
			if hooked {
				e := &events[len(events)-1]
				e.Records = len(out) - pstart
				for _, r := range out[pstart:] {
					e.UncompressedBytes += int64(r.size())
				}
			}
			if len(gaps) > 0 {
				f.mu.Lock()
				for _, g := range gaps {
					f.acks.AddRange(tp, g.First, g.Last, g.Type)
				}
				f.mu.Unlock()
			}
		}
	}
	if len(hints) > 0 {
		eps := make([]cluster.BrokerMeta, len(resp.NodeEndpoints))
		for i, e := range resp.NodeEndpoints {
			eps[i] = cluster.BrokerMeta{NodeID: e.NodeID, Host: e.Host, Port: e.Port, Rack: deref(e.Rack)}
		}
		f.unresolved = !f.applyHints(hints, eps)
	}
	if len(out) == 0 {
		f.fetched(events)
		return
	}
	f.taken = len(out)
	sc.busy.Add(int64(len(out)))
	redelivered := 0
	refs := make([]shareRef, len(out)) // one block per fetch, like the records
	f.mu.Lock()
	i := 0
	for _, sg := range segs {
		for ; i < sg.end; i++ {
			r := out[i]
			refs[i] = shareRef{f: f, key: f.tr.Acquire(sg.tp, r.Offset, deadline)}
			r.share = &refs[i]
			if r.DeliveryCount > 1 {
				redelivered++
			}
		}
	}
	f.mu.Unlock()
	if redelivered > 0 {
		sc.redelivered.Add(int64(redelivered))
	}
	if !sc.q.push(out) {
		for _, r := range out {
			f.finishIfHeld(r.share.key, share.Release)
		}
		sc.busy.Add(-int64(len(out)))
		return // closing: nothing was queued
	}
	f.fetched(events)
}

// fetched reports a ShareFetch's partitions to the FetchBatchHooks, as
// the Consumer does its fetches': Records are the acquired records queued
// for the handlers (not those acquired and given back at once: control
// records, corrupt batches); a share fetch knows no high watermark or
// lag (-1).
func (f *shareFetcher) fetched(events []FetchBatchEvent) {
	for _, e := range events {
		for _, h := range f.sc.c.hooks.fetch {
			h.OnFetchBatch(e)
		}
	}
}

// acquiredCount is how many offsets resp acquired, within reason: the
// size of the Record slabs take fills.
func acquiredCount(resp *kmsg.ShareFetchResponse) int {
	n := int64(0)
	for ti := range resp.Topics {
		for pi := range resp.Topics[ti].Partitions {
			for _, a := range resp.Topics[ti].Partitions[pi].AcquiredRecords {
				if w := a.LastOffset - a.FirstOffset + 1; w > 0 && a.FirstOffset >= 0 {
					n += min(w, 1<<20)
				}
			}
		}
	}
	return int(min(max(n, 1), 4096))
}

// recordSlab hands out Records from chunks allocated chunk at a time: one
// allocation per fetch rather than one per record. A chunk is never
// grown in place, so the Records handed out keep their addresses.
type recordSlab struct {
	buf   []Record
	chunk int
}

func (s *recordSlab) next() *Record {
	if len(s.buf) == cap(s.buf) {
		s.buf = make([]Record, 0, s.chunk)
	}
	s.buf = s.buf[:len(s.buf)+1]
	return &s.buf[len(s.buf)-1]
}

// mark and reset give back the Records handed out since mark (a batch
// that failed to decode), if they are all in the current chunk.
func (s *recordSlab) mark() ([]Record, int) { return s.buf, len(s.buf) }

func (s *recordSlab) reset(buf []Record, n int) {
	if cap(buf) > 0 && cap(s.buf) == cap(buf) && &buf[:cap(buf)][0] == &s.buf[:cap(s.buf)][0] {
		clear(s.buf[n:])
		s.buf = s.buf[:n]
	}
}

// acqRelease returns the acquired offsets of [first, last] as RELEASE
// ranges: records the member got but cannot hand out (corrupt batch,
// unknown topic) go back to the group.
func acqRelease(acq share.Acquired, first, last int64) []share.Range {
	rs := acq.Gaps(first, last, nil)
	for i := range rs {
		rs[i].Type = share.Release
	}
	return rs
}

// closeSession ends the share session as the consumer closes: every
// record still held is released, and the last acknowledgements ride on a
// ShareAcknowledge at epoch -1, which also makes the broker release what
// the session acquired and we did not name.
func (f *shareFetcher) closeSession(ctx context.Context) {
	sc := f.sc
	now := time.Now()
	open := f.session.Open()
	var pas []share.PartAcks
	f.mu.Lock()
	for _, k := range f.tr.Take(now, share.Queued, share.Running, share.Held) {
		f.acks.Add(k.TP, k.Offset, share.Release)
		sc.released.Add(1)
	}
	if open {
		pas = f.acks.Drain()
	}
	f.mu.Unlock()
	if !open {
		return // no session: leaving the group releases what we hold
	}
	pas, _ = share.SplitRenew(pas) // renewing what is being released is moot
	cn := sc.cl.OpenConn(f.node, sc.fetchClass)
	if cn == nil {
		return
	}
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID = &sc.cfg.share.group, &sc.memberID
	req.ShareSessionEpoch = -1
	for _, pa := range pas {
		t := kmsg.NewShareAcknowledgeRequestTopic()
		t.TopicID = pa.TP.ID
		p := kmsg.NewShareAcknowledgeRequestTopicPartition()
		p.Partition = pa.TP.Partition
		for _, b := range pa.Batches {
			ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
			ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = b.First, b.Last, []int8{b.Type}
			p.AcknowledgementBatches = append(p.AcknowledgementBatches, ab)
		}
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
	}
	rctx, cancel := context.WithTimeout(ctx, sc.c.cfg.requestTimeout)
	defer cancel()
	if _, err := cn.Request(rctx, req); err != nil {
		sc.c.log.Debug("closing the share session failed", append(sc.log(), "broker", f.node, "err", err)...)
	}
	f.session.Reset()
}
