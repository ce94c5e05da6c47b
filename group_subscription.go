package riffle

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/riffle-go/riffle/internal/kafkaerr"
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

// subscriptionChanged reports why the member must rejoin after a
// subscription check, nil if it need not, as Java's
// ConsumerCoordinator.rejoinNeededOrPending: the topics it subscribes to
// now (a pattern's matches) differ from those it joined with, or, on the
// member that led the generation's assignment, a topic of the group has
// another partition count in the client's metadata than the assignment
// used (a topic created, deleted or given partitions). Only the leader
// compares partition counts: a follower needs no metadata to join, so its
// metadata may gain the topics only after the join, which is no change.
// A subscription that became empty is no reason by itself (a listing of
// no topics must not give every partition up).
func (m *member) subscriptionChanged() error {
	topics := sortedTopics(m.subscription())
	m.trackSubscription(m.watchedTopics(topics))
	if len(topics) > 0 && !slices.Equal(topics, m.joinedTopics) {
		return fmt.Errorf("subscribed topics changed from %v to %v", m.joinedTopics, topics)
	}
	snap := m.cs.cl.Snapshot()
	for _, t := range slices.Sorted(maps.Keys(m.leaderCounts)) {
		tm := snap.Topics[t]
		n := 0
		switch {
		case tm == nil:
			continue // not in the metadata yet: no news
		case tm.Err == nil:
			n = len(tm.Partitions)
		case !errors.Is(tm.Err, kafkaerr.ForCode(kafkaerr.UnknownTopicOrPartition)):
			continue // a transient error says nothing of the count
		}
		if was := m.leaderCounts[t]; n != was {
			return fmt.Errorf("topic %q has %d partitions, the group's assignment used %d", t, n, was)
		}
	}
	return nil
}

// watchedTopics returns topics with, on the generation's leader, every
// topic of the group: the topics the member keeps in its metadata.
func (m *member) watchedTopics(topics []string) []string {
	if len(m.leaderCounts) == 0 {
		return topics
	}
	out := slices.Clone(topics)
	for t := range m.leaderCounts {
		out = append(out, t)
	}
	return sortedTopics(out)
}

// sortedTopics returns topics sorted and deduplicated, in a new slice.
func sortedTopics(topics []string) []string {
	out := slices.Clone(topics)
	slices.Sort(out)
	return slices.Compact(out)
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
