package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
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
// lookups cost one request. Each refresh is one attempt: callers retry
// within their own budget (Retry), so every caller sees the failures of the
// refreshes it waited for.
type metaState struct {
	snap atomic.Pointer[Snapshot]
	// pub serialises publishing a snapshot (a refresh's merge, leader
	// hints): each new one is built from the one it replaces, and the
	// broker changes are applied in the same order.
	pub sync.Mutex

	mu        sync.Mutex
	waiters   []*metaWaiter
	interest  *interest // which topics refreshes ask about
	lastErr   error     // the latest refresh's failure; nil once one succeeds
	trigger   chan struct{}
	refreshes atomic.Int64
	hinted    atomic.Int64 // snapshots leader hints published
}

// metaWaiter is a caller waiting for the next refresh; topics are one-off
// lookups that refresh must include.
type metaWaiter struct {
	topics []string
	done   chan metaResult // buffered: the owner never blocks on a waiter
}

type metaResult struct {
	snap *Snapshot // the snapshot the refresh published
	err  error
}

func (m *metaState) init() {
	m.snap.Store(emptySnapshot())
	m.interest = newInterest()
	m.trigger = make(chan struct{}, 1)
}

// Snapshot returns the current metadata (never nil).
func (c *Cluster) Snapshot() *Snapshot { return c.meta.snap.Load() }

// Refreshes returns how many metadata requests the owner has issued.
func (c *Cluster) Refreshes() int64 { return c.meta.refreshes.Load() }

// TrackTopics adds one reference to each topic: while any reference is
// held, every refresh asks about the topic and the snapshot keeps it. Owners
// of topics (a producer for the topics it produces to, a consumer for its
// assigned partitions, a group member for its subscription) track them and
// release them with UntrackTopics when done. Calls are counted: track twice,
// untrack twice.
func (c *Cluster) TrackTopics(topics ...string) {
	c.meta.mu.Lock()
	defer c.meta.mu.Unlock()
	c.meta.interest.track(topics...)
}

// UntrackTopics releases references taken by TrackTopics. A topic nobody
// holds any more is left out of the next refresh and dropped from the
// snapshot (unless a lookup uses it meanwhile).
func (c *Cluster) UntrackTopics(topics ...string) {
	c.meta.mu.Lock()
	defer c.meta.mu.Unlock()
	c.meta.interest.untrack(topics...)
}

// TrackedTopics returns the reference count of every tracked topic (a
// copy), for tests and diagnostics.
func (c *Cluster) TrackedTopics() map[string]int {
	c.meta.mu.Lock()
	defer c.meta.mu.Unlock()
	return maps.Clone(c.meta.interest.tracked)
}

// RefreshMetadata refreshes the metadata (brokers, controller, tracked
// topics) and waits for it, retrying within the retry budget. Refreshes
// are single-flight and spaced by MetadataMinAge. When ctx or the budget
// ends first, the error carries the last refresh failure (for example an
// *UnreachableError naming every address) along with the context's error.
func (c *Cluster) RefreshMetadata(ctx context.Context) error {
	return c.Retry(ctx, func(ctx context.Context) error {
		_, err := c.awaitRefresh(ctx, nil)
		return err
	})
}

// RefreshOnce waits for one refresh, without retrying, and returns the
// snapshot it published: for callers that retry themselves.
func (c *Cluster) RefreshOnce(ctx context.Context) (*Snapshot, error) {
	return c.awaitRefresh(ctx, nil)
}

// TriggerMetadata requests an immediate refresh without waiting for it.
func (c *Cluster) TriggerMetadata() {
	select {
	case c.meta.trigger <- struct{}{}:
	default:
	}
}

// awaitRefresh waits for one refresh that starts after the call and that
// also asks about topics (one-off lookups), and returns the snapshot it
// published or its failure. If ctx ends first, the error says why the
// refreshes are not succeeding, as far as is known (see refreshCutShort).
func (c *Cluster) awaitRefresh(ctx context.Context, topics []string) (*Snapshot, error) {
	if c.ctx.Err() != nil {
		return nil, errs.ErrClientClosed
	}
	w := &metaWaiter{topics: topics, done: make(chan metaResult, 1)}
	c.meta.mu.Lock()
	c.meta.waiters = append(c.meta.waiters, w)
	c.meta.mu.Unlock()
	c.TriggerMetadata()
	select {
	case r := <-w.done:
		return r.snap, r.err
	case <-ctx.Done():
		return nil, c.refreshCutShort(ctx.Err())
	case <-c.ctx.Done():
		return nil, errs.ErrClientClosed
	}
}

