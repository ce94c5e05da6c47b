package riffle

import (
	"context"
	"sync"
	"time"
)

// A consumer's lag, as its FetchBatchHooks see it, follows every fetch
// response, also those that leave a partition out (an incremental fetch
// session's answer when nothing changed: unchanged), and, for partitions
// that get no fetch response (stopped, paused, a full buffer), a
// ListOffsets refresh about once a second (refreshLag). The
// PartitionHooks are told of assignments, stops, resumes and removals
// (syncHooks), so that sinks drop the series of partitions the consumer
// lost. A partition's events go out under its hookMu, one at a time, and
// none after its PartitionRemoved: every event is built under mu from the
// partition's state, and a revoked partition builds none.

// partTold is what the PartitionHooks were last told of a partition.
type partTold int8

const (
	toldNothing partTold = iota
	toldActive           // Assigned or Resumed
	toldStopped
	toldRemoved
)

// hookState is a partition's state as the PartitionHooks see it.
type hookState struct {
	told    partTold
	err     *PartitionError // toldStopped
	handler bool
}

func (p *cpart) hookStateLocked() hookState {
	switch p.state {
	case stateRevoked:
		return hookState{told: toldRemoved}
	case stateFailed:
		return hookState{told: toldStopped, err: p.err, handler: p.handlerErr}
	}
	return hookState{told: toldActive}
}

// syncHooks tells the PartitionHooks what changed in p since they were
// last told. Every change of state they see (assigned, stopped, resumed,
// revoked) calls it, without p.mu held; a call that finds nothing new
// tells nothing, so concurrent calls are harmless.
func (p *cpart) syncHooks() {
	if len(p.cs.c.hooks.partition) == 0 {
		return
	}
	p.hookMu.Lock()
	defer p.hookMu.Unlock()
	p.mu.Lock()
	st := p.hookStateLocked()
	p.mu.Unlock()
	p.tellPartitionHooks(st)
}

// tellPartitionHooks brings the PartitionHooks from what they were told to
// now, in order: Assigned first, Resumed before a new Stopped, nothing
// after Removed. p.hookMu must be held.
func (p *cpart) tellPartitionHooks(now hookState) {
	hs := p.cs.c.hooks.partition
	if len(hs) == 0 || p.told == toldRemoved || now.told == p.told && now.err == p.toldErr {
		return
	}
	e := PartitionEvent{Group: p.cs.cfg.group.id, Topic: p.tp.Topic, Partition: p.tp.Partition}
	send := func(k PartitionEventKind) {
		e.Kind = k
		for _, h := range hs {
			h.OnPartition(e)
		}
	}
	if p.told == toldNothing {
		if now.told == toldRemoved {
			p.told = toldRemoved // never reported: nothing to take back
			return
		}
		send(PartitionAssigned)
		p.told = toldActive
	}
	if p.told == toldStopped && now.told != toldRemoved && (now.told != toldStopped || now.err != p.toldErr) {
		// Resumed, and maybe stopped again since.
		send(PartitionResumed)
		p.told = toldActive
	}
	switch {
	case now.told == toldStopped && p.told == toldActive:
		if now.err != nil {
			e.Err = now.err
		}
		e.Handler = now.handler
		send(PartitionStopped)
		e.Err, e.Handler = nil, false
	case now.told == toldRemoved:
		send(PartitionRemoved)
	}
	p.told, p.toldErr = now.told, now.err
}

// endLocked is where the partition's log ends for the consumer: the last
// stable offset with ReadCommitted, else the high watermark (also while
// the last stable offset is not known); -1 if unknown.
func (p *cpart) endLocked() int64 {
	if p.cs.cfg.isolation == ReadCommitted && p.lso >= 0 {
		return p.lso
	}
	return p.hw
}

// lagLocked is the partition's records-lag: its end minus its position
// (the fetch offset before the first record is handed over), -1 if
// either is unknown.
func (p *cpart) lagLocked() int64 {
	pos := p.position
	if pos < 0 {
		pos = p.fetchOffset
	}
	return lag(p.endLocked(), pos)
}

// unchanged reports a partition fetched from node under epoch at offset
// that the response left out (an incremental fetch session leaves out a
// partition with nothing new): its lag as of the current position, which
// the handler moved since the last response.
func (p *cpart) unchanged(node int32, epoch uint64, offset int64) {
	p.hookMu.Lock()
	defer p.hookMu.Unlock()
	p.mu.Lock()
	if p.epoch != epoch || p.fetchOffset != offset || p.state != stateFetching {
		p.mu.Unlock()
		return
	}
	p.fetchReports++
	e := p.lagEventLocked(node)
	st := p.hookStateLocked()
	p.mu.Unlock()
	p.tellPartitionHooks(st)
	p.cs.fetched(e)
}

