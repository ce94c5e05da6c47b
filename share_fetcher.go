package riffle

import (
	"context"
	"errors"
	"io"
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
	taken     int        // records the last fetch queued (loop only)
	pinned    *conn.Conn // the connection kept from the idle reaper (loop only)
}

const defaultShareLock = 30 * time.Second

func newShareFetcher(sc *ShareConsumer, node int32) *shareFetcher {
	f := &shareFetcher{sc: sc, node: node, wake: make(chan struct{}, 1)}
	f.lockMs.Store(defaultShareLock.Milliseconds())
	return f
}

func (f *shareFetcher) setOwned(tps []shareTP) {
	f.owned.Store(&tps)
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
	now := time.Now()
	f.mu.Lock()
	if typ == share.Renew {
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
	if !f.tr.Finish(k, now) {
		f.mu.Unlock()
		f.sc.expired.Add(1)
		return ErrNotAcquired
	}
	f.acks.Add(k.TP, k.Offset, typ)
	f.mu.Unlock()
	switch typ {
	case share.Accept:
		f.sc.accepted.Add(1)
	case share.Release:
		f.sc.released.Add(1)
	case share.Reject:
		f.sc.rejected.Add(1)
	}
	nudge(f.wake)
	return nil
}

// loop runs requests one at a time (a share session takes one request
// per epoch): a RENEW when running handlers' locks near their end, a
// ShareFetch carrying the waiting acknowledgements when there is room for
// records, a ShareAcknowledge when there is not, and waits otherwise.
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
		// everything acquired through it.
		f.pin(held > 0)

		yield := empty && sc.starved.Load() > 0
		var err error
		switch {
		case hasRenew || (pending > 0 && (!fetching || room <= 0)):
			if !f.session.Open() {
				err = f.fetch(ctx, owned, 0, 0, now) // opens the session, acquires nothing
				break
			}
			err = f.acknowledge(ctx, hasRenew, now)
		case fetching && room > 0 && !yield:
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

// pin keeps the fetch connection to the broker from the client's idle
// reaper while on (the fetcher holds records), and lets it go otherwise.
func (f *shareFetcher) pin(on bool) {
	var cn *conn.Conn
	if on {
		cn = f.sc.cl.OpenConn(f.node, cluster.ClassFetch)
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
// (IsRenewAck when some are renewals).
func (f *shareFetcher) acknowledge(ctx context.Context, renewing bool, sent time.Time) error {
	sc := f.sc
	cn, err := sc.cl.Conn(ctx, f.node, cluster.ClassFetch)
	if err != nil {
		return err
	}
	if renewing {
		if v, ok := cn.Versions().Max(79, 2); !ok || v < 2 {
			f.renewOK.Store(-1)
			f.dropRenewals()
			if !f.warnedOld {
				f.warnedOld = true
				sc.c.log.Warn("broker does not support acquisition lock renewal (KIP-1222); long handlers may see their records delivered again", append(sc.log(), "broker", f.node)...)
			}
			return nil
		}
		f.renewOK.Store(1)
	}
	pas, renew := f.drainAcks()
	if len(pas) == 0 {
		return nil
	}
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID = &sc.cfg.share.group, &sc.memberID
	req.ShareSessionEpoch = f.session.Epoch()
	req.IsRenewAck = renewing
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
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				bad[share.TP{ID: t.TopicID, Partition: p.Partition}] = true
				f.partitionError(p.ErrorCode)
			}
		}
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

func (f *shareFetcher) dropRenewals() {
	f.mu.Lock()
	defer f.mu.Unlock()
	pas := f.acks.Drain()
	for _, pa := range pas {
		for _, b := range pa.Batches {
			if b.Type != share.Renew {
				f.acks.AddRange(pa.TP, b.First, b.Last, b.Type)
			}
		}
	}
}

func (f *shareFetcher) partitionError(code int16) {
	f.sc.ackErrors.Add(1)
	switch code {
	case kafkaerr.NotLeaderForPartition, kafkaerr.UnknownTopicOrPartition, kafkaerr.UnknownTopicID, kafkaerr.FencedLeaderEpoch:
		f.sc.cl.TriggerMetadata()
	}
}

// fetch sends a ShareFetch for owned with the waiting acknowledgements
// (none when it opens the session, which takes none) and queues the
// records it acquires. room 0 acquires nothing (a session opener).
func (f *shareFetcher) fetch(ctx context.Context, owned []shareTP, room int, wait time.Duration, sent time.Time) error {
	sc := f.sc
	cn, err := sc.cl.Conn(ctx, f.node, cluster.ClassFetch)
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
	if !opening {
		pas, _ = f.drainAcks()
		if f.renewOK.Load() >= 0 {
			// Renewals go in ShareAcknowledge (IsRenewAck): put any
			// back rather than send them in a fetch.
			var rest []share.PartAcks
			var rn []share.PartAcks
			for _, pa := range pas {
				var keepB, renB []share.Range
				for _, b := range pa.Batches {
					if b.Type == share.Renew {
						renB = append(renB, b)
					} else {
						keepB = append(keepB, b)
					}
				}
				if len(keepB) > 0 {
					rest = append(rest, share.PartAcks{TP: pa.TP, Batches: keepB})
				}
				if len(renB) > 0 {
					rn = append(rn, share.PartAcks{TP: pa.TP, Batches: renB})
				}
			}
			pas = rest
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
	var out []*Record
	var outTP []share.TP
	opts := batch.DecodeOptions{SkipCRC: !sc.cfg.checkCRC, MaxDecompressedSize: sc.cfg.maxDecompressed}
	for ti := range resp.Topics {
		rt := &resp.Topics[ti]
		topic := names[rt.TopicID]
		for pi := range rt.Partitions {
			rp := &rt.Partitions[pi]
			if rp.AcknowledgeErrorCode != 0 {
				f.partitionError(rp.AcknowledgeErrorCode)
			}
			if rp.ErrorCode != 0 {
				f.partitionError(rp.ErrorCode)
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
				var offs []int64
				if !b.Control {
					start := len(out)
					_, derr := b.EachRecord(func(br batch.Record) {
						d, ok := acq.Lookup(br.Offset)
						if !ok {
							return
						}
						r := &Record{
							Topic: topic, Partition: rp.Partition, LeaderEpoch: b.PartitionLeaderEpoch,
							Key: br.Key, Value: br.Value, Headers: headersFromBatch(br.Headers),
							Timestamp: time.UnixMilli(br.Timestamp), Offset: br.Offset, DeliveryCount: d,
						}
						out = append(out, r)
						outTP = append(outTP, tp)
						offs = append(offs, br.Offset)
					})
					if derr != nil {
						clear(out[start:])
						out, outTP = out[:start], outTP[:start]
						offs = nil
						gaps = append(gaps, acqRelease(acq, b.BaseOffset, b.LastOffset)...)
						continue
					}
				}
				gaps = append(gaps, acq.Gaps(b.BaseOffset, b.LastOffset, offs)...)
			}
			f.mu.Lock()
			for _, g := range gaps {
				f.acks.AddRange(tp, g.First, g.Last, g.Type)
			}
			f.mu.Unlock()
		}
	}
	if len(out) == 0 {
		return
	}
	f.taken = len(out)
	sc.busy.Add(int64(len(out)))
	f.mu.Lock()
	for i, r := range out {
		r.share = shareRef{f: f, key: f.tr.Acquire(outTP[i], r.Offset, deadline)}
		if r.DeliveryCount > 1 {
			sc.redelivered.Add(1)
		}
	}
	f.mu.Unlock()
	if !sc.q.push(out) {
		for _, r := range out {
			f.finishIfHeld(r.share.key, share.Release)
		}
		sc.busy.Add(-int64(len(out)))
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
	f.mu.Lock()
	for _, k := range f.tr.Take(now, share.Queued, share.Running, share.Held) {
		f.acks.Add(k.TP, k.Offset, share.Release)
		sc.released.Add(1)
	}
	f.mu.Unlock()
	f.dropRenewals()
	if !f.session.Open() {
		return // no session: leaving the group releases what we hold
	}
	pas, _ := f.drainAcks()
	cn := sc.cl.OpenConn(f.node, cluster.ClassFetch)
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
