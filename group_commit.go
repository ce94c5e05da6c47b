package riffle

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"

	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// committer serializes a member's offset commits: one OffsetCommit in
// flight at a time, later requests merged into the next, so a commit can
// never be overtaken by an earlier one.
type committer struct {
	m *member

	mu          sync.Mutex
	pending     map[TopicPartition]int64
	pendingMeta map[TopicPartition]string // per-partition metadata, else the configured one
	waiters     []chan error
	committed   map[TopicPartition]int64
	wake        chan struct{}
	// warnedMetaSize: OFFSET_METADATA_TOO_LARGE was logged once already.
	warnedMetaSize bool
}

func newCommitter(m *member) *committer {
	return &committer{
		m: m, pending: map[TopicPartition]int64{}, pendingMeta: map[TopicPartition]string{},
		committed: map[TopicPartition]int64{},
		wake:      make(chan struct{}, 1),
	}
}

// enqueue queues offsets with their metadata (metas may be nil or lack a
// partition: the configured CommitMetadata is used there).
func (c *committer) enqueue(offsets map[TopicPartition]int64, metas map[TopicPartition]string, w chan error) {
	c.mu.Lock()
	for tp, o := range offsets {
		c.pending[tp] = o
		if m, ok := metas[tp]; ok {
			c.pendingMeta[tp] = m
		} else {
			delete(c.pendingMeta, tp)
		}
	}
	if w != nil {
		c.waiters = append(c.waiters, w)
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// commitAsync queues offsets; errors are logged.
func (c *committer) commitAsync(offsets map[TopicPartition]int64, metas map[TopicPartition]string) {
	if len(offsets) > 0 {
		c.enqueue(offsets, metas, nil)
	}
}

// commitSync queues offsets and waits until a commit carrying them (or
// later ones) finished.
func (c *committer) commitSync(ctx context.Context, offsets map[TopicPartition]int64, metas map[TopicPartition]string) error {
	w := make(chan error, 1)
	c.enqueue(offsets, metas, w)
	select {
	case err := <-w:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
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
		offsets, metas, waiters := c.pending, c.pendingMeta, c.waiters
		c.pending, c.pendingMeta, c.waiters = map[TopicPartition]int64{}, map[TopicPartition]string{}, nil
		c.mu.Unlock()
		if len(offsets) == 0 {
			for _, w := range waiters {
				w <- nil
			}
			continue
		}
		err := c.send(ctx, offsets, metas)
		if err != nil && ctx.Err() == nil {
			c.m.cs.c.log.Warn("offset commit failed", "group", c.m.cfg.id, "err", err)
		}
		for _, w := range waiters {
			w <- err
		}
	}
}

func (c *committer) failWaiters(err error) {
	c.mu.Lock()
	ws := c.waiters
	c.waiters = nil
	c.mu.Unlock()
	for _, w := range ws {
		w <- err
	}
}

// send commits offsets, retrying coordinator moves; the generation and
// member id are those current at each attempt.
func (c *committer) send(ctx context.Context, offsets map[TopicPartition]int64, metas map[TopicPartition]string) error {
	m := c.m
	dropped := false // metas is our copy (metadata dropped for some)
	for attempt := 1; ; attempt++ {
		req := kmsg.NewPtrOffsetCommitRequest()
		m.mu.Lock()
		req.Group, req.Generation, req.MemberID = m.cfg.id, m.generation, m.memberID
		m.mu.Unlock()
		if m.cfg.instanceID != "" {
			req.InstanceID = &m.cfg.instanceID
		}
		tps := make([]TopicPartition, 0, len(offsets))
		for tp := range offsets {
			tps = append(tps, tp)
		}
		addCommitOffsets(req, tps, offsets, metas, m.cfg.commitMetadata)
		resp, err := m.groupRequest(ctx, req)
		if err != nil {
			if ctx.Err() != nil || attempt >= 5 {
				return err
			}
			m.sleep(ctx, m.cs.c.cfg.retryBackoff.Delay(attempt, rand.Float64()))
			continue
		}
		var errsOut, retryErrs []error
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
					retryErrs = append(retryErrs, fmt.Errorf("%s: %w", tp, kafkaerr.ForCode(p.ErrorCode)))
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
					if !dropped {
						metas, dropped = maps.Clone(metas), true
						if metas == nil {
							metas = map[TopicPartition]string{}
						}
					}
					metas[tp] = ""
					retry = true
					retryErrs = append(retryErrs, fmt.Errorf("%s: %w", tp, kafkaerr.ForCode(p.ErrorCode)))
					continue
				}
				errsOut = append(errsOut, fmt.Errorf("%s: %w", tp, kafkaerr.ForCode(p.ErrorCode)))
			}
		}
		if retry && attempt < 5 {
			m.sleep(ctx, m.cs.c.cfg.retryBackoff.Delay(attempt, rand.Float64()))
			continue
		}
		// Out of attempts: what still wanted a retry failed too.
		return errors.Join(append(errsOut, retryErrs...)...)
	}
}

// fetch returns the committed offsets of tps (-1 where none) and their
// metadata, waiting out unstable offsets of open transactions (KIP-447
// RequireStable).
func (c *committer) fetch(ctx context.Context, tps []TopicPartition) (map[TopicPartition]int64, map[TopicPartition]string, error) {
	m := c.m
	for attempt := 1; ; attempt++ {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = m.cfg.id
		req.RequireStable = true
		idx := map[string]int{}
		for _, tp := range tps {
			i, ok := idx[tp.Topic]
			if !ok {
				i = len(req.Topics)
				idx[tp.Topic] = i
				t := kmsg.NewOffsetFetchRequestTopic()
				t.Topic = tp.Topic
				req.Topics = append(req.Topics, t)
			}
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, tp.Partition)
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
			for _, t := range r.Topics {
				for _, p := range t.Partitions {
					out[TopicPartition{t.Topic, p.Partition}] = p.Offset
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
			return out, metas, nil
		case err == nil && !(m.coordinatorError(code) || code == kafkaerr.UnstableOffsetCommit):
			return nil, nil, kafkaerr.ForCode(code)
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		if attempt >= 20 {
			if err == nil {
				err = kafkaerr.ForCode(code)
			}
			return nil, nil, err
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
// where present, else def.
func addCommitOffsets(req *kmsg.OffsetCommitRequest, tps []TopicPartition, offsets map[TopicPartition]int64, metas map[TopicPartition]string, def string) {
	idx := map[string]int{}
	for _, tp := range tps {
		i, ok := idx[tp.Topic]
		if !ok {
			i = len(req.Topics)
			idx[tp.Topic] = i
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic = tp.Topic
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition = tp.Partition
		p.Offset = offsets[tp]
		p.LeaderEpoch = -1
		p.Metadata = kmsg.StringPtr(metaFor(metas, tp, def))
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
}
