package riffle

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/riffle-go/riffle/internal/conn"
	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/riffle-go/riffle/internal/producer"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sink sends produce requests to one broker. Its loop writes requests in
// order on the broker's produce connection; its handler reads the answers
// in the same order, so each partition's responses are handled in send
// order by construction.
type sink struct {
	p    *Producer
	node int32

	mu    sync.Mutex
	ready map[*partState]struct{}
	wake  chan struct{}

	inflight    chan *sentReq // FIFO from loop to handler
	outstanding atomic.Int32  // requests sent and not yet handled
	connID      uint64        // connection the outstanding requests use
}

// sentReq is one produce request on the wire and what it carried.
type sentReq struct {
	pend    *conn.Pending
	sendErr error
	cn      *conn.Conn
	items   []sentItem
}

type sentItem struct {
	part  *partState
	b     *producer.Batch
	epoch uint64
}

func (p *Producer) sinkFor(node int32) *sink {
	p.sinksMu.Lock()
	defer p.sinksMu.Unlock()
	s, ok := p.sinks[node]
	if ok {
		return s
	}
	s = &sink{
		p: p, node: node,
		ready:    map[*partState]struct{}{},
		wake:     make(chan struct{}, 1),
		inflight: make(chan *sentReq, p.c.cfg.maxInflight),
	}
	p.sinks[node] = s
	// Both or neither: the handler reads what the loop sends until the
	// loop ends. Once the producer stops, neither starts (nothing would
	// be sent; Close fails what is left).
	p.life.Go(s.loop, s.handle)
	return s
}

