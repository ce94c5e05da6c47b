package riffle

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// GroupProtocol selects the consumer group protocol.
type GroupProtocol int8

// GroupProtocolClassic is JoinGroup/SyncGroup/Heartbeat with
// client-side assignment (the default).
const GroupProtocolClassic GroupProtocol = 0

// GroupProtocolConsumer is the next-generation protocol (KIP-848):
// the broker assigns partitions and members reconcile incrementally
// through ConsumerGroupHeartbeat. Needs a broker that supports it.
const GroupProtocolConsumer GroupProtocol = 1

// WithGroupProtocol selects the group protocol (default classic).
func WithGroupProtocol(p GroupProtocol) ConsumerOption {
	return func(c *consumerConfig) { c.group.protocol = p }
}

// target848 is an assignment the coordinator sent, with the term it was
// received in: a target from a fenced term is never reconciled.
type target848 struct {
	term  *term
	parts map[[16]byte][]int32
}

// session848 links the KIP-848 heartbeat goroutine and the member's work
// goroutine.
type session848 struct {
	mu      sync.Mutex
	cur     *term         // the current term; replaced once a fence is handled
	reconc  chan struct{} // a new target to reconcile
	hbNow   chan struct{} // heartbeat at once (to report a reconciled assignment)
	stopped chan struct{} // heartbeats stopped
}

