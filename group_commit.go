package riffle

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// committer serializes a member's offset commits: one OffsetCommit in
// flight at a time, later requests merged into the next, so a commit can
// never be overtaken by an earlier one.
//
// Offsets read from the member's partitions carry the ownership token the
// partition had when they were read. A partition revoked or lost since has
// another token (or none), so such an offset is dropped, at enqueue or at
// send, never committed: a revoke takes a new token before it stops its
// partitions, so a position read earlier cannot overtake its commit, and a
// lost partition may be another member's already.
type committer struct {
	m *member

	mu        sync.Mutex
	pending   map[TopicPartition]commitEntry
	waiters   []*commitWaiter
	committed map[TopicPartition]int64
	wake      chan struct{}
	// warnedMetaSize: OFFSET_METADATA_TOO_LARGE was logged once already.
	warnedMetaSize bool
}

// commitEntry is one partition's offset waiting to be committed.
type commitEntry struct {
	offset  int64
	meta    string
	hasMeta bool   // else the configured CommitMetadata
	own     uint64 // ownership token it was read under; 0: unconditional (CommitOffsets)
	epoch   int32  // leader epoch of the record before offset, -1 unknown (KIP-320)
}

// commitWaiter waits for the commit carrying its offsets.
type commitWaiter struct {
	ch      chan error
	tps     map[TopicPartition]bool
	dropped []TopicPartition // no longer owned when enqueued
}

func newCommitter(m *member) *committer {
	return &committer{
		m: m, pending: map[TopicPartition]commitEntry{},
		committed: map[TopicPartition]int64{},
		wake:      make(chan struct{}, 1),
	}
}

// enqueue queues offsets with their metadata (metas may be nil or lack a
// partition: the configured CommitMetadata is used there). With own, each
// offset goes only if its partition is still owned under own[tp].
func (c *committer) enqueue(offsets map[TopicPartition]int64, metas map[TopicPartition]string, own map[TopicPartition]uint64, w chan error) {
	var cw *commitWaiter
	if w != nil {
		cw = &commitWaiter{ch: w, tps: make(map[TopicPartition]bool, len(offsets))}
	}
	// The ownership check and the insert happen under the member's lock,
	// so a revoke taking new tokens comes entirely before or after.
	c.m.mu.Lock()
	c.mu.Lock()
	for tp, o := range offsets {
		e := commitEntry{offset: o, epoch: c.m.cs.epochFor(tp, o)}
		if own != nil {
			if e.own = own[tp]; e.own == 0 || c.m.owned[tp] != e.own {
				if cw != nil {
					cw.dropped = append(cw.dropped, tp)
				}
				continue
			}
		}
		e.meta, e.hasMeta = metas[tp]
		c.pending[tp] = e
		if cw != nil {
			cw.tps[tp] = true
		}
	}
	if cw != nil {
		c.waiters = append(c.waiters, cw)
	}
	c.mu.Unlock()
	c.m.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// commitAsync queues offsets; errors are logged.
func (c *committer) commitAsync(offsets map[TopicPartition]int64, metas map[TopicPartition]string, own map[TopicPartition]uint64) {
	if len(offsets) > 0 {
		c.enqueue(offsets, metas, own, nil)
	}
}

// commitSync queues offsets and waits until a commit carrying them (or
// later ones) finished. The committer's goroutine belongs to the
// consumer's lifecycle: once the consumer stopped it, nothing would answer,
// so commitSync returns ErrConsumerClosed instead of waiting on a ctx that
// may never end.
func (c *committer) commitSync(ctx context.Context, offsets map[TopicPartition]int64, metas map[TopicPartition]string, own map[TopicPartition]uint64) error {
	stopped := c.m.cs.life.Context().Done()
	select {
	case <-stopped:
		return ErrConsumerClosed
	default:
	}
	w := make(chan error, 1)
	c.enqueue(offsets, metas, own, w)
	select {
	case err := <-w:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-stopped:
		return ErrConsumerClosed
	}
}

// outcome is what a commit means to w: its own partitions' errors only
// (a commit batch merges every caller's offsets, and another's failure,
// such as a partition of a topic deleted meanwhile, is not this one's),
// the request's error if the request itself failed (failed is nil), and
// the partitions left out as no longer owned.
func (w *commitWaiter) outcome(dropped []TopicPartition, failed map[TopicPartition]error, reqErr error) error {
	mine := w.dropped
	for _, tp := range dropped {
		if w.tps[tp] {
			mine = append(mine, tp)
		}
	}
	var errs []error
	if failed == nil {
		errs = append(errs, reqErr)
	} else {
		var tps []TopicPartition
		for tp := range w.tps {
			if failed[tp] != nil {
				tps = append(tps, tp)
			}
		}
		sortTPs(tps)
		for _, tp := range tps {
			errs = append(errs, failed[tp])
		}
	}
	if len(mine) > 0 {
		errs = append(errs, notOwned(mine))
	}
	return errors.Join(errs...)
}

// notOwned reports offsets left out because their partitions were no
// longer this member's.
func notOwned(tps []TopicPartition) error {
	sortTPs(tps)
	return fmt.Errorf("%w: %v no longer owned by this member (revoked, which commits them, or lost); not committed", ErrNotAssigned, tps)
}

// committedOffset returns the last committed offset of tp, or -1.
func (c *committer) committedOffset(tp TopicPartition) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o, ok := c.committed[tp]; ok {
		return o
	}
	return -1
}

