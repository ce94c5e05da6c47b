package riffle

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/riffle-go/riffle/internal/batch"
	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/riffle-go/riffle/internal/conn"
	"github.com/riffle-go/riffle/internal/fetch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetcher fetches the partitions one broker leads (or serves as their
// preferred read replica, KIP-392), on that broker's fetch connection,
// independently of every other broker's fetcher. The coordinator gives it
// its partitions (owned) and retires it, closing its fetch session, once
// the broker serves none of them.
type fetcher struct {
	cs     *Consumer
	node   int32
	wake   chan struct{}
	ctx    context.Context // ends with the consumer or when retired
	cancel context.CancelFunc
	owned  atomic.Pointer[[]*cpart] // partitions the broker leads, set by the coordinator
	// idleSince: since when the broker leads none of the partitions
	// (zero while it leads some); guarded by the consumer's mu.
	idleSince time.Time

	session fetch.Session
	fails   int
	slab    slabSink // decodes each partition of a response
	rot     int      // where the next request starts in owned: fairness under a small budget

	// Reused by every request: with thousands of partitions, building
	// these afresh per fetch was most of an idle poll's cost.
	cands []fetchCand
	wants []fetch.Want
	sent  map[fetch.TP]sentPart
	// Topic ids of the topics fetched, both ways: a fetch names its
	// topics by id when every one has an id (Fetch v13+, whose v16
	// answers carry the NodeEndpoints of leader hints), and the answer
	// names them by id only. Loop only.
	ids   map[string][16]byte
	names map[[16]byte]string
	byID  bool // the last request named its topics by id
}

// fetchCand is a partition that wants data in the next request.
type fetchCand struct {
	p      *cpart
	want   fetch.Want
	epoch  uint64
	behind bool
}

// slabSink converts a fetched partition's records straight into one slab
// of Records: no intermediate copy of any record.
type slabSink struct {
	topic string
	part  int32
	recs  []Record
}

func (s *slabSink) Grow(n int) { s.recs = make([]Record, 0, n) }

func (s *slabSink) Add(br batch.Record) {
	if len(s.recs) == cap(s.recs) {
		s.recs = append(s.recs, Record{})
	} else {
		s.recs = s.recs[:len(s.recs)+1]
	}
	// Field by field: a struct copy into the slab would run the GC's
	// bulk write barrier over every record.
	r := &s.recs[len(s.recs)-1]
	r.Topic, r.Partition = s.topic, s.part
	r.Key, r.Value, r.Headers = br.Key, br.Value, headersFromBatch(br.Headers)
	r.Timestamp = time.UnixMilli(br.Timestamp)
	r.Offset = br.Offset
	r.LeaderEpoch = br.LeaderEpoch
}

func (s *slabSink) Drop(n int) {
	keep := len(s.recs) - n
	clear(s.recs[keep:])
	s.recs = s.recs[:keep]
}

func (f *fetcher) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

type sentPart struct {
	p           *cpart
	epoch       uint64
	offset      int64
	leaderEpoch int32
	answered    bool // the response had the partition (with FetchBatchHooks only)
}