func (s *session848) term() *term {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// nudge wakes the receiver of ch unless a wake is pending.
func nudge(ch chan struct{}) {
	if cap(ch) > 0 && len(ch) == cap(ch) {
		return // a nudge is pending already: no channel lock
	}
	select {
	case ch <- struct{}{}:
	default:
	}
}

// run848 is the member's life under KIP-848. Heartbeats run on their own
// goroutine at the interval the coordinator sets, reporting the
// subscription and the assignment the member has reconciled; the
// coordinator answers with a target assignment. This goroutine reconciles
// it (revoking what left it, committing finished work, then adding what
// is new), while heartbeats go on, and the next heartbeat acknowledges the
// result. A fence (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH) aborts any
// reconciliation, loses every partition, and heartbeats join again only
// once that is done.
func (m *member) run848(ctx context.Context) {
	m.mu.Lock()
	if m.memberID == "" {
		m.memberID = newMemberID()
	}
	m.generation = 0
	m.mu.Unlock()
	s := &session848{cur: newTerm(ctx), reconc: make(chan struct{}, 1), hbNow: make(chan struct{}, 1), stopped: make(chan struct{})}
	hctx, stopHB := context.WithCancel(ctx)
	go func() {
		defer close(s.stopped)
		m.heartbeat848Loop(hctx, s)
	}()
	defer func() {
		stopHB()
		<-s.stopped
		if fe := s.term().fenced(); fe != nil {
			m.onFenced848(ctx, fe)
		}
	}()
	var retry <-chan time.Time // a target waiting for metadata
	for ctx.Err() == nil {
		t := s.term()
		if fe := t.fenced(); fe != nil {
			m.onFenced848(ctx, fe)
			s.mu.Lock()
			s.cur = newTerm(ctx)
			s.mu.Unlock()
			close(t.handled)
			retry = nil
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-t.ctx.Done():
			continue
		case <-s.stopped:
			return // the broker cannot run the protocol (groupFailed)
		case <-s.reconc:
		case <-retry:
		}
		retry = nil
		if pending := m.reconcile848(t, s); pending {
			retry = time.After(m.cfg.heartbeatInterval)
		}
	}
}

// reconcile848 reconciles the newest target of term t; it reports whether
// the target still waits (topic ids not in the metadata yet).
func (m *member) reconcile848(t *term, s *session848) (pending bool) {
	m.mu.Lock()
	tg := m.target
	m.mu.Unlock()
	if tg == nil || tg.term != t {
		return false
	}
	start := time.Now()
	m.moved = [2]int{}
	done, changed := m.reconcile(t.ctx, tg.parts)
	if t.ctx.Err() != nil {
		return false // fenced meanwhile: the loss reports everything
	}
	if changed {
		m.rebalanced(start, nil)
	}
	// Heartbeats report what is reconciled now: revoked partitions are
	// released, added ones acknowledged (callbacks included).
	m.mu.Lock()
	m.acked = make([]TopicPartition, 0, len(m.owned))
	for tp := range m.owned {
		m.acked = append(m.acked, tp)
	}
	if done && m.target == tg {
		m.target = nil
	}
	m.mu.Unlock()
	if changed {
		nudge(s.hbNow) // acknowledge at once
	}
	return !done
}

// onFenced848 handles a KIP-848 fence: every partition is lost, then the
// member joins again with epoch 0 (and a new id if the coordinator forgot
// it).
func (m *member) onFenced848(ctx context.Context, fe *fencedError) {
	m.cs.c.log.Info("fenced by the group coordinator", "group", m.cfg.id, "err", fe)
	m.lose(ctx)
	m.mu.Lock()
	m.generation = 0
	m.target = nil
	if fe.code == kafkaerr.UnknownMemberID {
		m.memberID = newMemberID()
	}
	m.mu.Unlock()
}

// heartbeat848Loop sends ConsumerGroupHeartbeats until ctx ends: at the
// coordinator's interval, at once after a reconciliation, with backoff
// after failures. Each answer's target goes to the work goroutine, tagged
// with the term it arrived in.
func (m *member) heartbeat848Loop(ctx context.Context, s *session848) {
	interval := m.cfg.heartbeatInterval
	failures := 0
	timer := time.NewTimer(0) // join at once
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-s.hbNow:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
		t := s.term()
		next := interval
		resp, err := m.heartbeat848(ctx, 0)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errs.ErrUnsupported):
			// The coordinator has no ConsumerGroupHeartbeat we can
			// send: retrying cannot help.
			m.groupFailed(err)
			return
		case err != nil:
			failures++
			next = m.cs.c.cfg.retryBackoff.Delay(failures, 0.5)
		case resp.ErrorCode == 0:
			failures = 0
			m.errLog.reset()
			m.mu.Lock()
			if resp.MemberID != nil && *resp.MemberID != "" {
				m.memberID = *resp.MemberID
			}
			m.generation = resp.MemberEpoch
			m.joined = resp.MemberEpoch > 0
			if resp.Assignment != nil {
				tg := &target848{term: t, parts: map[[16]byte][]int32{}}
				for _, at := range resp.Assignment.Topics {
					tg.parts[at.TopicID] = at.Partitions
				}
				m.target = tg
			}
			m.mu.Unlock()
			if resp.Assignment != nil {
				nudge(s.reconc)
			}
			if resp.HeartbeatIntervalMillis > 0 {
				interval = time.Duration(resp.HeartbeatIntervalMillis) * time.Millisecond
				next = interval
			}
		case resp.ErrorCode == kafkaerr.UnknownMemberID || resp.ErrorCode == kafkaerr.FencedMemberEpoch:
			// Fenced: another member may own our partitions now. The
			// work goroutine loses them; join again only after that.
			m.mu.Lock()
			m.joined = false
			m.mu.Unlock()
			t.fence(resp.ErrorCode, kafkaerr.ForCode(resp.ErrorCode))
			select {
			case <-t.handled:
			case <-ctx.Done():
				return
			}
			failures, next = 0, 0
		case resp.ErrorCode == kafkaerr.UnsupportedVersion:
			// Kafka 3.7 to 3.9 list ConsumerGroupHeartbeat but answer
			// UNSUPPORTED_VERSION unless the consumer protocol is
			// enabled (group.coordinator.rebalance.protocols).
			e := errs.Unsupported(int16(kmsg.ConsumerGroupHeartbeat), "ConsumerGroupHeartbeat", -1,
				"the group coordinator refused it")
			m.groupFailed(fmt.Errorf("%w: %w", e, kafkaerr.ForCode(resp.ErrorCode)))
			return
		default:
			if !m.coordinatorError(resp.ErrorCode) {
				m.groupError(kafkaerr.ForCode(resp.ErrorCode))
			}
			failures++
			next = m.cs.c.cfg.retryBackoff.Delay(failures, 0.5)
		}
		timer.Reset(next)
	}
}