// lagRefreshInterval is how often the lag refresher looks for partitions
// that got no fetch response since its last look (at least twice the
// fetch's MaxWait, so that a long poll is no such partition).
const lagRefreshInterval = time.Second

// refreshLag keeps the end offsets and the lag of the partitions that get
// no fetch responses (stopped by an error, paused, a full buffer) current
// for the FetchBatchHooks: every interval it asks the leaders of those
// that got none since its last look for their ends, and reports each in
// a Refreshed event. It runs only with FetchBatchHooks, on the consumer's
// lifecycle, and returns when the consumer stops.
func (cs *Consumer) refreshLag() {
	every := max(lagRefreshInterval, 2*cs.cfg.fetchMaxWait)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-cs.ctx.Done():
			return
		case <-t.C:
		}
		cs.refreshLagOnce(every)
	}
}

// refreshLagOnce is one look of the refresher: one ListOffsets per leader
// of the partitions that got no fetch response since the last look (two
// with ReadCommitted: the high watermark and the last stable offset), all
// within timeout.
func (cs *Consumer) refreshLagOnce(timeout time.Duration) {
	cs.mu.Lock()
	ps := make([]*cpart, 0, len(cs.parts))
	for _, p := range cs.parts {
		ps = append(ps, p)
	}
	cs.mu.Unlock()
	snap := cs.cl.Snapshot()
	byLeader := map[int32][]resolveItem{}
	marks := map[*cpart]uint64{} // read-only once the requests are out
	for _, p := range ps {
		p.mu.Lock()
		stalled := p.fetchReports == p.refreshMark && p.fetchOffset >= 0 &&
			(p.state == stateFetching || p.state == stateFailed)
		p.refreshMark = p.fetchReports
		p.mu.Unlock()
		if !stalled {
			continue
		}
		// From the metadata, not p.leader: the coordinator no longer
		// places a stopped partition.
		tm := snap.Topics[p.tp.Topic]
		if tm == nil {
			continue
		}
		pm, ok := tm.Partition(p.tp.Partition)
		if !ok || pm.Err != nil || pm.Leader < 0 {
			continue
		}
		byLeader[pm.Leader] = append(byLeader[pm.Leader], resolveItem{p: p, leaderEpoch: pm.LeaderEpoch})
		marks[p] = p.refreshMark
	}
	if len(byLeader) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(cs.ctx, timeout)
	defer cancel()
	var wg sync.WaitGroup
	for leader, items := range byLeader {
		wg.Go(func() { cs.refreshEnds(ctx, leader, items, marks) })
	}
	wg.Wait()
}

// refreshEnds asks leader for the ends of items and reports them.
func (cs *Consumer) refreshEnds(ctx context.Context, leader int32, items []resolveItem, marks map[*cpart]uint64) {
	hws, perr, err := cs.listOffsets(ctx, leader, OffsetLatest, ReadUncommitted, items)
	var lsos map[*cpart]int64
	if err == nil && cs.cfg.isolation == ReadCommitted {
		var lerr map[*cpart]error
		lsos, lerr, err = cs.listOffsets(ctx, leader, OffsetLatest, ReadCommitted, items)
		for p, e := range lerr {
			perr[p] = e
		}
	}
	if err != nil {
		if cs.ctx.Err() == nil {
			cs.c.log.Debug("refreshing the lag of partitions not fetched failed", "broker", leader, "err", err)
		}
		return
	}
	stale := false
	for _, it := range items {
		if e := perr[it.p]; e != nil {
			stale = stale || isRetriable(e) // a leader that moved, say
			continue
		}
		hw, ok := hws[it.p]
		lso := int64(-1)
		if lsos != nil {
			lso, ok = lsos[it.p]
		}
		if ok {
			it.p.refreshed(leader, marks[it.p], hw, lso)
		}
	}
	if stale {
		cs.cl.TriggerMetadata()
	}
}

// refreshed applies the ends a refresh found for p (lso -1: not asked)
// and reports its lag, unless a fetch response came meanwhile (its ends
// are as new) or the partition was reset or revoked.
func (p *cpart) refreshed(node int32, mark uint64, hw, lso int64) {
	p.hookMu.Lock()
	defer p.hookMu.Unlock()
	p.mu.Lock()
	if p.fetchReports != mark || p.state != stateFetching && p.state != stateFailed {
		p.mu.Unlock()
		return
	}
	if hw >= 0 {
		p.hw = hw
	}
	if lso >= 0 {
		p.lso = lso
	}
	e := p.lagEventLocked(node)
	e.Refreshed = true
	st := p.hookStateLocked()
	p.mu.Unlock()
	p.tellPartitionHooks(st)
	p.cs.fetched(e)
}
