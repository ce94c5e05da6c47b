package riffle

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Start offsets (earliest, latest, by time) are resolved per leader and
// asynchronously: each leader gets its own ListOffsets for the partitions
// it leads, on its own goroutine, and each partition starts fetching as
// soon as its own leader answered. A slow or dead broker so delays only
// the partitions it leads; the coordinator never waits for a ListOffsets.
// Partitions of a group member without a committed offset take the same
// path (their start is the reset policy).
//
// Results are fenced by the partition's epoch: a partition reset, revoked
// or moved while its request was out takes nothing from the answer.

// resolveItem is one partition in a ListOffsets request.
type resolveItem struct {
	p           *cpart
	epoch       uint64 // the partition's epoch when the request was sent
	leaderEpoch int32
}

// resolveOffsets starts resolving the start offsets of ps: exact offsets
// at once, the others by one request per (leader, timestamp) in flight.
func (cs *Consumer) resolveOffsets(ps []*cpart) {
	snap := cs.cl.Snapshot()
	type key struct {
		leader int32
		ts     int64
	}
	groups := map[key][]resolveItem{}
	now := time.Now()
	missing, started := false, false
	var waiting []*PartitionError // newly unknown to the metadata
	for _, p := range ps {
		p.mu.Lock()
		if p.state != stateNeedOffset || p.resolving == p.epoch+1 || now.Before(p.resolveAfter) {
			p.mu.Unlock()
			continue
		}
		if p.start.kind == 0 {
			p.startLocked(p.start.at, p.start.epoch())
			started = true
			p.mu.Unlock()
			continue
		}
		leader, lepoch := int32(-1), int32(-1)
		tm := snap.Topics[p.tp.Topic]
		if tm != nil {
			if pm, ok := tm.Partition(p.tp.Partition); ok && pm.Err == nil {
				leader, lepoch = pm.Leader, pm.LeaderEpoch
			}
		}
		if leader < 0 {
			// No leader yet: ask again after a backoff (the
			// coordinator's tick), never at once, or the coordinator
			// would spin for as long as the topic is missing.
			missing = true
			p.resolveFails++
			p.resolveAfter = now.Add(cs.c.cfg.retryBackoff.Delay(p.resolveFails, rand.Float64()))
			why := unknownPartition(tm, p.tp, cs.c.cfg.unknownTopicWait)
			if why != nil && p.unknownSince.IsZero() {
				p.unknownSince = now
			}
			// A topic created a moment ago is unknown to some brokers
			// for a while: reported only once it has been unknown for
			// UnknownTopicWait, as a lookup would fail then.
			if why != nil && now.Sub(p.unknownSince) >= cs.c.cfg.unknownTopicWait &&
				(p.waitErr == nil || p.waitErr.Err.Error() != why.Error()) {
				p.waitErr = &PartitionError{Topic: p.tp.Topic, Partition: p.tp.Partition, Offset: -1, Err: why}
				waiting = append(waiting, p.waitErr)
			}
			p.mu.Unlock()
			continue
		}
		p.unknownSince = time.Time{}
		p.resolving = p.epoch + 1
		k := key{leader, p.start.listTimestamp()}
		groups[k] = append(groups[k], resolveItem{p: p, epoch: p.epoch, leaderEpoch: lepoch})
		p.mu.Unlock()
	}
	if missing {
		cs.cl.TriggerMetadata()
	}
	for _, pe := range waiting {
		cs.reportWaiting(pe)
	}
	for k, items := range groups {
		// Refused once the consumer stops: nothing fetches any more.
		cs.life.Go(func() { cs.listStart(k.leader, k.ts, items) })
	}
	if started {
		// The next pass places them on their leaders' fetchers.
		cs.poke()
	}
}

// unknownPartition is why the metadata gives tp no leader when it says the
// topic or the partition does not exist, nil otherwise (not asked about
// yet, or a leader election in progress). The reason names the wait
// before it is reported (UnknownTopicWait), not the time waited, so that
// it is the same on every pass.
func unknownPartition(tm *cluster.TopicMeta, tp TopicPartition, wait time.Duration) error {
	if tm == nil {
		return nil
	}
	if tm.Err != nil {
		if errors.Is(tm.Err, kafkaerr.ForCode(kafkaerr.UnknownTopicOrPartition)) {
			return fmt.Errorf("%w %q: not in the metadata for %v (UnknownTopicWait); retrying in case it is created: %w", ErrUnknownTopic, tp.Topic, wait, tm.Err)
		}
		return nil
	}
	if _, ok := tm.Partition(tp.Partition); !ok {
		return fmt.Errorf("%w: topic %q has had no partition %d for %v (UnknownTopicWait; %d partitions); retrying in case it is created", ErrUnknownTopic, tp.Topic, tp.Partition, wait, len(tm.Partitions))
	}
	return nil
}

// reportWaiting reports a partition that waits for its topic or partition
// to exist: once per change, not per retry. The partition does not stop.
func (cs *Consumer) reportWaiting(pe *PartitionError) {
	cs.c.log.Warn("partition waits: topic or partition unknown; retrying", "topic", pe.Topic, "partition", pe.Partition, "err", pe.Err)
	if cs.cfg.onError != nil {
		cs.cfg.onError(pe)
	}
}

// listTimestamp is the ListOffsets timestamp of a symbolic start.
func (s StartOffset) listTimestamp() int64 {
	switch s.kind {
	case 1:
		return OffsetEarliest
	case 2:
		return OffsetLatest
	}
	return s.at
}