// run sends commits one at a time until ctx ends.
func (c *committer) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			c.failWaiters(ctx.Err())
			return
		case <-c.wake:
		}
		c.mu.Lock()
		batch, waiters := c.pending, c.waiters
		c.pending, c.waiters = map[TopicPartition]commitEntry{}, nil
		c.mu.Unlock()
		var err error
		var dropped []TopicPartition
		var failed map[TopicPartition]error
		if len(batch) > 0 {
			start := time.Now()
			dropped, failed, err = c.send(ctx, batch)
			// send left the dropped entries out; when it dropped them
			// all, no request went out and there is no commit to report.
			if len(c.m.cs.c.hooks.commit) > 0 && len(batch) > 0 {
				c.reportCommit(batch, start, err)
			}
			if err != nil && ctx.Err() == nil {
				if rebalanceCommitError(err) {
					c.m.cs.c.log.Info("offset commit refused during a rebalance; the next commit retries", "group", c.m.cfg.id, "err", err)
				} else {
					c.m.cs.c.log.Warn("offset commit failed", "group", c.m.cfg.id, "err", err)
				}
			}
		}
		for _, w := range waiters {
			w.ch <- w.outcome(dropped, failed, err)
		}
	}
}

// rebalanceCommitError reports a commit refused because the group is
// rebalancing or moved to a newer generation: the next one retries.
func rebalanceCommitError(err error) bool {
	var ke *kafkaerr.Error
	if !errors.As(err, &ke) {
		return false
	}
	switch ke.Code {
	case kafkaerr.RebalanceInProgress, kafkaerr.IllegalGeneration, kafkaerr.StaleMemberEpoch:
		return true
	}
	return false
}

func (c *committer) failWaiters(err error) {
	c.mu.Lock()
	ws := c.waiters
	c.waiters = nil
	c.mu.Unlock()
	for _, w := range ws {
		w.ch <- err
	}
}

// send commits a batch, retrying coordinator moves; the generation and
// member id are those current at each attempt, and partitions no longer
// owned under their entry's token are left out (returned as dropped).
// send commits batch. It returns the partitions left out because they are
// no longer owned, and the error of each partition that failed; failed is
// nil when the request itself failed, with err saying why (err also joins
// the partitions' errors, for the log).
func (c *committer) send(ctx context.Context, batch map[TopicPartition]commitEntry) (dropped []TopicPartition, failed map[TopicPartition]error, err error) {
	m := c.m
	for attempt := 1; ; attempt++ {
		req := kmsg.NewPtrOffsetCommitRequest()
		tps := make([]TopicPartition, 0, len(batch))
		m.mu.Lock()
		req.Group, req.Generation, req.MemberID = m.cfg.id, m.generation, m.memberID
		for tp, e := range batch {
			if e.own != 0 && m.owned[tp] != e.own {
				dropped = append(dropped, tp)
				delete(batch, tp)
				continue
			}
			tps = append(tps, tp)
		}
		m.mu.Unlock()
		if len(tps) == 0 {
			return dropped, map[TopicPartition]error{}, nil
		}
		if m.cfg.instanceID != "" {
			req.InstanceID = &m.cfg.instanceID
		}
		offsets := make(map[TopicPartition]int64, len(batch))
		epochs := make(map[TopicPartition]int32, len(batch))
		metas := map[TopicPartition]string{}
		for tp, e := range batch {
			offsets[tp], epochs[tp] = e.offset, e.epoch
			if e.hasMeta {
				metas[tp] = e.meta
			}
		}
		addCommitOffsets(req, tps, offsets, metas, epochs, m.cfg.commitMetadata)
		resp, err := m.groupRequest(ctx, req)
		if err != nil {
			if ctx.Err() != nil || attempt >= 5 {
				return dropped, nil, err
			}
			m.sleep(ctx, m.cs.c.cfg.retryBackoff.Delay(attempt, rand.Float64()))
			continue
		}
		var errsOut, retryErrs []error
		failed = map[TopicPartition]error{}
		retry := false
		for _, t := range resp.(*kmsg.OffsetCommitResponse).Topics {
			for _, p := range t.Partitions {
				tp := TopicPartition{t.Topic, p.Partition}
				if p.ErrorCode == 0 {
					c.mu.Lock()
					c.committed[tp] = offsets[tp]
					c.mu.Unlock()
					continue
				}
				if m.coordinatorError(p.ErrorCode) {
					retry = true
					e := fmt.Errorf("%s: %w", tp, kafkaerr.ForCode(p.ErrorCode))
					retryErrs = append(retryErrs, e)
					failed[tp] = e
					continue
				}
				if p.ErrorCode == kafkaerr.OffsetMetadataTooLarge && metaFor(metas, tp, m.cfg.commitMetadata) != "" {
					// The broker's offset.metadata.max.bytes is below
					// what was sent: the offset alone is still right
					// (the metadata only saves repeated work), so
					// commit it without.
					c.mu.Lock()
					warn := !c.warnedMetaSize
					c.warnedMetaSize = true
					c.mu.Unlock()
					if warn {
						m.cs.c.log.Warn("commit metadata too large for the broker (offset.metadata.max.bytes); committing offsets without it",
							"group", m.cfg.id, "partition", tp.String(), "bytes", len(metaFor(metas, tp, m.cfg.commitMetadata)))
					}
					ent := batch[tp]
					ent.meta, ent.hasMeta = "", true
					batch[tp] = ent
					retry = true
					e := fmt.Errorf("%s: %w", tp, kafkaerr.ForCode(p.ErrorCode))
					retryErrs = append(retryErrs, e)
					failed[tp] = e
					continue
				}
				e := fmt.Errorf("%s: %w", tp, kafkaerr.ForCode(p.ErrorCode))
				errsOut = append(errsOut, e)
				failed[tp] = e
			}
		}
		if retry && attempt < 5 {
			m.sleep(ctx, m.cs.c.cfg.retryBackoff.Delay(attempt, rand.Float64()))
			continue
		}
		// Out of attempts: what still wanted a retry failed too.
		return dropped, failed, errors.Join(append(errsOut, retryErrs...)...)
	}
}