// heartbeat848 sends one ConsumerGroupHeartbeat; epoch overrides the
// member epoch when negative (leaving). It reports the assignment the
// member has reconciled, and the subscription: topic names, or the
// pattern, which the broker matches (KIP-848 SubscribedTopicRegex) so the
// member never lists the cluster's topics for it.
func (m *member) heartbeat848(ctx context.Context, epoch int32) (*kmsg.ConsumerGroupHeartbeatResponse, error) {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	m.mu.Lock()
	req.Group, req.MemberID, req.MemberEpoch = m.cfg.id, m.memberID, m.generation
	acked := slices.Clone(m.acked)
	m.mu.Unlock()
	if epoch < 0 {
		req.MemberEpoch = epoch
	}
	if m.cfg.instanceID != "" {
		req.InstanceID = &m.cfg.instanceID
	}
	if rack := m.cs.c.cfg.rack; rack != "" {
		req.RackID = &rack // sent with every heartbeat, as the subscription is
	}
	req.RebalanceTimeoutMillis = int32(m.cfg.rebalanceTimeout.Milliseconds())
	req.ServerAssignor = m.cfg.remoteAssignor // sent with every heartbeat, as the rack is
	if m.cfg.pattern != nil {
		re := m.cfg.pattern.String()
		req.SubscribedTopicRegex = &re
	} else {
		req.SubscribedTopicNames = m.cfg.topics
		m.trackSubscription(req.SubscribedTopicNames)
	}
	// Owned partitions, by topic id.
	snap := m.cs.cl.Snapshot()
	owned := map[string][]int32{}
	for _, tp := range acked {
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
// some topic ids are not in the metadata yet (it refreshes) or a partition
// could not be added: the target is then retried. changed says whether
// ownership changed, which the next heartbeat must report without waiting.
func (m *member) reconcile(ctx context.Context, target map[[16]byte][]int32) (done, changed bool) {
	snap := m.cs.cl.Snapshot()
	byID := map[[16]byte]string{}
	for name, tm := range snap.Topics {
		byID[tm.ID] = name
	}
	if m.pattern != nil {
		// Topics the broker matched for us may be unknown to the
		// client's metadata: look their ids up in one listing.
		for id := range target {
			if _, ok := byID[id]; !ok {
				m.resolveTopicIDs(ctx, byID)
				break
			}
		}
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
	m.mu.Lock()
	defer m.mu.Unlock()
	for tp := range want {
		if m.owned[tp] == 0 && !m.leaving {
			// Not added (its committed offset could not be fetched):
			// the target is retried, not acknowledged without it.
			return false, revoked+added > 0
		}
	}
	return true, revoked+added > 0
}

// resolveTopicIDs adds the names of every topic of the cluster to byID
// and makes the client's metadata follow those of the pattern: the
// member's tracked set becomes the listing's matching topics.
func (m *member) resolveTopicIDs(ctx context.Context, byID map[[16]byte]string) {
	if time.Since(m.lastResolve) < time.Second {
		return // a target waiting for a topic retries at the heartbeat pace
	}
	m.lastResolve = time.Now()
	lctx, cancel := context.WithTimeout(ctx, m.cs.c.cfg.retryTimeout)
	defer cancel()
	topics, err := m.cs.c.Admin().ListTopics(lctx)
	if err != nil {
		m.cs.c.log.Info("listing topics to name an assignment failed; retrying", "group", m.cfg.id, "err", err)
		return
	}
	var matching []string
	for _, t := range topics {
		if t.Err == nil && m.pattern.MatchString(t.Name) {
			byID[t.ID] = t.Name
			matching = append(matching, t.Name)
		}
	}
	m.trackSubscription(matching)
}

// leave848 leaves the group (epoch -1; -2 keeps a static member's
// assignment for its return).
func (m *member) leave848(ctx context.Context) {
	m.mu.Lock()
	failed := m.failed != nil
	m.mu.Unlock()
	if failed {
		return // never in the group: nothing to leave
	}
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