func (f *fetcher) loop() {
	cs := f.cs
	defer f.closeSession()
	if f.sent == nil {
		f.sent = map[fetch.TP]sentPart{}
		f.ids = map[string][16]byte{}
		f.names = map[[16]byte]string{}
	}
	for {
		wants, reserve := f.collect()
		if len(wants) == 0 {
			select {
			case <-f.ctx.Done():
				return
			case <-f.wake:
				continue
			}
		}
		var renamed bool
		f.byID, renamed = f.topicIDs(wants)
		f.session.Addressing(f.byID)
		if renamed {
			// A topic was recreated under its name: the session
			// holds its partitions under the old id. Start over.
			f.session.Fail()
		}
		plan := f.session.Plan(wants)
		req := f.request(plan, reserve)
		log := cs.c.log
		// Guarded: the arguments would be boxed (allocated) even for a
		// disabled level, per fetch and per partition.
		debug := log.Enabled(f.ctx, slog.LevelDebug)
		if debug {
			log.Debug("fetch", "broker", f.node, "session", plan.SessionID, "epoch", plan.SessionEpoch,
				"partitions", len(wants), "sent", len(plan.Send), "forgotten", len(plan.Forget))
		}
		resp, err := f.do(req)
		if err != nil {
			cs.reserved.Add(-reserve)
			cs.pokeStarved()
			f.session.Fail()
			if f.ctx.Err() != nil {
				return
			}
			// Partitions fetched here as a preferred read replica
			// (KIP-392) go back to their leaders rather than wait for
			// this broker.
			back := false
			for _, s := range f.sent {
				if s.p.replicaUnreachable(f.node, s.epoch) {
					back = true
				}
			}
			if back {
				cs.poke()
			}
			cs.cl.TriggerMetadata()
			f.backoff()
			continue
		}
		f.session.Commit(plan, resp.ErrorCode, resp.SessionID)
		if resp.ErrorCode != 0 {
			cs.reserved.Add(-reserve)
			cs.pokeStarved()
			f.backoff()
			continue
		}
		f.fails = 0
		// refresh: a partition left this fetcher on an error that named
		// no leader; hints: those whose error named it (KIP-951).
		moved, replaced, refresh := false, false, false
		var hints []cluster.LeaderHint
		// With FetchBatchHooks, the partitions the response left out
		// (nothing new, KIP-227) are reported too: the position moved.
		hooked := len(cs.c.hooks.fetch) > 0
		answered := 0
		opts := fetch.DecodeOptions{
			ReadCommitted: cs.cfg.isolation == ReadCommitted,
			Batch:         batch.DecodeOptions{SkipCRC: !cs.cfg.checkCRC, MaxDecompressedSize: cs.cfg.maxDecompressed},
		}
		for i := range resp.Topics {
			rt := &resp.Topics[i]
			topic := rt.Topic
			if topic == "" {
				// Named by id (v13+): only by the id it was asked
				// under (a topic recreated since has another).
				if topic = f.names[rt.TopicID]; f.ids[topic] != rt.TopicID {
					topic = ""
				}
			}
			for j := range rt.Partitions {
				rp := &rt.Partitions[j]
				tp := fetch.TP{Topic: topic, Partition: rp.Partition}
				s, ok := f.sent[tp]
				if !ok {
					if debug {
						log.Debug("fetch response for a partition not asked for", "broker", f.node, "topic", tp.Topic, "topic_id", rt.TopicID, "partition", tp.Partition)
					}
					continue // a partition the session still had; ignore
				}
				if hooked && !s.answered {
					s.answered = true
					f.sent[tp] = s
					answered++
				}
				f.slab = slabSink{topic: topic, part: rp.Partition}
				res := fetch.DecodePartitionTo(rp, s.offset, opts, &f.slab)
				slab := f.slab.recs
				f.slab.recs = nil
				if debug {
					log.Debug("fetched", "broker", f.node, "topic", tp.Topic, "partition", tp.Partition,
						"offset", s.offset, "records", len(slab), "next", res.NextOffset, "err", res.Err)
				}
				m, r := s.p.applyFetch(f.node, s.epoch, s.offset, s.leaderEpoch, res, slab)
				moved, replaced = moved || m, replaced || r
				// The leader a NOT_LEADER_OR_FOLLOWER or
				// FENCED_LEADER_EPOCH answer names: the partition
				// goes there at once, as Java's consumer does
				// (Metadata.updatePartitionLeadership).
				if h, ok := cluster.HintFrom(rp.ErrorCode, topic, rp.Partition, rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch); ok {
					hints = append(hints, h)
				} else if m {
					refresh = true
				}
			}
		}
		if hooked && answered < len(f.sent) {
			for _, s := range f.sent {
				if !s.answered {
					s.p.unchanged(f.node, s.epoch, s.offset)
				}
			}
		}
		// Released only now that what came back is counted as
		// buffered: released before, the room would look free to
		// another broker's fetcher while these records are decoded.
		cs.reserved.Add(-reserve)
		cs.pokeStarved()
		if len(hints) > 0 {
			// Before the coordinator places the partitions again.
			// A hint it cannot apply refreshes metadata.
			cs.cl.ApplyLeaderHints(hints, fetchEndpoints(resp.Brokers))
		}
		if refresh {
			cs.cl.TriggerMetadata()
		}
		if moved || replaced {
			cs.poke()
		}
	}
}

