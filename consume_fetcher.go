package riffle

import (
	"math/rand/v2"
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
		log.Debug("fetch", "broker", f.node, "session", plan.SessionID, "epoch", plan.SessionEpoch,
			"partitions", len(wants), "sent", len(plan.Send), "forgotten", len(plan.Forget))
		resp, err := f.do(req)
		if err != nil {
			cs.reserved.Add(-reserve)
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
				res := fetch.DecodePartition(rp, s.offset, opts)
				log.Debug("fetched", "broker", f.node, "topic", tp.Topic, "partition", tp.Partition,
					"offset", s.offset, "records", len(res.Records), "next", res.NextOffset, "err", res.Err)
				if s.p.applyFetch(s.epoch, s.offset, res) {
					moved = true
				}
			}
		}
		// Released only now that what came back is counted as
		// buffered: released before, the room would look free to
		// another broker's fetcher while these records are decoded.
		cs.reserved.Add(-reserve)
		if moved {
			cs.cl.TriggerMetadata()
			cs.poke()
		}
	}
}

// collect lists this broker's partitions that want data, within the
// consumer's byte budget, and reserves what the request may return: the
// sum of its partitions' limits (never the whole budget, which would starve
// other brokers' fetchers while this one long-polls).
func (f *fetcher) collect() ([]fetch.Want, map[fetch.TP]sentPart, int64) {
	cs := f.cs
	cs.budgetMu.Lock()
	defer cs.budgetMu.Unlock()
	budget := cs.cfg.maxBuffered - cs.buffered.Load() - cs.reserved.Load()
	limit := min(int64(cs.cfg.fetchMaxBytes), budget)
	if limit <= 0 {
		return nil, nil, 0
	}
	var wants []fetch.Want
	sent := map[fetch.TP]sentPart{}
	var total int64
	for _, p := range cs.ownedBy(f.node) {
		if total >= limit {
			break
		}
		off, epoch, _, ok := p.want(f.node)
		if !ok {
			continue
		}
		max := min(int64(cs.cfg.partitionMax), limit-total)
		total += max
		tp := fetch.TP{Topic: p.tp.Topic, Partition: p.tp.Partition}
		wants = append(wants, fetch.Want{TP: tp, Offset: off, MaxBytes: int32(max), LeaderEpoch: -1})
		sent[tp] = sentPart{p: p, epoch: epoch, offset: off}
	}
	if len(wants) == 0 {
		return nil, nil, 0
	}
	cs.reserved.Add(total)
	return wants, sent, total
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