// add marks a partition as having something to send.
func (s *sink) add(part *partState) {
	s.mu.Lock()
	s.ready[part] = struct{}{}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// readyPart is a partition to hand to a sink (see partState.flush).
type readyPart struct {
	sink *sink
	part *partState
}

// addReady hands every partition of ps to its sink, each sink's at once:
// its sender, woken once, takes them all into one request. It clears ps.
func addReady(ps []readyPart) {
	for i := range ps {
		s := ps[i].sink
		if s == nil {
			continue
		}
		s.mu.Lock()
		for j := i; j < len(ps); j++ {
			if ps[j].sink == s {
				s.ready[ps[j].part] = struct{}{}
				ps[j] = readyPart{}
			}
		}
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

func (s *sink) loop() {
	defer close(s.inflight)
	for {
		select {
		case <-s.p.ctx.Done():
			return
		case <-s.wake:
		}
		for s.sendOnce() {
			if s.p.ctx.Err() != nil {
				return
			}
		}
	}
}

// sendOnce builds and writes one request from the ready partitions (one
// batch per partition, as brokers require). It returns true if it sent
// something, so the loop tries again for pipelined batches.
func (s *sink) sendOnce() bool {
	s.mu.Lock()
	parts := make([]*partState, 0, len(s.ready))
	for part := range s.ready {
		parts = append(parts, part)
	}
	clear(s.ready)
	s.mu.Unlock()
	if len(parts) == 0 {
		return false
	}
	// The connection comes first: a batch is only taken (and numbered)
	// when it can go out at once.
	cn, err := s.p.cl.Conn(s.p.ctx, s.node, cluster.ClassProduce)
	if err != nil {
		if s.p.ctx.Err() != nil {
			return false
		}
		// Nothing was sent: back the partitions off and let metadata
		// say whether the leader moved.
		s.p.cl.TriggerMetadata()
		for _, part := range parts {
			part.mu.Lock()
			part.backoffLocked()
			part.wakeLocked()
			part.mu.Unlock()
		}
		return false
	}
	if cn.ID() != s.connID {
		// A new connection to this broker: requests still outstanding on
		// the old one could be answered after requests sent on the new
		// one, breaking per-partition order. Wait for them to drain.
		if s.outstanding.Load() > 0 {
			s.mu.Lock()
			for _, part := range parts {
				s.ready[part] = struct{}{}
			}
			s.mu.Unlock()
			return false
		}
		s.connID = cn.ID()
	}
	var items []sentItem
	var bad []*pbatch
	var badParts []*partState
	size := 0
	for _, part := range parts {
		part.mu.Lock()
		if size >= s.p.cfg.maxRequestBytes {
			part.mu.Unlock()
			s.add(part) // next request
			continue
		}
		if part.leader() != s.node {
			// The leader moved: the partition goes to its new sink; its
			// state machine holds it back until requests here drain.
			part.wakeLocked()
			part.mu.Unlock()
			continue
		}
		if part.backoff.After(nowFn()) {
			part.wakeLocked()
			part.mu.Unlock()
			continue
		}
		if s.p.txn != nil && !s.p.txn.mayPin(part) {
			// Not in the transaction yet (v1: it is being added, and
			// woken then), or the transaction takes no more batches.
			part.mu.Unlock()
			continue
		}
		// Read the identity under the partition lock: the epoch bump
		// checks quiescence under the same lock, so a batch is never
		// numbered with an identity that is being replaced.
		id, bumping := s.p.id.current()
		b, epoch := part.seq.Next(s.node, id, bumping)
		if b != nil {
			pb := b.Payload.(*pbatch)
			if s.p.cfg.idempotent {
				pb.enc.SetProducer(b.ID.ID, b.ID.Epoch, b.Seq)
			}
			if s.p.txn != nil {
				s.p.txn.wrote(part)
			}
			items = append(items, sentItem{part, b, epoch})
			size += len(pb.enc.Bytes())
			// The batch waiting for this one goes next: its
			// records kept coming while it waited.
			if fb := part.sealDueLocked(); fb != nil {
				bad = append(bad, fb)
				badParts = append(badParts, part)
			}
		}
		part.mu.Unlock()
	}
	for i, b := range bad {
		badParts[i].failBad([]*pbatch{b})
	}
	if len(items) == 0 {
		return false
	}
	req := s.p.buildRequest(items)
	sr := &sentReq{items: items, cn: cn}
	sr.pend, sr.sendErr = cn.Send(s.p.ctx, req)
	s.outstanding.Add(1)
	select {
	case s.inflight <- sr:
	case <-s.p.ctx.Done():
		s.outstanding.Add(-1)
		return false
	}
	// Partitions with more batches can pipeline (the state machine says
	// whether): offer them again.
	for _, it := range items {
		it.part.mu.Lock()
		if it.part.seq.HasSendable() {
			s.add(it.part)
		}
		it.part.mu.Unlock()
	}
	return true
}

func (p *Producer) buildRequest(items []sentItem) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = int16(p.cfg.acks)
	req.TimeoutMillis = int32(p.cfg.produceTimeout.Milliseconds())
	if p.txn != nil {
		req.TransactionID = &p.cfg.transactionalID
	}
	idx := map[string]int{}
	for _, it := range items {
		t := topicEntry(&req.Topics, idx, it.part.topic.name, func(name string) kmsg.ProduceRequestTopic {
			t := kmsg.NewProduceRequestTopic()
			t.Topic = name
			return t
		})
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = it.part.id
		rp.Records = it.b.Payload.(*pbatch).enc.Bytes()
		t.Partitions = append(t.Partitions, rp)
	}
	return req
}

// handle processes responses in send order.
func (s *sink) handle() {
	for sr := range s.inflight {
		var resp kmsg.Response
		err := sr.sendErr
		if err == nil {
			resp, err = sr.pend.Wait(s.p.ctx)
		}
		var pr *kmsg.ProduceResponse
		if err == nil && resp != nil {
			pr = resp.(*kmsg.ProduceResponse)
		}
		if err != nil {
			s.p.cl.TriggerMetadata()
		}
		if pr != nil {
			// Before the batches are retried: they go to the leaders
			// the answer names.
			s.p.applyHints(pr)
		}
		for _, it := range sr.items {
			s.p.complete(s.node, it, pr, err, sr.pend == nil)
		}
		if s.outstanding.Add(-1) == 0 {
			select {
			case s.wake <- struct{}{}:
			default:
			}
		}
	}
}

// complete applies one partition's result to its state machine and acts
// on the answer.
func (p *Producer) complete(node int32, it sentItem, pr *kmsg.ProduceResponse, reqErr error, notSent bool) {
	part := it.part
	outcome, baseOffset, logStart, perr := classify(part, pr, reqErr, p.cfg.acks)
	if notSent && reqErr != nil {
		// Send failed before anything was written: certainly not
		// written, so the batch stays free to expire or renumber.
		outcome = producer.Retry
	}
	part.mu.Lock()
	res := part.seq.Done(it.b, it.epoch, outcome, baseOffset, logStart)
	if res.Completed != nil {
		part.retries = 0
	}
	if perr != nil && res.Completed != it.b && res.Failed != it.b {
		it.b.Payload.(*pbatch).lastErr = perr
	}
	if res.Rewound {
		if retryAtOnce(brokerCode(perr, reqErr), node, part.leader()) {
			// The leader moved (a hint in this answer, or a refresh
			// since): resend to it without backing off, as Java's
			// producer does after a leader change (KIP-951).
			part.backoff = time.Time{}
		} else {
			part.backoffLocked()
			if outcome == producer.Retry || outcome == producer.Unknown {
				p.cl.TriggerMetadata()
			}
		}
	}
	sealBad := part.sealDueLocked() // a batch the rewind or failure left waiting
	part.wakeLocked()
	part.mu.Unlock()
	part.failBad([]*pbatch{sealBad})

	name := part.topic.name
	switch {
	case res.Completed != nil:
		pb := res.Completed.Payload.(*pbatch)
		for _, h := range p.written {
			h.OnBatchWritten(BrokerInfo{NodeID: node}, name, part.id, len(pb.recs), pb.wireBytes)
		}
		p.finish(pb, name, part.id, baseOffset, nil)
	case res.Failed != nil && res.DataLoss:
		err := fmt.Errorf("%s[%d]: %w: %w", name, part.id, ErrDataLoss, perr)
		for _, h := range p.dataLoss {
			h.OnDataLoss(name, part.id, err)
		}
		if p.cfg.stopOnDataLoss {
			p.id.stop(err)
		}
		p.finish(res.Failed.Payload.(*pbatch), name, part.id, -1, err)
	case res.Failed != nil:
		p.finish(res.Failed.Payload.(*pbatch), name, part.id, -1, fmt.Errorf("%s[%d]: %w", name, part.id, perr))
	}
	if p.txn != nil && res.NeedBump && res.Failed == nil && perr != nil {
		// The batch waits for a new epoch (INVALID_PRODUCER_EPOCH,
		// KIP-360 cases): in a transaction that fails it.
		p.txn.recordFailed(fmt.Errorf("%s[%d]: %w", name, part.id, perr))
	}
	if res.NeedBump {
		p.requestBump()
	} else if _, bumping := p.id.current(); bumping {
		p.id.poke()
	}
}

// applyHints applies the leader hints of a produce answer (KIP-951: the
// CurrentLeader of NOT_LEADER_OR_FOLLOWER, with the answer's
// NodeEndpoints) to the client's metadata; a hint it cannot apply
// refreshes metadata.
func (p *Producer) applyHints(pr *kmsg.ProduceResponse) {
	var hints []cluster.LeaderHint
	for i := range pr.Topics {
		rt := &pr.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			if h, ok := cluster.HintFrom(rp.ErrorCode, rt.Topic, rp.Partition, rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch); ok {
				hints = append(hints, h)
			}
		}
	}
	if len(hints) == 0 {
		return
	}
	eps := make([]cluster.BrokerMeta, len(pr.Brokers))
	for i, b := range pr.Brokers {
		eps[i] = cluster.BrokerMeta{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: deref(b.Rack)}
	}
	p.cl.ApplyLeaderHints(hints, eps)
}

// brokerCode is the error code of a partition's answer as classify
// returns it (a bare *kafkaerr.Error for the retriable codes), 0 for a
// request that failed as a whole or any other error.
func brokerCode(perr, reqErr error) int16 {
	if ke, ok := perr.(*kafkaerr.Error); ok && reqErr == nil {
		return ke.Code
	}
	return 0
}

// retryAtOnce decides whether a batch the broker sentTo refused with code
// goes again without backing off: only when the broker said it does not
// lead the partition and the metadata now names another leader (a hint
// applied, or a refresh since), to which the retry goes. Pure.
func retryAtOnce(code int16, sentTo, leader int32) bool {
	return (code == kafkaerr.NotLeaderForPartition || code == kafkaerr.FencedLeaderEpoch) &&
		leader >= 0 && leader != sentTo
}

// classify maps a partition's produce result to a state machine outcome.
func classify(part *partState, pr *kmsg.ProduceResponse, reqErr error, acks Acks) (producer.Outcome, int64, int64, error) {
	if reqErr != nil {
		// The request may or may not have been written.
		return producer.Unknown, -1, -1, reqErr
	}
	if pr == nil {
		if acks == AcksNone {
			return producer.OK, -1, -1, nil
		}
		return producer.Unknown, -1, -1, errors.New("empty produce response")
	}
	for _, t := range pr.Topics {
		if t.Topic != part.topic.name {
			continue
		}
		for _, rp := range t.Partitions {
			if rp.Partition != part.id {
				continue
			}
			err := kafkaerr.ForCode(rp.ErrorCode)
			switch rp.ErrorCode {
			case 0, kafkaerr.DuplicateSequenceNumber:
				return producer.OK, rp.BaseOffset, rp.LogStartOffset, nil
			case kafkaerr.OutOfOrderSequenceNumber:
				return producer.OutOfOrder, -1, rp.LogStartOffset, err
			case kafkaerr.UnknownProducerID:
				return producer.UnknownProducer, -1, rp.LogStartOffset, err
			case kafkaerr.InvalidProducerEpoch:
				return producer.InvalidEpoch, -1, rp.LogStartOffset, err
			case kafkaerr.RequestTimedOut, kafkaerr.NotEnoughReplicasAfterAppend, kafkaerr.NetworkException:
				return producer.Unknown, -1, rp.LogStartOffset, err
			}
			switch rp.ErrorCode {
			case kafkaerr.UnknownTopicOrPartition, kafkaerr.LeaderNotAvailable, kafkaerr.NotEnoughReplicas,
				// Transaction version 2 (KIP-890, Kafka 4's default): the
				// partition leader adds the partition to the transaction
				// itself, and the coordinator refuses while the previous
				// transaction's markers are still being written (Java
				// retries it too: ConcurrentTransactionsException is
				// retriable).
				kafkaerr.ConcurrentTransactions:
				// Checked before the append: certainly not written.
				return producer.Retry, -1, rp.LogStartOffset, err
			}
			if kafkaerr.Typed(rp.ErrorCode).Retriable && rp.ErrorCode != kafkaerr.CorruptMessage {
				// Other retriable errors (NOT_LEADER_OR_FOLLOWER after a
				// leader change during the replica wait, storage errors)
				// may come after the append: the outcome is unknown.
				return producer.Unknown, -1, rp.LogStartOffset, err
			}
			if rp.ErrorMessage != nil && *rp.ErrorMessage != "" {
				err = fmt.Errorf("%w: %s", err, *rp.ErrorMessage)
			}
			return producer.Fatal, -1, rp.LogStartOffset, err
		}
	}
	return producer.Unknown, -1, -1, fmt.Errorf("%w: produce response lacks %s[%d]", ErrMalformedResponse, part.topic.name, part.id)
}

// wakeAll offers every partition with queued batches to its sender.
func (p *Producer) wakeAll() {
	for _, ts := range *p.topics.Load() {
		for _, part := range ts.partitions() {
			part.mu.Lock()
			part.wakeLocked()
			part.mu.Unlock()
		}
	}
}
