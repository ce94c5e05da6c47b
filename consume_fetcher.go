package riffle

import (
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/riffle-go/riffle/internal/batch"
	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/riffle-go/riffle/internal/fetch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetcher fetches the partitions one broker leads, on that broker's fetch
// connection, independently of every other broker's fetcher.
type fetcher struct {
	cs      *Consumer
	node    int32
	wake    chan struct{}
	session fetch.Session
	fails   int
	slab    slabSink // decodes each partition of a response
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
	r.Key, r.Value, r.Headers = br.Key, br.Value, br.Headers
	r.Timestamp = time.UnixMilli(br.Timestamp)
	r.Offset = br.Offset
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
	p      *cpart
	epoch  uint64
	offset int64
}

func (f *fetcher) loop() {
	cs := f.cs
	for {
		wants, sent, reserve := f.collect()
		if len(wants) == 0 {
			select {
			case <-cs.ctx.Done():
				return
			case <-f.wake:
				continue
			}
		}
		plan := f.session.Plan(wants)
		req := f.request(plan, reserve)
		log := cs.c.log
		// Guarded: the arguments would be boxed (allocated) even for a
		// disabled level, per fetch and per partition.
		debug := log.Enabled(cs.ctx, slog.LevelDebug)
		if debug {
			log.Debug("fetch", "broker", f.node, "session", plan.SessionID, "epoch", plan.SessionEpoch,
				"partitions", len(wants), "sent", len(plan.Send), "forgotten", len(plan.Forget))
		}
		resp, err := f.do(req)
		if err != nil {
			cs.reserved.Add(-reserve)
			cs.pokeStarved()
			f.session.Fail()
			if cs.ctx.Err() != nil {
				return
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
		moved := false
		opts := fetch.DecodeOptions{
			ReadCommitted: cs.cfg.isolation == ReadCommitted,
			Batch:         batch.DecodeOptions{SkipCRC: !cs.cfg.checkCRC, MaxDecompressedSize: cs.cfg.maxDecompressed},
		}
		for i := range resp.Topics {
			rt := &resp.Topics[i]
			for j := range rt.Partitions {
				rp := &rt.Partitions[j]
				tp := fetch.TP{Topic: rt.Topic, Partition: rp.Partition}
				s, ok := sent[tp]
				if !ok {
					log.Debug("fetch response for a partition not asked for", "broker", f.node, "topic", tp.Topic, "partition", tp.Partition)
					continue // a partition the session still had; ignore
				}
				f.slab = slabSink{topic: rt.Topic, part: rp.Partition}
				res := fetch.DecodePartitionTo(rp, s.offset, opts, &f.slab)
				slab := f.slab.recs
				f.slab.recs = nil
				if debug {
					log.Debug("fetched", "broker", f.node, "topic", tp.Topic, "partition", tp.Partition,
						"offset", s.offset, "records", len(slab), "next", res.NextOffset, "err", res.Err)
				}
				if s.p.applyFetch(s.epoch, s.offset, res, slab) {
					moved = true
				}
			}
		}
		// Released only now that what came back is counted as
		// buffered: released before, the room would look free to
		// another broker's fetcher while these records are decoded.
		cs.reserved.Add(-reserve)
		cs.pokeStarved()
		if moved {
			cs.cl.TriggerMetadata()
			cs.poke()
		}
	}
}

// collect lists this broker's partitions that want data, within the
// consumer's byte budget, and reserves what the request may return: the
// sum of its partitions' limits (never the whole budget, which would starve
// other brokers' fetchers while this one long-polls). The check and the
// reservation are atomic across fetchers; each fetcher reserves at most
// its broker's share of the budget; and a fetcher with records to fetch
// that found no room gets the next room before the others (see starved).
func (f *fetcher) collect() ([]fetch.Want, map[fetch.TP]sentPart, int64) {
	wants, sent, total, wakeOthers := f.collectLocked()
	if wakeOthers {
		f.cs.mu.Lock()
		for _, o := range f.cs.fetchers {
			if o != f {
				o.poke()
			}
		}
		f.cs.mu.Unlock()
	}
	return wants, sent, total
}

func (f *fetcher) collectLocked() (_ []fetch.Want, _ map[fetch.TP]sentPart, _ int64, wakeOthers bool) {
	cs := f.cs
	cs.budgetMu.Lock()
	defer cs.budgetMu.Unlock()
	budget := cs.cfg.maxBuffered - cs.buffered.Load() - cs.reserved.Load()
	limit := min(int64(cs.cfg.fetchMaxBytes), budget)
	// A fetcher reserves at most its broker's share of the budget: the
	// caught-up partitions of one broker, long-polling, must not hold
	// all of it while another broker's partitions have data.
	cs.mu.Lock()
	brokers := int64(len(cs.fetchers))
	cs.mu.Unlock()
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
	// Partitions with records to fetch come first: room given to a
	// caught-up partition only pays for a long poll.
	type cand struct {
		p      *cpart
		off    int64
		epoch  uint64
		behind bool
	}
	var cands []cand
	for _, p := range cs.ownedBy(f.node) {
		if off, epoch, _, ok := p.want(f.node); ok {
			cands = append(cands, cand{p, off, epoch, p.behind()})
		}
	}
	slices.SortStableFunc(cands, func(a, b cand) int {
		switch {
		case a.behind == b.behind:
			return 0
		case a.behind:
			return -1
		}
		return 1
	})
	behind := len(cands) > 0 && cands[0].behind
	var wants []fetch.Want
	sent := map[fetch.TP]sentPart{}
	var total int64
	for _, c := range cands {
		if total >= limit {
			break
		}
		max := min(int64(cs.cfg.partitionMax), limit-total)
		total += max
		tp := fetch.TP{Topic: c.p.tp.Topic, Partition: c.p.tp.Partition}
		wants = append(wants, fetch.Want{TP: tp, Offset: c.off, MaxBytes: int32(max), LeaderEpoch: -1})
		sent[tp] = sentPart{p: c.p, epoch: c.epoch, offset: c.off}
	}
	// Only a fetcher with data to fetch counts as starved: one whose
	// partitions are caught up would just long-poll with the room.
	switch {
	case len(wants) == 0 && behind && !yielding:
		cs.starved[f] = struct{}{}
	case starved && (len(wants) > 0 || !behind):
		delete(cs.starved, f)
		wakeOthers = true // they were yielding to f
	}
	if len(wants) == 0 {
		return nil, nil, 0, wakeOthers
	}
	cs.reserved.Add(total)
	return wants, sent, total, wakeOthers
}

// pokeStarved wakes the fetchers that found no room, once some was freed.
func (cs *Consumer) pokeStarved() {
	cs.budgetMu.Lock()
	defer cs.budgetMu.Unlock()
	for f := range cs.starved {
		f.poke()
	}
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
	idx := map[string]int{}
	for _, w := range plan.Send {
		i, ok := idx[w.Topic]
		if !ok {
			i = len(req.Topics)
			idx[w.Topic] = i
			t := kmsg.NewFetchRequestTopic()
			t.Topic = w.Topic
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition = w.Partition
		p.FetchOffset = w.Offset
		p.PartitionMaxBytes = w.MaxBytes
		p.CurrentLeaderEpoch = w.LeaderEpoch
		p.LogStartOffset = -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	fidx := map[string]int{}
	for _, tp := range plan.Forget {
		i, ok := fidx[tp.Topic]
		if !ok {
			i = len(req.ForgottenTopics)
			fidx[tp.Topic] = i
			t := kmsg.NewFetchRequestForgottenTopic()
			t.Topic = tp.Topic
			req.ForgottenTopics = append(req.ForgottenTopics, t)
		}
		req.ForgottenTopics[i].Partitions = append(req.ForgottenTopics[i].Partitions, tp.Partition)
	}
	return req
}

func (f *fetcher) do(req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	cn, err := f.cs.cl.Conn(f.cs.ctx, f.node, cluster.ClassFetch)
	if err != nil {
		return nil, err
	}
	resp, err := cn.Request(f.cs.ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.FetchResponse), nil
}

func (f *fetcher) backoff() {
	f.fails++
	d := f.cs.c.cfg.retryBackoff.Delay(f.fails, rand.Float64())
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-f.cs.ctx.Done():
	}
}