// topicIDs records the ids of the topics of wants from the current
// metadata and says whether every one has an id, in which case the
// request names them by id, and whether a topic's id changed (it was
// recreated) since the fetcher last asked for it.
func (f *fetcher) topicIDs(wants []fetch.Want) (all, renamed bool) {
	snap := f.cs.cl.Snapshot()
	all = true
	last := ""
	for i := range wants {
		name := wants[i].Topic
		if i > 0 && name == last {
			continue
		}
		last = name
		var id [16]byte
		if tm := snap.Topics[name]; tm != nil {
			id = tm.ID
		}
		if id == ([16]byte{}) {
			all = false
			continue
		}
		if old := f.ids[name]; old != id {
			renamed = renamed || old != ([16]byte{})
			f.ids[name] = id
			f.names[id] = name
		}
	}
	return all, renamed
}

// fetchEndpoints are the brokers a fetch answer names (NodeEndpoints,
// v16+) for its leader hints.
func fetchEndpoints(bs []kmsg.FetchResponseBroker) []cluster.BrokerMeta {
	if len(bs) == 0 {
		return nil
	}
	out := make([]cluster.BrokerMeta, len(bs))
	for i, b := range bs {
		out[i] = cluster.BrokerMeta{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: deref(b.Rack)}
	}
	return out
}

// collect lists this broker's partitions that want data and reserves, in
// the consumer's byte budget, what the request may return. Every wanting
// partition goes into the request (the broker bounds the response by the
// request's MaxBytes, so thousands of partitions with little data each are
// read in one request, not a budget's worth at a time), those with records
// to fetch first, starting at a rotating position so that a small budget
// is shared fairly over time. Partition locks are taken here, never under
// the budget lock.
func (f *fetcher) collect() ([]fetch.Want, int64) {
	owned := f.owned.Load()
	f.cands = f.cands[:0]
	if owned != nil && len(*owned) > 0 {
		ps := *owned
		f.rot = (f.rot + 1) % len(ps)
		for i := range ps {
			p := ps[(f.rot+i)%len(ps)]
			if w, epoch, behind, ok := p.fetchWant(f.node); ok {
				f.cands = append(f.cands, fetchCand{p: p, want: w, epoch: epoch, behind: behind})
			}
		}
		// Those with records to fetch first: room given to a caught-up
		// partition only pays for a long poll.
		slices.SortStableFunc(f.cands, func(a, b fetchCand) int {
			switch {
			case a.behind == b.behind:
				return 0
			case a.behind:
				return -1
			}
			return 1
		})
	}
	behind := len(f.cands) > 0 && f.cands[0].behind
	limit, wakeOthers := f.reserve(len(f.cands) > 0, behind)
	if wakeOthers {
		f.cs.mu.Lock()
		for _, o := range f.cs.fetchers {
			if o != f {
				o.poke()
			}
		}
		f.cs.mu.Unlock()
	}
	if limit <= 0 {
		return nil, 0
	}
	f.wants = f.wants[:0]
	clear(f.sent)
	per := int32(min(int64(f.cs.cfg.partitionMax), limit))
	for _, c := range f.cands {
		c.want.MaxBytes = per
		f.wants = append(f.wants, c.want)
		f.sent[c.want.TP] = sentPart{p: c.p, epoch: c.epoch, offset: c.want.Offset, leaderEpoch: c.want.LeaderEpoch}
	}
	return f.wants, limit
}

// reserve takes this fetcher's room in the byte budget for a request:
// at most FetchMaxBytes, what the budget has left, and the broker's share
// of it (the budget divided by the fetchers that have partitions: a
// broker's caught-up partitions, long-polling, must not hold all of it
// while another broker's partitions have data), and no more than its
// partitions could return. It returns 0 when there is nothing to fetch or
// no room. The check and the reservation are atomic across fetchers; a
// fetcher with records to fetch that found no room gets the next room
// before the others (see starved).
func (f *fetcher) reserve(wanting, behind bool) (limit int64, wakeOthers bool) {
	cs := f.cs
	cs.mu.Lock()
	brokers := int64(len(cs.fetchers))
	cs.mu.Unlock()
	cs.budgetMu.Lock()
	defer cs.budgetMu.Unlock()
	limit = min(int64(cs.cfg.fetchMaxBytes), cs.cfg.maxBuffered-cs.buffered.Load()-cs.reserved.Load())
	if brokers > 1 {
		limit = min(limit, max(cs.cfg.maxBuffered/brokers, 1))
	}
	_, starved := cs.starved[f]
	yielding := len(cs.starved) > 0 && !starved
	if yielding {
		// Another broker's fetcher found no room: leave the room to
		// it. Fetchers of caught-up partitions take their reservation
		// back the moment a long poll ends, and would otherwise starve
		// it for good.
		limit = 0
	}
	if !wanting {
		limit = 0
	} else if n := int64(len(f.cands)) * int64(cs.cfg.partitionMax); limit > n {
		limit = n
	}
	// Only a fetcher with data to fetch counts as starved: one whose
	// partitions are caught up would just long-poll with the room.
	switch {
	case limit <= 0 && behind && !yielding:
		cs.starved[f] = struct{}{}
	case starved && (limit > 0 || !behind):
		delete(cs.starved, f)
		wakeOthers = true // they were yielding to f
	}
	if limit <= 0 {
		return 0, wakeOthers
	}
	cs.reserved.Add(limit)
	return limit, wakeOthers
}