// refreshCutShort is the error for a caller whose context ended while it
// waited for a refresh: the previous refresh's failure if there was one,
// else the dials still running (so an unreachable cluster is reported as
// such, naming every address), with the context's error.
func (c *Cluster) refreshCutShort(ctxErr error) error {
	c.meta.mu.Lock()
	last := c.meta.lastErr
	c.meta.mu.Unlock()
	if last != nil {
		return withCtx(last, ctxErr)
	}
	if ue := c.dialsInFlight(ctxErr); ue != nil {
		return ue
	}
	return ctxErr
}

func (c *Cluster) metadataLoop() {
	next := time.NewTimer(c.cfg.MetadataMaxAge)
	defer next.Stop()
	var last time.Time
	var lastAsked map[string]bool // the topics the last refresh asked about
	failures := 0
	for {
		select {
		case <-c.ctx.Done():
			c.failWaiters(errs.ErrClientClosed)
			return
		case <-c.meta.trigger:
		case <-next.C:
		}
		// The minimum age bounds how often a storm of leader errors can
		// hit the cluster; waiters arriving meanwhile join this refresh.
		// A topic the last refresh did not ask about (a producer's first
		// record to it, say) is new information: no wait for it.
		if wait := time.Until(last.Add(c.cfg.MetadataMinAge)); wait > 0 && !c.asksNew(lastAsked) {
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
		var extra []string
		for _, w := range waiters {
			extra = append(extra, w.topics...)
		}
		asked := c.meta.interest.plan(extra)
		c.meta.mu.Unlock()

		snap, err := c.refresh(asked)
		last = time.Now()
		lastAsked = make(map[string]bool, len(asked))
		for _, t := range asked {
			lastAsked[t] = true
		}
		c.meta.mu.Lock()
		if err == nil {
			c.meta.interest.refreshed(asked)
		}
		c.meta.lastErr = err
		c.meta.mu.Unlock()
		closing := err != nil && (c.ctx.Err() != nil || errors.Is(err, errs.ErrClientClosed))
		switch {
		case closing:
			// Close cut the refresh short: nothing failed.
			c.log.Debug("metadata refresh ended by close", "err", err)
		case err != nil && failures == 0:
			c.log.Warn("metadata refresh failed", "err", err)
		case err != nil:
			c.log.Debug("metadata refresh failed again", "failures", failures+1, "err", err)
		case failures > 0:
			c.log.Info("metadata refresh succeeded again", "after_failures", failures)
		}
		for _, w := range waiters {
			w.done <- metaResult{snap, err}
		}
		// As Java's client: after a failure the next attempt comes after
		// a backoff (KIP-580), not a whole MetadataMaxAge later; a
		// failure no retry can fix (bad credentials, an untrusted
		// certificate) waits for the next caller or the maximum age.
		switch {
		case err != nil && errs.IsRetriable(err):
			failures++
			next.Reset(c.cfg.RetryBackoff.Delay(failures, rand.Float64()))
		case err != nil:
			failures++
			next.Reset(c.cfg.MetadataMaxAge)
		default:
			failures = 0
			next.Reset(c.cfg.MetadataMaxAge)
		}
	}
}

// asksNew reports whether a waiting lookup asks about a topic that is not
// in asked.
func (c *Cluster) asksNew(asked map[string]bool) bool {
	c.meta.mu.Lock()
	defer c.meta.mu.Unlock()
	for _, w := range c.meta.waiters {
		for _, t := range w.topics {
			if !asked[t] {
				return true
			}
		}
	}
	return false
}

func (c *Cluster) failWaiters(err error) {
	c.meta.mu.Lock()
	ws := c.meta.waiters
	c.meta.waiters = nil
	c.meta.mu.Unlock()
	for _, w := range ws {
		w.done <- metaResult{nil, err}
	}
}

// refresh fetches metadata for topics (none: brokers only) in one attempt
// and publishes it. Only metadataLoop calls it, so snapshots are published
// in order.
func (c *Cluster) refresh(topics []string) (*Snapshot, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false
	req.Topics = make([]kmsg.MetadataRequestTopic, len(topics))
	for i, t := range topics {
		req.Topics[i] = kmsg.NewMetadataRequestTopic()
		req.Topics[i].Topic = kmsg.StringPtr(t)
	}
	c.meta.refreshes.Add(1)
	resp, err := c.RequestAnyOnce(c.ctx, req)
	if err != nil {
		return nil, err
	}
	c.meta.pub.Lock()
	defer c.meta.pub.Unlock()
	next, changes := merge(c.meta.snap.Load(), resp.(*kmsg.MetadataResponse), topics, time.Now())
	c.meta.snap.Store(next)
	c.applyBrokerChanges(changes)
	return next, nil
}

// ApplyLeaderHints moves partitions to the leaders responses named for
// them (KIP-951, see LeaderHint) without waiting for a metadata refresh.
// changed says whether the snapshot changed (callers that place partitions
// by leader place them again); all, whether every hint is satisfied by the
// snapshot now (applied here or earlier). endpoints are the response's
// NodeEndpoints. A hint it cannot apply (unknown topic or broker, no
// epoch, a contradiction with the cached epoch) triggers a refresh, as the
// error alone did before hints.
func (c *Cluster) ApplyLeaderHints(hints []LeaderHint, endpoints []BrokerMeta) (changed, all bool) {
	if len(hints) == 0 {
		return false, true
	}
	c.meta.pub.Lock()
	prev := c.meta.snap.Load()
	next, changes, all := withHints(prev, hints, endpoints)
	if next != prev {
		c.meta.snap.Store(next)
		c.applyBrokerChanges(changes)
		c.meta.hinted.Add(1)
	}
	c.meta.pub.Unlock()
	if !all {
		c.TriggerMetadata()
	}
	return next != prev, all
}

// HintsApplied is how many times leader hints changed the snapshot.
func (c *Cluster) HintsApplied() int64 { return c.meta.hinted.Load() }

// cached returns topic from the snapshot if it is there without error,
// recording the use so a one-off topic in use stays fresh.
func (c *Cluster) cached(topic string) *TopicMeta {
	t := c.Snapshot().Topics[topic]
	if t == nil || t.Err != nil {
		return nil
	}
	c.meta.mu.Lock()
	c.meta.interest.used(topic)
	c.meta.mu.Unlock()
	return t
}

// LookupTopic returns metadata for topic without tracking it: from the
// snapshot if it is there, else from a refresh that asks about it (and
// about nothing else the client does not track). A topic the cluster
// reports as unknown is waited for up to UnknownTopicWait (and at most
// UnknownTopicRetries such refreshes, when set), then fails with
// ErrUnknownTopic; ctx bounds the wait too.
func (c *Cluster) LookupTopic(ctx context.Context, topic string) (*TopicMeta, error) {
	return c.LookupTopicWait(ctx, topic, c.TopicWait())
}

// TopicWait is the client's wait for an unknown topic: UnknownTopicWait,
// and UnknownTopicRetries when set.
func (c *Cluster) TopicWait() TopicWait {
	return TopicWait{For: c.cfg.UnknownTopicWait, Refreshes: c.cfg.UnknownTopicRetries}
}

// TopicWait is how long a lookup waits for a topic the metadata does not
// know (UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, or left out),
// such as one created a moment ago: a KRaft broker learns of a topic when
// it replays the metadata log, a while after CreateTopics returned.
type TopicWait struct {
	// For bounds the wait in time, from the lookup's start; 0 fails at
	// the first refresh that does not know the topic.
	For time.Duration
	// Refreshes, when above 0, also ends the wait at that many refreshes
	// answering UNKNOWN_TOPIC_OR_PARTITION (the deprecated
	// UnknownTopicRetries).
	Refreshes int
	// Option names the option that set For, in errors; "" is
	// "UnknownTopicWait".
	Option string
}

func (w TopicWait) option() string {
	if w.Option == "" {
		return "UnknownTopicWait"
	}
	return w.Option
}

// LookupTopicWait is LookupTopic with the wait for an unknown topic given.
// The lookup ends with ErrUnknownTopic (naming the topic, the time waited,
// the refreshes and the last answer) at the first bound of w reached; the
// bounds are checked at each refresh, and refreshes are spaced by the retry
// backoff and MetadataMinAge, so a lookup ends within one backoff (at most
// its maximum, 1 s by default) of For. Failures to get metadata at all
// (an unreachable cluster) are retried within the larger of RetryTimeout
// and For, and ctx bounds it all.
func (c *Cluster) LookupTopicWait(ctx context.Context, topic string, w TopicWait) (*TopicMeta, error) {
	if c.ctx.Err() != nil {
		return nil, errs.ErrClientClosed
	}
	if t := c.cached(topic); t != nil {
		return t, nil
	}
	start := time.Now()
	unknown, refreshes := 0, 0
	var t *TopicMeta
	budget, name := c.cfg.RetryTimeout, "RetryTimeout"
	if w.For > budget {
		budget, name = w.For, w.option()
	}
	err := c.retryFor(ctx, name, budget, func(ctx context.Context) error {
		snap, err := c.awaitRefresh(ctx, []string{topic})
		if err != nil {
			return err
		}
		refreshes++
		t = snap.Topics[topic]
		var terr error
		switch {
		case t == nil:
			terr = fmt.Errorf("topic %q missing from metadata: %w", topic, kafkaerr.ForCode(kafkaerr.UnknownTopicOrPartition))
		case t.Err == nil:
			return nil
		default:
			terr = t.Err
		}
		absent := t == nil || errors.Is(terr, kafkaerr.ForCode(kafkaerr.UnknownTopicOrPartition))
		if absent && t != nil {
			unknown++
		}
		if !absent && !errors.Is(terr, kafkaerr.ForCode(kafkaerr.LeaderNotAvailable)) {
			return fmt.Errorf("topic %q: %w", topic, terr)
		}
		switch waited := time.Since(start); {
		case w.Refreshes > 0 && unknown >= w.Refreshes:
			return fmt.Errorf("%w %q (%d metadata refreshes): %w", errs.ErrUnknownTopic, topic, unknown, terr)
		case waited >= w.For:
			return unknownAfter(topic, waited, refreshes, terr)
		}
		return fmt.Errorf("topic %q: %w", topic, terr)
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// unknownAfter is the error of a topic still unknown after waiting.
func unknownAfter(topic string, waited time.Duration, refreshes int, last error) error {
	return fmt.Errorf("%w %q: not in the metadata after %v (%d refreshes): %w",
		errs.ErrUnknownTopic, topic, waited.Round(time.Millisecond), refreshes, last)
}

// AwaitPartition returns topic's metadata once it has partition, waiting
// up to w.For from the call for partitions added a moment ago: after
// CreatePartitions returns, a broker that has not yet replayed the change
// reports the old count for a while, as with a topic just created (the
// Java producer's wait for a partition "not present in metadata"). A
// topic that stays unknown ends as LookupTopicWait does; a partition that
// stays missing ends with errs.ErrInvalidPartition naming the count seen,
// the time waited and the refreshes. ctx bounds it all.
func (c *Cluster) AwaitPartition(ctx context.Context, topic string, partition int32, w TopicWait) (*TopicMeta, error) {
	start := time.Now()
	t, err := c.LookupTopicWait(ctx, topic, w)
	if err != nil {
		return nil, err
	}
	if _, ok := t.Partition(partition); ok || partition < 0 {
		return t, nil
	}
	refreshes := 0
	budget, name := c.cfg.RetryTimeout, "RetryTimeout"
	if w.For > budget {
		budget, name = w.For, w.option()
	}
	err = c.retryFor(ctx, name, budget, func(ctx context.Context) error {
		snap, err := c.awaitRefresh(ctx, []string{topic})
		if err != nil {
			return err
		}
		refreshes++
		nt := snap.Topics[topic]
		if nt != nil && nt.Err == nil {
			t = nt
			if _, ok := t.Partition(partition); ok {
				return nil
			}
		}
		if waited := time.Since(start); waited >= w.For {
			return fmt.Errorf("%w: %s[%d] not in the metadata after %v (%d refreshes; topic has %d partitions)",
				errs.ErrInvalidPartition, topic, partition, waited.Round(time.Millisecond), refreshes, len(t.Partitions))
		}
		return fmt.Errorf("%s[%d]: %w", topic, partition, kafkaerr.ForCode(kafkaerr.UnknownTopicOrPartition))
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Leader returns the leader of topic/partition, refreshing while the
// partition has no leader. Like LookupTopic it does not track the topic,
// and it waits up to UnknownTopicWait (from its start) for a topic a
// refresh names unknown, or for a partition it lacks: a broker that has
// not yet replayed the topic's creation (or CreatePartitions) answers so
// for a while after another one knew it.
func (c *Cluster) Leader(ctx context.Context, topic string, partition int32) (PartitionMeta, error) {
	start := time.Now()
	t, err := c.LookupTopic(ctx, topic)
	if err != nil {
		return PartitionMeta{}, err
	}
	if p, ok := t.Partition(partition); ok && p.Leader >= 0 && p.Err == nil {
		return p, nil
	}
	var pm PartitionMeta
	refreshes := 0
	err = c.Retry(ctx, func(ctx context.Context) error {
		snap, err := c.awaitRefresh(ctx, []string{topic})
		if err != nil {
			return err
		}
		refreshes++
		t := snap.Topics[topic]
		p, ok := t.Partition(partition)
		switch {
		case t == nil || errors.Is(t.Err, kafkaerr.ForCode(kafkaerr.UnknownTopicOrPartition)):
			last := kafkaerr.ForCode(kafkaerr.UnknownTopicOrPartition)
			if waited := time.Since(start); waited >= c.cfg.UnknownTopicWait {
				return unknownAfter(topic, waited, refreshes, last)
			}
			return fmt.Errorf("topic %q: %w", topic, last)
		case t.Err != nil:
			return fmt.Errorf("topic %q: %w", topic, t.Err)
		case !ok:
			if waited := time.Since(start); waited >= c.cfg.UnknownTopicWait {
				return fmt.Errorf("%w: %s[%d] does not exist: not in the metadata after %v (%d refreshes; topic has %d partitions)",
					errs.ErrUnknownTopic, topic, partition, waited.Round(time.Millisecond), refreshes, len(t.Partitions))
			}
			return fmt.Errorf("%s[%d]: %w", topic, partition, kafkaerr.ForCode(kafkaerr.UnknownTopicOrPartition))
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
