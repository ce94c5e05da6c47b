package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// metaState is the metadata owner's state. One goroutine (metadataLoop)
// issues every refresh; callers register as waiters and are woken by the
// first refresh that starts after they asked, so any number of concurrent
// lookups cost one request.
type metaState struct {
	snap atomic.Pointer[Snapshot]

	mu        sync.Mutex
	waiters   []chan error
	immediate bool
	interest  map[string]struct{} // topics refreshed every time
	allTopics bool                // someone needs every topic
	trigger   chan struct{}
	refreshes atomic.Int64
}

func (m *metaState) init() {
	m.snap.Store(emptySnapshot())
	m.interest = make(map[string]struct{})
	m.trigger = make(chan struct{}, 1)
}

// Snapshot returns the current metadata (never nil).
func (c *Cluster) Snapshot() *Snapshot { return c.meta.snap.Load() }

// Refreshes returns how many metadata requests the owner has issued.
func (c *Cluster) Refreshes() int64 { return c.meta.refreshes.Load() }

// AddTopics adds topics to those every refresh asks about.
func (c *Cluster) AddTopics(topics ...string) {
	c.meta.mu.Lock()
	defer c.meta.mu.Unlock()
	for _, t := range topics {
		c.meta.interest[t] = struct{}{}
	}
}

// RefreshMetadata asks the owner for a refresh and waits for it. immediate
// refreshes (leader errors, unknown topics) wait only for the minimum age
// since the previous refresh; others may be coalesced with the periodic one.
func (c *Cluster) RefreshMetadata(ctx context.Context, immediate bool) error {
	w := make(chan error, 1)
	c.meta.mu.Lock()
	c.meta.waiters = append(c.meta.waiters, w)
	if immediate {
		c.meta.immediate = true
	}
	c.meta.mu.Unlock()
	c.TriggerMetadata()
	select {
	case err := <-w:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-c.ctx.Done():
		return errs.ErrClientClosed
	}
}

// TriggerMetadata requests an immediate refresh without waiting for it.
func (c *Cluster) TriggerMetadata() {
	c.meta.mu.Lock()
	c.meta.immediate = true
	c.meta.mu.Unlock()
	select {
	case c.meta.trigger <- struct{}{}:
	default:
	}
}

func (c *Cluster) metadataLoop() {
	maxAge := time.NewTimer(c.cfg.MetadataMaxAge)
	defer maxAge.Stop()
	var last time.Time
	for {
		select {
		case <-c.ctx.Done():
			c.failWaiters(errs.ErrClientClosed)
			return
		case <-c.meta.trigger:
		case <-maxAge.C:
		}
		// The minimum age bounds how often a storm of leader errors can
		// hit the cluster; waiters arriving meanwhile join this refresh.
		if wait := time.Until(last.Add(c.cfg.MetadataMinAge)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-c.ctx.Done():
				t.Stop()
				c.failWaiters(errs.ErrClientClosed)
				return
			}
		}
		c.meta.mu.Lock()
		waiters := c.meta.waiters
		c.meta.waiters = nil
		c.meta.immediate = false
		topics := make([]string, 0, len(c.meta.interest))
		for t := range c.meta.interest {
			topics = append(topics, t)
		}
		c.meta.mu.Unlock()
		slices.Sort(topics)

		err := c.refresh(topics)
		last = time.Now()
		if err != nil {
			c.log.Warn("metadata refresh failed", "err", err)
		}
		for _, w := range waiters {
			w <- err
		}
		maxAge.Reset(c.cfg.MetadataMaxAge)
	}
}

func (c *Cluster) failWaiters(err error) {
	c.meta.mu.Lock()
	ws := c.meta.waiters
	c.meta.waiters = nil
	c.meta.mu.Unlock()
	for _, w := range ws {
		w <- err
	}
}

// refresh fetches metadata for topics (none: brokers only) and publishes it.
func (c *Cluster) refresh(topics []string) error {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false
	req.Topics = make([]kmsg.MetadataRequestTopic, len(topics))
	for i, t := range topics {
		req.Topics[i] = kmsg.NewMetadataRequestTopic()
		req.Topics[i].Topic = kmsg.StringPtr(t)
	}
	c.meta.refreshes.Add(1)
	resp, err := c.RequestAny(c.ctx, req)
	if err != nil {
		return err
	}
	mr := resp.(*kmsg.MetadataResponse)
	next, changes := merge(c.meta.snap.Load(), mr, false, time.Now())
	// Topics nobody asks about any more are dropped by the interest set:
	// keep only interesting ones plus those just returned.
	c.meta.snap.Store(next)
	c.applyBrokerChanges(changes)
	return nil
}

// Topic returns metadata for topic, refreshing as needed. A topic the
// cluster reports as unknown fails with ErrUnknownTopic after
// UnknownTopicRetries refreshes; the retry budget and ctx bound the wait.
func (c *Cluster) Topic(ctx context.Context, topic string) (*TopicMeta, error) {
	if t := c.Snapshot().Topics[topic]; t != nil && t.Err == nil {
		return t, nil
	}
	c.AddTopics(topic)
	unknown := 0
	var t *TopicMeta
	err := c.Retry(ctx, func(ctx context.Context) error {
		if err := c.RefreshMetadata(ctx, true); err != nil {
			return err
		}
		t = c.Snapshot().Topics[topic]
		switch {
		case t == nil:
			return fmt.Errorf("topic %q missing from metadata: %w", topic, kafkaerr.ForCode(kafkaerr.UnknownTopicOrPartition))
		case t.Err == nil:
			return nil
		case errors.Is(t.Err, kafkaerr.ForCode(kafkaerr.UnknownTopicOrPartition)):
			unknown++
			if unknown >= c.cfg.UnknownTopicRetries {
				return fmt.Errorf("%w %q (%d metadata refreshes): %w", errs.ErrUnknownTopic, topic, unknown, t.Err)
			}
		}
		return fmt.Errorf("topic %q: %w", topic, t.Err)
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Leader returns the leader of topic/partition from metadata, refreshing
// while the partition has no leader.
func (c *Cluster) Leader(ctx context.Context, topic string, partition int32) (PartitionMeta, error) {
	t, err := c.Topic(ctx, topic)
	if err != nil {
		return PartitionMeta{}, err
	}
	if p, ok := t.Partition(partition); ok && p.Leader >= 0 && p.Err == nil {
		return p, nil
	}
	var pm PartitionMeta
	err = c.Retry(ctx, func(ctx context.Context) error {
		if err := c.RefreshMetadata(ctx, true); err != nil {
			return err
		}
		t := c.Snapshot().Topics[topic]
		p, ok := t.Partition(partition)
		switch {
		case t == nil || !ok:
			return fmt.Errorf("%w: %s[%d] does not exist", errs.ErrUnknownTopic, topic, partition)
		case p.Err != nil:
			return fmt.Errorf("%s[%d]: %w", topic, partition, p.Err)
		case p.Leader < 0:
			return fmt.Errorf("%s[%d]: %w", topic, partition, kafkaerr.ForCode(kafkaerr.LeaderNotAvailable))
		}
		pm = p
		return nil
	})
	return pm, err
}