// fetch returns the committed offsets of tps (-1 where none), their
// metadata and leader epochs (-1 where unknown), waiting out unstable
// offsets of open transactions (KIP-447 RequireStable).
func (c *committer) fetch(ctx context.Context, tps []TopicPartition) (map[TopicPartition]int64, map[TopicPartition]string, map[TopicPartition]int32, error) {
	m := c.m
	for attempt := 1; ; attempt++ {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = m.cfg.id
		req.RequireStable = true
		idx := map[string]int{}
		for _, tp := range tps {
			t := topicEntry(&req.Topics, idx, tp.Topic, func(name string) kmsg.OffsetFetchRequestTopic {
				t := kmsg.NewOffsetFetchRequestTopic()
				t.Topic = name
				return t
			})
			t.Partitions = append(t.Partitions, tp.Partition)
		}
		resp, err := m.groupRequest(ctx, req)
		var code int16
		var r *kmsg.OffsetFetchResponse
		if err == nil {
			r = resp.(*kmsg.OffsetFetchResponse)
			code = r.ErrorCode
			for _, t := range r.Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode != 0 && code == 0 {
						code = p.ErrorCode
					}
				}
			}
		}
		switch {
		case err == nil && code == 0:
			out := map[TopicPartition]int64{}
			metas := map[TopicPartition]string{}
			epochs := map[TopicPartition]int32{}
			for _, t := range r.Topics {
				for _, p := range t.Partitions {
					out[TopicPartition{t.Topic, p.Partition}] = p.Offset
					epochs[TopicPartition{t.Topic, p.Partition}] = p.LeaderEpoch
					if p.Metadata != nil {
						metas[TopicPartition{t.Topic, p.Partition}] = *p.Metadata
					}
					if p.Offset >= 0 {
						c.mu.Lock()
						c.committed[TopicPartition{t.Topic, p.Partition}] = p.Offset
						c.mu.Unlock()
					}
				}
			}
			return out, metas, epochs, nil
		case err == nil && !(m.coordinatorError(code) || code == kafkaerr.UnstableOffsetCommit):
			return nil, nil, nil, kafkaerr.ForCode(code)
		}
		if ctx.Err() != nil {
			return nil, nil, nil, ctx.Err()
		}
		if attempt >= 20 {
			if err == nil {
				err = kafkaerr.ForCode(code)
			}
			return nil, nil, nil, err
		}
		m.sleep(ctx, m.cs.c.cfg.retryBackoff.Delay(attempt, rand.Float64()))
	}
}

// metaFor is the metadata committed with tp: metas[tp] where present,
// else def.
func metaFor(metas map[TopicPartition]string, tp TopicPartition, def string) string {
	if m, ok := metas[tp]; ok {
		return m
	}
	return def
}

// addCommitOffsets adds offsets[tp] for each of tps to an OffsetCommit
// request, grouped by topic in the order given, with metas[tp] as metadata
// where present, else def, and epochs[tp] as the leader epoch where
// present, else -1.
func addCommitOffsets(req *kmsg.OffsetCommitRequest, tps []TopicPartition, offsets map[TopicPartition]int64, metas map[TopicPartition]string, epochs map[TopicPartition]int32, def string) {
	idx := map[string]int{}
	for _, tp := range tps {
		t := topicEntry(&req.Topics, idx, tp.Topic, func(name string) kmsg.OffsetCommitRequestTopic {
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic = name
			return t
		})
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition = tp.Partition
		p.Offset = offsets[tp]
		p.LeaderEpoch = -1
		if e, ok := epochs[tp]; ok {
			p.LeaderEpoch = e
		}
		p.Metadata = kmsg.StringPtr(metaFor(metas, tp, def))
		t.Partitions = append(t.Partitions, p)
	}
}