// startLocked starts the partition at off, whose record before it was
// written in leader epoch (-1: unknown). A known epoch (a committed
// offset's) gets the position checked against the leader's log first.
func (p *cpart) startLocked(off int64, epoch int32) {
	p.fetchOffset, p.position, p.processed = off, off, off
	p.fetchedEpoch, p.processedEpoch, p.checkedEpoch = epoch, epoch, -1
	p.startAt = off
	p.waitErr = nil
	if p.txnBase < 0 {
		p.txnBase, p.txnBaseEpoch = off, epoch
	}
	p.state = stateFetching
}

// listStart asks leader for the offsets of items at ts and applies each
// answer to its partition. A partition with no record at or after ts
// starts at the end of its log (as the Java client does).
func (cs *Consumer) listStart(leader int32, ts int64, items []resolveItem) {
	ctx, cancel := context.WithTimeout(cs.ctx, cs.c.cfg.retryTimeout)
	defer cancel()
	// reqErr: the request itself failed (network, timeout, a broker that
	// went away) for these partitions: always worth asking again.
	// perr: a partition's own Kafka error, retried only if retriable.
	offs, perr, err := cs.listOffsets(ctx, leader, ts, cs.cfg.isolation, items)
	reqErr := map[*cpart]error{}
	if err != nil {
		for _, it := range items {
			reqErr[it.p] = err
		}
	}
	if err == nil && ts >= 0 {
		var atEnd []resolveItem
		for _, it := range items {
			if o, ok := offs[it.p]; ok && o < 0 {
				atEnd = append(atEnd, it)
			}
		}
		if len(atEnd) > 0 {
			ends, endErrs, err := cs.listOffsets(ctx, leader, OffsetLatest, cs.cfg.isolation, atEnd)
			for _, it := range atEnd {
				delete(offs, it.p) // -1 is not a start
				if err != nil {
					reqErr[it.p] = err
				}
			}
			for p, o := range ends {
				offs[p] = o
			}
			for p, e := range endErrs {
				perr[p] = e
			}
		}
	}
	retry := false
	for _, it := range items {
		p := it.p
		o, ok := offs[p]
		pe := perr[p]
		p.mu.Lock()
		if p.resolving == it.epoch+1 {
			p.resolving = 0
		}
		if p.state != stateNeedOffset || p.epoch != it.epoch {
			p.mu.Unlock() // reset, moved or revoked meanwhile
			continue
		}
		switch {
		case pe == nil && reqErr[p] == nil && ok && o >= 0:
			p.resolveFails = 0
			p.startLocked(o, -1)
			p.mu.Unlock()
			continue
		case pe == nil || isRetriable(pe):
			// The request failed, no answer for it, a leader that
			// moved, an epoch mismatch: ask again after a backoff,
			// from fresh metadata.
			p.resolveFails++
			p.resolveAfter = time.Now().Add(cs.c.cfg.retryBackoff.Delay(p.resolveFails, rand.Float64()))
			retry = true
			p.mu.Unlock()
			why := pe
			if why == nil {
				why = reqErr[p]
			}
			if why != nil && cs.ctx.Err() == nil {
				cs.c.log.Debug("resolving a start offset failed; retrying", "topic", p.tp.Topic, "partition", p.tp.Partition, "broker", leader, "err", why)
			}
			continue
		}
		// The broker refused it for good (authorization, say): the
		// partition stops, reported as any other partition error;
		// Resume resolves the start offset again.
		p.state = stateFailed
		p.err = &PartitionError{Topic: p.tp.Topic, Partition: p.tp.Partition, Offset: -1,
			Err: fmt.Errorf("resolving the start offset (%s): %w", p.start, pe)}
		failed := p.err
		p.mu.Unlock()
		p.syncHooks()
		cs.reportError(failed)
	}
	if retry {
		cs.cl.TriggerMetadata()
		// The coordinator's tick picks them up once the backoff passed.
	}
	cs.poke()
}

func isRetriable(err error) bool {
	var ke *kafkaerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable
	}
	return IsRetriable(err)
}

// listOffsets sends one ListOffsets for items at ts, under isolation, to
// leader. It returns
// the offset per partition answered, the error per partition that failed,
// and an error for the whole request.
func (cs *Consumer) listOffsets(ctx context.Context, leader int32, ts int64, isolation IsolationLevel, items []resolveItem) (map[*cpart]int64, map[*cpart]error, error) {
	type tp struct {
		t string
		p int32
	}
	byTP := make(map[tp]*cpart, len(items))
	qs := make([]offsetsQuery, len(items))
	for i, it := range items {
		t := it.p.tp
		byTP[tp{t.Topic, t.Partition}] = it.p
		// KIP-320: the broker fences a stale view of the leader.
		qs[i] = offsetsQuery{topic: t.Topic, partition: t.Partition, timestamp: ts, leaderEpoch: it.leaderEpoch}
	}
	req := listOffsetsRequest(qs, isolation)
	resp, err := cs.cl.Request(ctx, leader, cluster.ClassOther, req)
	if err != nil {
		return nil, nil, err
	}
	lr := resp.(*kmsg.ListOffsetsResponse)
	offs := map[*cpart]int64{}
	perr := map[*cpart]error{}
	for _, rt := range lr.Topics {
		for _, rp := range rt.Partitions {
			p := byTP[tp{rt.Topic, rp.Partition}]
			if p == nil {
				continue // not asked for
			}
			if rp.ErrorCode != 0 {
				perr[p] = kafkaerr.ForCode(rp.ErrorCode)
				continue
			}
			off := rp.Offset
			if req.Version == 0 && len(rp.OldStyleOffsets) > 0 {
				off = rp.OldStyleOffsets[0]
			}
			offs[p] = off
		}
	}
	return offs, perr, nil
}
