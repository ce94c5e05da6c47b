package riffle

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"sort"
	"time"

	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// GroupProtocol selects the consumer group protocol.
type GroupProtocol int8

// Group protocols.
const (
	// GroupProtocolClassic is JoinGroup/SyncGroup/Heartbeat with
	// client-side assignment (the default).
	GroupProtocolClassic GroupProtocol = iota
	// GroupProtocolConsumer is the next-generation protocol (KIP-848):
	// the broker assigns partitions and members reconcile incrementally
	// through ConsumerGroupHeartbeat. Needs a broker that supports it.
	GroupProtocolConsumer
)

// WithGroupProtocol selects the group protocol (default classic).
func WithGroupProtocol(p GroupProtocol) ConsumerOption {
	return func(c *consumerConfig) { c.group.protocol = p }
}

// run848 is the member's life under KIP-848: heartbeats carry the
// subscription and the partitions owned; the coordinator answers with a
// target assignment; the member revokes what left it (committing finished
// work), adds what is new, and reports the result in the next heartbeat.
func (m *member) run848(ctx context.Context) {
	m.mu.Lock()
	if m.memberID == "" {
		m.memberID = newMemberID()
	}
	m.generation = 0
	m.mu.Unlock()
	interval := m.cfg.heartbeatInterval
	failures := 0
	var pending map[[16]byte][]int32 // target not yet reconciled (unknown topic ids)
	for ctx.Err() == nil {
		resp, err := m.heartbeat848(ctx, 0)
		if err != nil {
			failures++
			m.sleep(ctx, m.cs.c.cfg.retryBackoff.Delay(failures, 0.5))
			continue
		}
		switch resp.ErrorCode {
		case 0:
			failures = 0
			m.mu.Lock()
			if resp.MemberID != nil && *resp.MemberID != "" {
				m.memberID = *resp.MemberID
			}
			m.generation = resp.MemberEpoch
			m.mu.Unlock()
			if resp.HeartbeatIntervalMillis > 0 {
				interval = time.Duration(resp.HeartbeatIntervalMillis) * time.Millisecond
			}
			if resp.Assignment != nil {
				pending = map[[16]byte][]int32{}
				for _, t := range resp.Assignment.Topics {
					pending[t.TopicID] = t.Partitions
				}
			}
			if pending != nil {
				done, changed := m.reconcile(ctx, pending)
				if done {
					pending = nil
				}
				if changed {
					continue // report the new ownership at once
				}
			}
		case kafkaerr.UnknownMemberID, kafkaerr.FencedMemberEpoch:
			// Fenced: another member may own our partitions now.
			m.lose(ctx)
			m.mu.Lock()
			m.generation = 0
			if resp.ErrorCode == kafkaerr.UnknownMemberID {
				m.memberID = newMemberID()
			}
			m.mu.Unlock()
			pending = nil
			continue
		case kafkaerr.UnsupportedVersion:
			m.groupError(fmt.Errorf("the broker does not support the consumer group protocol (KIP-848): %w", kafkaerr.ForCode(resp.ErrorCode)))
			m.sleep(ctx, 10*time.Second)
			continue
		default:
			if !m.coordinatorError(resp.ErrorCode) {
				m.groupError(kafkaerr.ForCode(resp.ErrorCode))
			}
			failures++
			m.sleep(ctx, m.cs.c.cfg.retryBackoff.Delay(failures, 0.5))
			continue
		}
		select {
		case <-ctx.Done():
		case <-m.rejoin:
		case <-time.After(interval):
		}
		if m.cfg.autoCommit {
			m.commits.commitAsync(m.cs.processedOffsets(m.ownedList()))
		}
	}
}

// heartbeat848 sends one ConsumerGroupHeartbeat; epoch overrides the
// member epoch when negative (leaving).
func (m *member) heartbeat848(ctx context.Context, epoch int32) (*kmsg.ConsumerGroupHeartbeatResponse, error) {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	m.mu.Lock()
	req.Group, req.MemberID, req.MemberEpoch = m.cfg.id, m.memberID, m.generation
	m.mu.Unlock()
	if epoch < 0 {
		req.MemberEpoch = epoch
	}
	if m.cfg.instanceID != "" {
		req.InstanceID = &m.cfg.instanceID
	}
	req.RebalanceTimeoutMillis = int32(m.cfg.rebalanceTimeout.Milliseconds())
	if m.cfg.pattern != nil {
		re := m.cfg.pattern.String()
		req.SubscribedTopicRegex = &re
		req.SubscribedTopicNames = m.subscription(ctx)
	} else {
		req.SubscribedTopicNames = m.cfg.topics
	}
	m.cs.cl.AddTopics(req.SubscribedTopicNames...)
	// Owned partitions, by topic id.
	snap := m.cs.cl.Snapshot()
	owned := map[string][]int32{}
	for _, tp := range m.ownedList() {
		owned[tp.Topic] = append(owned[tp.Topic], tp.Partition)
	}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for t, ps := range owned {
		tm := snap.Topics[t]
		if tm == nil {
			continue
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		rt.TopicID = tm.ID
		rt.Partitions = ps
		req.Topics = append(req.Topics, rt)
	}
	resp, err := m.groupRequest(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.ConsumerGroupHeartbeatResponse), nil
}

// reconcile moves the engine to the target assignment. done is false if
// some topic ids are not in the metadata yet (it refreshes and the target
// is retried on the next heartbeat); changed says whether ownership
// changed, which the next heartbeat must report without waiting.
func (m *member) reconcile(ctx context.Context, target map[[16]byte][]int32) (done, changed bool) {
	snap := m.cs.cl.Snapshot()
	byID := map[[16]byte]string{}
	for name, tm := range snap.Topics {
		byID[tm.ID] = name
	}
	want := map[TopicPartition]bool{}
	for id, ps := range target {
		name, ok := byID[id]
		if !ok {
			m.cs.cl.TriggerMetadata()
			return false, false
		}
		for _, p := range ps {
			want[TopicPartition{name, p}] = true
		}
	}
	revoked, added := m.moveTo(ctx, want)
	return true, revoked+added > 0
}

// leave848 leaves the group (epoch -1; -2 keeps a static member's
// assignment for its return).
func (m *member) leave848(ctx context.Context) {
	epoch := int32(-1)
	if m.cfg.instanceID != "" {
		epoch = -2
	}
	if _, err := m.heartbeat848(ctx, epoch); err != nil {
		m.cs.c.log.Info("leave group failed", "group", m.cfg.id, "err", err)
	}
}

// newMemberID returns a random member id (KIP-1082: clients choose it).
func newMemberID() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
