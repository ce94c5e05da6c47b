package riffle

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
)

// subscription returns the topics the member subscribes to now: the
// configured ones, or the last successful listing's topics matching the
// pattern. A listing that fails keeps the previous one, so the member never
// joins with no topics and gives everything up because of it.
func (m *member) subscription() []string {
	if m.pattern == nil {
		return m.cfg.topics
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.listed)
}

// listTopicsLoop lists the cluster's topics for the pattern when the member
// starts (retrying until a listing succeeds) and then once per
// MetadataMaxAge, the client's metadata refresh period (Java refreshes its
// pattern match with its metadata). A change is noticed by the member's
// subscription check.
func (m *member) listTopicsLoop(ctx context.Context) {
	failures := 0
	for {
		wait := m.cs.c.cfg.metadataMaxAge
		if err := m.listPatternTopics(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			wait = m.cs.c.cfg.retryBackoff.Delay(failures, rand.Float64())
			m.cs.c.log.Info("listing topics for the subscription pattern failed; keeping the last listing", "group", m.cfg.id, "err", err)
		} else {
			failures = 0
		}
		m.sleep(ctx, wait)
		if ctx.Err() != nil {
			return
		}
	}
}

// listPatternTopics lists the cluster's topics and keeps those matching
// the pattern (internal topics excluded, as Java's default).
func (m *member) listPatternTopics(ctx context.Context) error {
	lctx, cancel := context.WithTimeout(ctx, m.cs.c.cfg.retryTimeout)
	defer cancel()
	topics, err := m.cs.c.Admin().ListTopics(lctx)
	if err != nil {
		return err
	}
	var out []string
	for _, t := range topics {
		if !t.Internal && t.Err == nil && m.pattern.MatchString(t.Name) {
			out = append(out, t.Name)
		}
	}
	sort.Strings(out)
	m.mu.Lock()
	m.listed = out
	if m.listedOnce != nil {
		close(m.listedOnce)
		m.listedOnce = nil
	}
	m.mu.Unlock()
	return nil
}

// awaitTopicList waits until the cluster's topics were listed once, so
// that the first join matches the pattern against them.
func (m *member) awaitTopicList(ctx context.Context) {
	m.mu.Lock()
	ch := m.listedOnce
	m.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// subscriptionShape summarizes the subscribed topics and their partition
// counts, to notice changes that need a rebalance.
func (m *member) subscriptionShape() string {
	topics := m.subscription()
	sort.Strings(topics)
	snap := m.cs.cl.Snapshot()
	shape := ""
	for _, t := range topics {
		n := 0
		if tm := snap.Topics[t]; tm != nil {
			n = len(tm.Partitions)
		}
		shape += fmt.Sprintf("%s:%d,", t, n)
	}
	m.trackSubscription(topics)
	return shape
}

// trackSubscription makes topics the set the member holds a metadata
// reference to (TrackTopics), so refreshes follow its subscription: the
// configured topics, or those matching the pattern. Topics new to the set
// are tracked, those no longer in it released; the member's partitions
// hold references of their own (the consumer's).
func (m *member) trackSubscription(topics []string) {
	m.trackMu.Lock()
	defer m.trackMu.Unlock()
	want := make(map[string]bool, len(topics))
	var add, drop []string
	for _, t := range topics {
		if !want[t] {
			want[t] = true
			if !m.tracked[t] {
				add = append(add, t)
			}
		}
	}
	for t := range m.tracked {
		if !want[t] {
			drop = append(drop, t)
		}
	}
	if len(add) > 0 {
		m.cs.cl.TrackTopics(add...)
	}
	if len(drop) > 0 {
		m.cs.cl.UntrackTopics(drop...)
	}
	m.tracked = want
}

// untrackSubscription releases every topic of the subscription (on leave).
func (m *member) untrackSubscription() { m.trackSubscription(nil) }