// pokeStarved wakes the fetchers that found no room, once some was freed.
func (cs *Consumer) pokeStarved() {
	cs.budgetMu.Lock()
	defer cs.budgetMu.Unlock()
	for f := range cs.starved {
		f.poke()
	}
}

// forgetStarved drops a retired fetcher from the starved set.
func (cs *Consumer) forgetStarved(f *fetcher) {
	cs.budgetMu.Lock()
	defer cs.budgetMu.Unlock()
	delete(cs.starved, f)
}

func (f *fetcher) request(plan fetch.Plan, maxBytes int64) *kmsg.FetchRequest {
	cs := f.cs
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(cs.cfg.fetchMaxWait.Milliseconds())
	req.MinBytes = cs.cfg.fetchMinBytes
	req.MaxBytes = int32(maxBytes)
	req.IsolationLevel = int8(cs.cfg.isolation)
	req.SessionID = plan.SessionID
	req.SessionEpoch = plan.SessionEpoch
	req.Rack = cs.c.cfg.rack // v11+ (KIP-392): lets the broker name a replica in our rack
	idx := map[string]int{}
	for _, w := range plan.Send {
		t := topicEntry(&req.Topics, idx, w.Topic, func(name string) kmsg.FetchRequestTopic {
			t := kmsg.NewFetchRequestTopic()
			t.Topic = name
			if f.byID {
				t.TopicID = f.ids[name]
			}
			return t
		})
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition = w.Partition
		p.FetchOffset = w.Offset
		p.PartitionMaxBytes = w.MaxBytes
		p.CurrentLeaderEpoch = w.LeaderEpoch // KIP-320: a stale view is fenced
		p.LogStartOffset = -1
		t.Partitions = append(t.Partitions, p)
	}
	fidx := map[string]int{}
	for _, tp := range plan.Forget {
		t := topicEntry(&req.ForgottenTopics, fidx, tp.Topic, func(name string) kmsg.FetchRequestForgottenTopic {
			t := kmsg.NewFetchRequestForgottenTopic()
			t.Topic = name
			if f.byID {
				t.TopicID = f.ids[name]
			}
			return t
		})
		t.Partitions = append(t.Partitions, tp.Partition)
	}
	return req
}

func (f *fetcher) do(req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	cn, err := f.cs.cl.Conn(f.ctx, f.node, cluster.ClassFetch)
	if err != nil {
		return nil, err
	}
	resp, err := cn.Request(f.ctx, f.addressed(req))
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.FetchResponse), nil
}

// addressed is req as the connection must send it: by id when the
// fetcher's session goes by id (then also when req names no topic: an
// idle incremental fetch or the session's close goes at the session's
// addressing, or the broker refuses it), by name otherwise.
func (f *fetcher) addressed(req *kmsg.FetchRequest) kmsg.Request {
	if f.byID {
		return conn.FetchByID{FetchRequest: req}
	}
	return req
}

// closeSession closes the fetch session on the broker as the fetcher stops
// (retired, or the consumer closing), so the broker frees its slot now
// rather than when the session expires. A courtesy: only over a fetch
// connection that is already open, and briefly.
func (f *fetcher) closeSession() {
	plan, ok := f.session.Close()
	if !ok {
		return
	}
	cn := f.cs.cl.OpenConn(f.node, cluster.ClassFetch)
	if cn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(f.ctx), time.Second)
	defer cancel()
	req := f.request(plan, 0)
	req.MaxWaitMillis = 0
	if _, err := cn.Request(ctx, f.addressed(req)); err != nil {
		f.cs.c.log.Debug("closing the fetch session failed", "broker", f.node, "session", plan.SessionID, "err", err)
	}
}

func (f *fetcher) backoff() {
	f.fails++
	d := f.cs.c.cfg.retryBackoff.Delay(f.fails, rand.Float64())
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-f.ctx.Done():
	}
}
