package riffle

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riffle-go/riffle/internal/assign"
	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrGroup wraps group errors the member cannot fix by itself.
var ErrGroup = errors.New("riffle: consumer group")

// errRejoin asks the member loop to join again.
var errRejoin = errors.New("rejoin")

// member is a group member (classic JoinGroup/SyncGroup/Heartbeat/
// LeaveGroup, or KIP-848 ConsumerGroupHeartbeat, on the coordinator's group
// connections, so its traffic never waits behind fetches). It owns the
// engine's assignment: it adds partitions the group assigns and revokes or
// drops the ones it loses.
//
// One goroutine (run) does the membership work in protocol order: join,
// sync, revoke (waiting for handlers, then committing), the offset fetch,
// the callbacks. Heartbeats run on their own goroutine for as long as the
// member holds a generation (group_heartbeat.go), so a slow revoke never
// costs the membership; auto-commits run on a third (autoCommit), so
// partitions kept through a rebalance keep being committed. Commits go
// through the committer, one request at a time.
type member struct {
	cs      *Consumer
	cfg     *groupConfig
	pattern *regexp.Regexp // the subscription pattern, matching whole topic names

	mu          sync.Mutex // guards the fields below for Stats and commits
	memberID    string
	generation  int32
	joined      bool  // in a settled generation (classic: synced; KIP-848: epoch > 0), not fenced
	failed      error // set once the membership ended for good (groupFailed)
	protocol    string
	coordinator int32
	// owned maps each owned partition to its ownership token, which
	// changes whenever the partition is added or starts being revoked:
	// commits read under an older token are dropped (see committer).
	owned        map[TopicPartition]uint64
	ownSeq       uint64
	listed       []string               // classic pattern: the last listing's matching topics
	listedOnce   chan struct{}          // closed after the first listing
	lastResolve  time.Time              // KIP-848 pattern: the last listing to name topic ids (work goroutine only)
	acked        []TopicPartition       // KIP-848: the reconciled ownership heartbeats report
	target       *target848             // KIP-848: the newest assignment not yet reconciled
	prev         assign.TopicPartitions // the last assignment received
	leaving      bool                   // closing: take nothing new
	closingPos   map[TopicPartition]int64
	closingMeta  map[TopicPartition]string
	closingReady chan struct{} // closed once closingPos is set

	commits *committer
	rejoin  chan struct{}
	errLog  errLogOnce // which group errors were logged at Error
	// moved: the partitions the last moveTo revoked and added, for
	// RebalanceHooks (the member's goroutine only).
	moved [2]int

	// trackMu guards tracked, the topics the member holds a metadata
	// reference to for its subscription (see trackSubscription).
	trackMu sync.Mutex
	tracked map[string]bool

	// Classic, the member's goroutine only: the topics of the last
	// JoinGroup (sorted, deduplicated), and, when the member led that
	// generation's assignment, the partition counts it assigned from,
	// for every topic of the group (see subscriptionChanged).
	joinedTopics []string
	leaderCounts map[string]int

	// subChecks counts the classic subscription checks (await), for
	// tests.
	subChecks atomic.Int64
}

func newMember(cs *Consumer) *member {
	m := &member{
		cs: cs, cfg: &cs.cfg.group,
		generation: -1, coordinator: -1,
		owned:      map[TopicPartition]uint64{},
		rejoin:     make(chan struct{}, 1),
		listedOnce: make(chan struct{}),
	}
	if re := cs.cfg.group.pattern; re != nil {
		// Like the Java client and the broker under KIP-848 (RE2/J
		// matches()), the pattern must match the whole name.
		m.pattern = regexp.MustCompile(`^(?:` + re.String() + `)$`)
	}
	m.commits = newCommitter(m)
	return m
}

func (m *member) cooperative() bool {
	for _, b := range m.cfg.balancers {
		if !b.a.Cooperative() {
			return false
		}
	}
	return true
}

func (m *member) requestRejoin() {
	select {
	case m.rejoin <- struct{}{}:
	default:
	}
}

// groupError reports err, one the member cannot fix by itself, to
// OnGroupError every time, and to the log at Error the first time since
// the member last joined (at Debug on the retries that meet it again).
func (m *member) groupError(err error) {
	err = fmt.Errorf("%w %q: %w", ErrGroup, m.cfg.id, err)
	if m.errLog.first(err) {
		m.cs.c.log.Error("group error", "group", m.cfg.id, "err", err)
	} else {
		m.cs.c.log.Debug("group error again", "group", m.cfg.id, "err", err)
	}
	if m.cfg.onGroupError != nil {
		m.cfg.onGroupError(err)
	}
}

// groupFailed reports err, which ends the membership for good (the broker
// cannot run the group's protocol), as groupError does, and keeps it for
// Stats: the member stops asking.
func (m *member) groupFailed(err error) {
	err = fmt.Errorf("%w %q: %w", ErrGroup, m.cfg.id, err)
	m.mu.Lock()
	m.failed = err
	m.mu.Unlock()
	m.cs.c.log.Error("group membership failed; the member stops", "group", m.cfg.id, "err", err)
	if m.cfg.onGroupError != nil {
		m.cfg.onGroupError(err)
	}
}

// run is the member's life: join, sync, revoke and assign; repeat on
// rebalance. Heartbeats and auto-commits run beside it. It returns when the
// consumer closes; Close then commits, hands the partitions back and
// leaves.
func (m *member) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	if m.cfg.autoCommit {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.autoCommit(ctx)
		}()
	}
	if e := m.cs.eos; e != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.loop(ctx)
		}()
	}
	if m.pattern != nil && m.cfg.protocol != GroupProtocolConsumer {
		// Classic: the member matches the pattern itself, against a
		// listing of the cluster's topics refreshed in the background.
		// (Under KIP-848 the broker matches it.)
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.listTopicsLoop(ctx)
		}()
	}
	if m.cfg.protocol == GroupProtocolConsumer {
		m.run848(ctx)
		return
	}
	m.runClassic(ctx)
}

func (m *member) runClassic(ctx context.Context) {
	if m.pattern != nil {
		m.awaitTopicList(ctx)
	}
	var g *generation
	defer func() { m.endGeneration(ctx, g, false) }()
	failures := 0
	for ctx.Err() == nil {
		m.endGeneration(ctx, g, !m.cooperative())
		g = nil
		start := time.Now()
		assignment, err := m.joinAndSync(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			m.rebalanced(start, err)
			failures++
			m.cs.c.log.Info("group join failed; retrying", "group", m.cfg.id, "err", err)
			m.sleep(ctx, m.cs.c.cfg.retryBackoff.Delay(failures, rand.Float64()))
			continue
		}
		failures = 0
		m.errLog.reset()
		g = m.startGeneration(ctx)
		m.moved = [2]int{}
		again := m.apply(g.ctx, assignment)
		m.rebalanced(start, nil)
		if again || g.ctx.Err() != nil {
			continue // cooperative: revoked partitions must be reassigned; or fenced
		}
		if err := m.await(ctx, g); ctx.Err() == nil {
			m.cs.c.log.Info("rejoining group", "group", m.cfg.id, "reason", err)
		}
	}
}

// endGeneration leaves generation g (nil: none) before the next join or on
// exit. An eager member first gives everything up, its heartbeats still
// running so that a slow revoke does not cost the membership; then the
// heartbeats stop. A fenced generation loses its partitions instead.
func (m *member) endGeneration(ctx context.Context, g *generation, revokeAll bool) {
	if g == nil {
		return
	}
	if revokeAll && g.fenced() == nil {
		m.revokeAll(g.ctx)
	}
	g.stopHeartbeats()
	if fe := g.fenced(); fe != nil {
		m.onFenced(ctx, fe)
	}
}

// onFenced handles a classic fence: every partition is lost (handlers
// cancelled, nothing committed), then the member forgets what the error
// says is gone before it joins again.
func (m *member) onFenced(ctx context.Context, fe *fencedError) {
	m.cs.c.log.Info("fenced by the group coordinator", "group", m.cfg.id, "err", fe)
	m.lose(ctx)
	switch fe.code {
	case kafkaerr.UnknownMemberID:
		m.resetMember()
	case kafkaerr.FencedInstanceID:
		m.groupError(fe.err)
		m.resetGeneration()
	default:
		m.resetGeneration()
	}
}

// await waits, heartbeats running, until the member must join again: the
// coordinator starts a rebalance, the member is fenced, the subscription
// changes (subscriptionChanged), a rejoin was requested, or ctx ends. It
// returns why.
func (m *member) await(ctx context.Context, g *generation) error {
	// The subscription is checked against the client's metadata (no
	// request of its own), so often.
	meta := time.NewTicker(min(m.cs.c.cfg.metadataMaxAge, time.Second))
	defer meta.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-g.ctx.Done():
			return context.Cause(g.ctx)
		case <-g.rebalance:
			return kafkaerr.ForCode(kafkaerr.RebalanceInProgress)
		case <-m.rejoin:
			return errRejoin
		case <-meta.C:
			m.subChecks.Add(1)
			if err := m.subscriptionChanged(); err != nil {
				return err
			}
		}
	}
}

func (m *member) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// findCoordinator returns the group coordinator's node id.
func (m *member) findCoordinator(ctx context.Context) (int32, error) {
	m.mu.Lock()
	c := m.coordinator
	m.mu.Unlock()
	if c >= 0 {
		return c, nil
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = m.cfg.id
	req.CoordinatorKeys = []string{m.cfg.id}
	req.CoordinatorType = 0
	resp, err := m.cs.cl.RequestAny(ctx, req)
	if err != nil {
		return -1, err
	}
	r := resp.(*kmsg.FindCoordinatorResponse)
	code, node := r.ErrorCode, r.NodeID
	if len(r.Coordinators) > 0 {
		code, node = r.Coordinators[0].ErrorCode, r.Coordinators[0].NodeID
	}
	if code != 0 {
		return -1, kafkaerr.ForCode(code)
	}
	m.mu.Lock()
	m.coordinator = node
	m.mu.Unlock()
	return node, nil
}

// groupRequest sends req to the coordinator on the group connection; a
// coordinator error forgets the coordinator so the next call finds it.
func (m *member) groupRequest(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	node, err := m.findCoordinator(ctx)
	if err != nil {
		return nil, err
	}
	cls := cluster.ClassGroup
	switch req.(type) {
	case *kmsg.JoinGroupRequest, *kmsg.SyncGroupRequest:
		cls = cluster.ClassJoin
	}
	resp, err := m.cs.cl.Request(ctx, node, cls, req)
	if err != nil {
		m.forgetCoordinator()
	}
	return resp, err
}

func (m *member) forgetCoordinator() {
	m.mu.Lock()
	m.coordinator = -1
	m.mu.Unlock()
}

// coordinatorError handles the codes that mean "ask someone else".
func (m *member) coordinatorError(code int16) bool {
	switch code {
	case kafkaerr.NotCoordinator, kafkaerr.CoordinatorNotAvailable:
		m.forgetCoordinator()
		return true
	case kafkaerr.CoordinatorLoadInProgress:
		return true
	}
	return false
}

func (m *member) ownedTPs() assign.TopicPartitions {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := assign.TopicPartitions{}
	for tp := range m.owned {
		out[tp.Topic] = append(out[tp.Topic], tp.Partition)
	}
	for t := range out {
		sort.Slice(out[t], func(i, j int) bool { return out[t][i] < out[t][j] })
	}
	return out
}

// joinRequest sends a JoinGroup. One the coordinator holds longer than
// slowJoinAfter is logged once at Info: the coordinator waits for members
// that have not rejoined, typically this process's previous instance
// (restarted with a new member id) until its session times out, which
// static membership avoids.
func (m *member) joinRequest(ctx context.Context, join *kmsg.JoinGroupRequest) (kmsg.Response, error) {
	slow := time.AfterFunc(m.cfg.slowJoinAfter, func() {
		m.cs.c.log.Info("group join waits for members that have not rejoined (a restarted member's previous instance counts until its session timeout expires); InstanceID (static membership) avoids the wait",
			"group", m.cfg.id, "waited", m.cfg.slowJoinAfter, "session_timeout", m.cfg.sessionTimeout, "rebalance_timeout", m.cfg.rebalanceTimeout)
	})
	defer slow.Stop()
	return m.groupRequest(ctx, join)
}

// joinAndSync joins the group and returns this member's assignment.
func (m *member) joinAndSync(ctx context.Context) (assign.TopicPartitions, error) {
	topics := m.subscription()
	m.trackSubscription(topics)
	m.joinedTopics = sortedTopics(topics)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m.leaderCounts = nil // set by lead, if this member leads this generation
		join := kmsg.NewPtrJoinGroupRequest()
		m.mu.Lock()
		m.joined = false // a rebalance is in progress until SyncGroup answers
		join.Group = m.cfg.id
		join.MemberID = m.memberID
		gen := m.generation
		m.mu.Unlock()
		join.SessionTimeoutMillis = int32(m.cfg.sessionTimeout.Milliseconds())
		join.RebalanceTimeoutMillis = int32(m.cfg.rebalanceTimeout.Milliseconds())
		if m.cfg.instanceID != "" {
			join.InstanceID = &m.cfg.instanceID
		}
		join.ProtocolType = "consumer"
		owned := m.ownedTPs()
		coop := m.cooperative()
		for _, b := range m.cfg.balancers {
			p := kmsg.NewJoinGroupRequestProtocol()
			p.Name = b.a.Name()
			// Cooperative members declare what they still own; the eager
			// sticky assignor wants the previous assignment (everything
			// was revoked before joining) to stay sticky.
			var claim assign.TopicPartitions
			switch {
			case coop:
				claim = owned
			case b.a.Name() == assign.StickyName:
				m.mu.Lock()
				claim = m.prev
				m.mu.Unlock()
			}
			p.Metadata = assign.EncodeSubscriptionRack(b.a, topics, claim, gen, m.cs.c.cfg.rack)
			join.Protocols = append(join.Protocols, p)
		}
		resp, err := m.joinRequest(ctx, join)
		if err != nil {
			return nil, err
		}
		jr := resp.(*kmsg.JoinGroupResponse)
		switch jr.ErrorCode {
		case 0:
		case kafkaerr.MemberIDRequired:
			m.mu.Lock()
			m.memberID = jr.MemberID
			m.mu.Unlock()
			continue
		case kafkaerr.UnknownMemberID:
			// The coordinator no longer knows us: our partitions may
			// be someone else's by now. Lost, then a new identity.
			m.lose(ctx)
			m.resetMember()
			continue
		case kafkaerr.RebalanceInProgress:
			continue
		case kafkaerr.FencedInstanceID:
			// Another process runs with our instance id.
			m.lose(ctx)
			err := kafkaerr.ForCode(jr.ErrorCode)
			m.groupError(err)
			return nil, err
		case kafkaerr.GroupAuthorizationFailed, kafkaerr.InvalidSessionTimeout,
			kafkaerr.InconsistentGroupProtocol, kafkaerr.GroupMaxSizeReached:
			err := kafkaerr.ForCode(jr.ErrorCode)
			m.groupError(err)
			return nil, err
		default:
			m.coordinatorError(jr.ErrorCode)
			return nil, kafkaerr.ForCode(jr.ErrorCode)
		}
		m.mu.Lock()
		m.memberID = jr.MemberID
		m.generation = jr.Generation
		if jr.Protocol != nil {
			m.protocol = *jr.Protocol
		}
		proto := m.protocol
		m.mu.Unlock()

		sync := kmsg.NewPtrSyncGroupRequest()
		sync.Group = m.cfg.id
		sync.Generation = jr.Generation
		sync.MemberID = jr.MemberID
		sync.InstanceID = join.InstanceID
		sync.ProtocolType = kmsg.StringPtr("consumer")
		sync.Protocol = kmsg.StringPtr(proto)
		if jr.LeaderID == jr.MemberID && !jr.SkipAssignment {
			plan, err := m.lead(ctx, proto, jr.Members)
			if err != nil {
				return nil, err
			}
			for id, tps := range plan {
				a := kmsg.NewSyncGroupRequestGroupAssignment()
				a.MemberID = id
				a.MemberAssignment = assign.EncodeAssignment(tps, nil)
				sync.GroupAssignment = append(sync.GroupAssignment, a)
			}
		}
		resp, err = m.groupRequest(ctx, sync)
		if err != nil {
			return nil, err
		}
		sr := resp.(*kmsg.SyncGroupResponse)
		switch sr.ErrorCode {
		case 0:
		case kafkaerr.RebalanceInProgress:
			continue
		case kafkaerr.UnknownMemberID, kafkaerr.IllegalGeneration:
			m.lose(ctx)
			if sr.ErrorCode == kafkaerr.UnknownMemberID {
				m.resetMember()
			}
			continue
		default:
			m.coordinatorError(sr.ErrorCode)
			return nil, kafkaerr.ForCode(sr.ErrorCode)
		}
		tps, err := assign.DecodeAssignment(sr.MemberAssignment)
		if err != nil {
			return nil, fmt.Errorf("%w: assignment: %v", errs.ErrMalformed, err)
		}
		m.mu.Lock()
		m.prev = tps
		m.joined = true
		m.mu.Unlock()
		return tps, nil
	}
}

func (m *member) resetMember() {
	m.mu.Lock()
	m.memberID = ""
	m.generation = -1
	m.joined = false
	m.mu.Unlock()
}

// resetGeneration keeps the member id (the coordinator may still know it)
// but no generation.
func (m *member) resetGeneration() {
	m.mu.Lock()
	m.generation = -1
	m.joined = false
	m.mu.Unlock()
}

// lead computes the group's assignment as its leader.
func (m *member) lead(ctx context.Context, proto string, jms []kmsg.JoinGroupResponseMember) (map[string]assign.TopicPartitions, error) {
	var bal assign.Assignor
	for _, b := range m.cfg.balancers {
		if b.a.Name() == proto {
			bal = b.a
		}
	}
	if bal == nil {
		return nil, fmt.Errorf("%w: the group chose protocol %q, which this member does not have", ErrGroup, proto)
	}
	var members []assign.Member
	all := map[string]bool{}
	for _, jm := range jms {
		mem, err := assign.DecodeSubscription(proto, jm.MemberID, jm.ProtocolMetadata)
		if err != nil {
			m.cs.c.log.Warn("undecodable member metadata; member gets nothing", "group", m.cfg.id, "member", jm.MemberID, "err", err)
			mem = assign.Member{ID: jm.MemberID}
		}
		if jm.InstanceID != nil {
			mem.InstanceID = *jm.InstanceID
		}
		members = append(members, mem)
		for _, t := range mem.Topics {
			all[t] = true
		}
	}
	counts := map[string]int32{}
	watched := make(map[string]int, len(all)) // for subscriptionChanged: 0 for a missing topic
	racks := assign.PartitionRacks{}          // KIP-881: the racks of each partition's replicas
	// A subscribed topic the metadata does not have gets no partitions
	// and is watched (the group rebalances once it appears), as Java's
	// leader assigns from the metadata it has: the leader does not wait
	// UnknownTopicWait for it, only the few refreshes it always has
	// (leaderTopicRefreshes, or the deprecated UnknownTopicRetries).
	tw := m.cs.cl.TopicWait()
	if tw.Refreshes == 0 {
		tw.Refreshes = leaderTopicRefreshes
	}
	for t := range all {
		tm, err := m.cs.cl.LookupTopicWait(ctx, t, tw)
		if err != nil {
			if errors.Is(err, errs.ErrUnknownTopic) {
				watched[t] = 0
				continue // subscribed but missing: nothing to assign
			}
			return nil, err
		}
		counts[t] = int32(len(tm.Partitions))
		watched[t] = len(tm.Partitions)
		racks[t] = partitionRacks(tm, m.cs.cl.Snapshot().Brokers)
	}
	// The leader watches every topic of the group, so the metadata
	// keeps them (Java: updateGroupSubscription, assignmentSnapshot).
	m.leaderCounts = watched
	m.trackSubscription(m.watchedTopics(m.subscription()))
	// The cooperative-sticky assignor already holds back partitions whose
	// current owner must revoke them first (KIP-429). The rack-aware
	// assignors use the racks only when members and partitions have
	// racks that differ (KIP-881).
	plan := bal.AssignRacks(members, counts, racks)
	for _, mem := range members {
		if _, ok := plan[mem.ID]; !ok {
			plan[mem.ID] = assign.TopicPartitions{}
		}
	}
	return plan, nil
}

// partitionRacks returns the racks of the replicas of each of tm's
// partitions (indexed by partition), from the racks brokers announce in
// metadata; a broker without a rack, or missing from brokers, adds none.
func partitionRacks(tm *cluster.TopicMeta, brokers map[int32]cluster.BrokerMeta) [][]string {
	out := make([][]string, len(tm.Partitions))
	for _, pm := range tm.Partitions {
		if pm.Partition < 0 || int(pm.Partition) >= len(out) {
			continue
		}
		var rs []string
		for _, r := range pm.Replicas {
			if b, ok := brokers[r]; ok && b.Rack != "" && !slices.Contains(rs, b.Rack) {
				rs = append(rs, b.Rack)
			}
		}
		out[pm.Partition] = rs
	}
	return out
}

// apply makes the engine consume exactly the assignment. It returns true if
// partitions were revoked under the cooperative protocol, which requires
// joining again so they can be handed to their new owners.
func (m *member) apply(ctx context.Context, tps assign.TopicPartitions) bool {
	want := map[TopicPartition]bool{}
	for t, ps := range tps {
		for _, p := range ps {
			want[TopicPartition{t, p}] = true
		}
	}
	revoked, _ := m.moveTo(ctx, want)
	return revoked > 0 && m.cooperative()
}

// moveTo revokes owned partitions not in want, then adds the new ones, and
// returns how many it revoked and added. Both protocols use it.
func (m *member) moveTo(ctx context.Context, want map[TopicPartition]bool) (revokedN, addedN int) {
	m.mu.Lock()
	var revoked, added []TopicPartition
	for tp := range m.owned {
		if !want[tp] {
			revoked = append(revoked, tp)
		}
	}
	for tp := range want {
		if m.owned[tp] == 0 {
			added = append(added, tp)
		}
	}
	m.mu.Unlock()
	sortTPs(revoked)
	sortTPs(added)
	if len(revoked) > 0 {
		m.revoke(ctx, revoked)
	}
	if len(added) > 0 {
		m.add(ctx, added)
	}
	m.moved = [2]int{len(revoked), len(added)}
	return len(revoked), len(added)
}

func sortTPs(tps []TopicPartition) {
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
}

// add starts consuming newly assigned partitions from their committed
// offsets (or the reset policy when none).
func (m *member) add(ctx context.Context, tps []TopicPartition) {
	m.mu.Lock()
	leaving := m.leaving
	m.mu.Unlock()
	if leaving {
		return // closing: the next rebalance hands them to others
	}
	committed, metas, epochs, err := m.commits.fetch(ctx, tps)
	if err != nil && ctx.Err() == nil {
		m.cs.c.log.Warn("fetching committed offsets failed; rejoining", "group", m.cfg.id, "err", err)
		m.requestRejoin()
		return
	}
	var as []Assignment
	for _, tp := range tps {
		start := m.cs.resetStart()
		if off, ok := committed[tp]; ok && off >= 0 {
			e, known := epochs[tp]
			if !known {
				e = -1
			}
			start = atCommitted(off, e)
		} else if m.cs.cfg.reset == ResetNone {
			m.cs.reportError(&PartitionError{Topic: tp.Topic, Partition: tp.Partition, Offset: -1,
				Err: fmt.Errorf("%w: no committed offset and reset policy none", ErrOffsetOutOfRange)})
		}
		as = append(as, Assignment{TopicPartition: tp, Start: start})
	}
	if ctx.Err() != nil {
		return // fenced meanwhile: these were never ours to consume
	}
	m.mu.Lock()
	for _, tp := range tps {
		m.ownSeq++
		m.owned[tp] = m.ownSeq
	}
	m.mu.Unlock()
	m.cs.assignFromGroup(as, metas)
	if m.cfg.onAssigned != nil {
		m.cfg.onAssigned(ctx, tps)
	}
}

// revoke gives partitions up cleanly: dispatch stops, running handlers are
// waited for (up to RevokeTimeout), finished offsets are committed, then
// the callback runs and the partitions are gone. A handler that outlives
// the timeout makes its partition lost instead (no commit, error reported).
// If ctx ends first (the member is fenced, or stops), nothing is committed
// and the partitions stay owned for the loss (or Close) to hand back.
func (m *member) revoke(ctx context.Context, tps []TopicPartition) {
	// New tokens first: a commit of these partitions read before now (an
	// auto-commit, Commit) can no longer overtake the revoke's.
	own := m.retoken(tps)
	if e := m.cs.eos; e != nil {
		// The transaction commits (or aborts) before the partitions
		// go; if ctx ended first they stay owned for the loss.
		if e.revoke(ctx, tps) != nil {
			return
		}
		m.released(ctx, tps)
		return
	}
	rctx, cancel := context.WithTimeout(ctx, m.cfg.revokeTimeout)
	pos, metas, err := m.cs.remove(rctx, false, tps)
	cancel()
	m.mu.Lock()
	ready := m.closingReady
	m.mu.Unlock()
	if ready != nil {
		// Closing: the consumer is draining (or drained) these
		// partitions itself; wait for the positions it reached so the
		// revoke commits them rather than nothing.
		select {
		case <-ready:
		case <-ctx.Done():
		}
		m.mu.Lock()
		for _, tp := range tps {
			if o, ok := m.closingPos[tp]; ok {
				pos[tp] = o
				if md, ok := m.closingMeta[tp]; ok {
					if metas == nil {
						metas = map[TopicPartition]string{}
					}
					metas[tp] = md
				}
			}
		}
		m.mu.Unlock()
	}
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		// remove left the partitions whose handler outlived the timeout
		// out of pos: they are lost, not committed.
		m.groupError(fmt.Errorf("revoke timeout %v: %w (a handler's partition is treated as lost, not committed; a processor's commits stop below its running records)", m.cfg.revokeTimeout, err))
	}
	if len(pos) > 0 && !m.cfg.noCommits {
		cctx, ccancel := context.WithTimeout(ctx, m.cfg.revokeTimeout)
		if err := m.commits.commitSync(cctx, pos, metas, own); err != nil && ctx.Err() == nil {
			m.cs.c.log.Warn("commit on revoke failed", "group", m.cfg.id, "err", err)
		}
		ccancel()
		if ctx.Err() != nil {
			return // fenced while committing: report them lost
		}
	}
	m.released(ctx, tps)
}

// released ends the revoke of tps: they are no longer the member's.
func (m *member) released(ctx context.Context, tps []TopicPartition) {
	m.mu.Lock()
	for _, tp := range tps {
		delete(m.owned, tp)
	}
	m.mu.Unlock()
	if m.cfg.onRevoked != nil {
		m.cfg.onRevoked(ctx, tps)
	}
}

// retoken gives the owned partitions among tps new ownership tokens and
// returns them.
func (m *member) retoken(tps []TopicPartition) map[TopicPartition]uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	own := make(map[TopicPartition]uint64, len(tps))
	for _, tp := range tps {
		if m.owned[tp] != 0 {
			m.ownSeq++
			m.owned[tp] = m.ownSeq
			own[tp] = m.ownSeq
		}
	}
	return own
}

func (m *member) revokeAll(ctx context.Context) {
	m.mu.Lock()
	var tps []TopicPartition
	for tp := range m.owned {
		tps = append(tps, tp)
	}
	m.mu.Unlock()
	if len(tps) > 0 {
		sortTPs(tps)
		m.revoke(ctx, tps)
	}
}

// lose drops every partition without committing: another member may
// already own them. Handlers' contexts are cancelled; commits still queued
// for them are dropped (their ownership ends here).
func (m *member) lose(ctx context.Context) {
	m.mu.Lock()
	var tps []TopicPartition
	for tp := range m.owned {
		tps = append(tps, tp)
	}
	m.owned = map[TopicPartition]uint64{}
	m.acked = nil
	m.joined = false
	m.mu.Unlock()
	if len(tps) == 0 {
		return
	}
	sortTPs(tps)
	m.cs.remove(ctx, true, tps)
	if e := m.cs.eos; e != nil {
		e.lose(ctx) // nothing of theirs may commit
	}
	m.cs.c.log.Warn("partitions lost", "group", m.cfg.id, "count", len(tps))
	if m.cfg.onLost != nil {
		m.cfg.onLost(ctx, tps)
	}
}

func (m *member) ownedList() []TopicPartition {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]TopicPartition, 0, len(m.owned))
	for tp := range m.owned {
		out = append(out, tp)
	}
	return out
}

// ownedPositions returns what a commit of the owned partitions covers now
// (the offset after the last finished record, with its metadata) and the
// ownership tokens they were read under. The tokens are read first, so a
// partition whose revoke started since has a newer one and the offset read
// here is dropped rather than committed over the revoke's.
func (m *member) ownedPositions() (map[TopicPartition]int64, map[TopicPartition]string, map[TopicPartition]uint64) {
	m.mu.Lock()
	own := make(map[TopicPartition]uint64, len(m.owned))
	tps := make([]TopicPartition, 0, len(m.owned))
	for tp, tok := range m.owned {
		own[tp] = tok
		tps = append(tps, tp)
	}
	m.mu.Unlock()
	offs, metas := m.cs.processedOffsets(tps)
	return offs, metas, own
}

// leave hands the partitions the member still owns back (the rebalance
// callback) and leaves the group (static members stay: leaving would
// trigger the rebalance static membership exists to avoid). Close calls
// it after the final commit and once the member's goroutines stopped, the
// Java client's order (commit, onPartitionsRevoked, LeaveGroup). The
// subscription's topics are no longer refreshed for the member.
func (m *member) leave(ctx context.Context) {
	defer m.untrackSubscription()
	m.handBack(ctx)
	if m.cfg.protocol == GroupProtocolConsumer {
		m.leave848(ctx)
		return
	}
	m.mu.Lock()
	memberID := m.memberID
	m.mu.Unlock()
	if memberID == "" || m.cfg.instanceID != "" {
		return
	}
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = m.cfg.id
	req.MemberID = memberID
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = memberID
	lm.Reason = kmsg.StringPtr("consumer closing")
	req.Members = append(req.Members, lm)
	if _, err := m.groupRequest(ctx, req); err != nil {
		m.cs.c.log.Info("leave group failed", "group", m.cfg.id, "err", err)
	}
}

// handBack runs the rebalance callback for every partition the member
// still owns as it leaves: OnPartitionsRevoked when it is in a settled
// generation, else (fenced, or a rebalance in progress) OnPartitionsLost,
// as the Java client's onLeavePrepare does.
func (m *member) handBack(ctx context.Context) {
	m.mu.Lock()
	tps := make([]TopicPartition, 0, len(m.owned))
	for tp := range m.owned {
		tps = append(tps, tp)
	}
	m.owned = map[TopicPartition]uint64{}
	joined := m.joined
	m.mu.Unlock()
	if len(tps) == 0 {
		return
	}
	sortTPs(tps)
	switch {
	case joined && m.cfg.onRevoked != nil:
		m.cfg.onRevoked(ctx, tps)
	case !joined && m.cfg.onLost != nil:
		m.cfg.onLost(ctx, tps)
	}
}

// commitFinal commits the positions a closing consumer reached for the
// partitions the member still owns. A rebalance in progress fails the
// commit (the generation is new from JoinGroup but not yet synced, or is
// about to move); the member keeps taking part in it (it takes nothing new
// while leaving), so the commit is retried with backoff, re-reading the
// generation, until it lands, ctx ends or one rebalance timeout passes.
// Partitions revoked meanwhile were committed by their revoke and are not
// committed again: another member may own them now.
func (m *member) commitFinal(ctx context.Context, pos map[TopicPartition]int64, metas map[TopicPartition]string) error {
	m.mu.Lock()
	m.leaving = true
	m.closingPos = pos
	m.closingMeta = metas
	if m.closingReady != nil {
		close(m.closingReady)
	}
	m.mu.Unlock()
	if e := m.cs.eos; e != nil {
		return e.final(ctx)
	}
	if m.cfg.noCommits {
		return nil
	}
	giveUp := time.Now().Add(m.cfg.rebalanceTimeout)
	wait := 20 * time.Millisecond
	for {
		m.mu.Lock()
		mine := map[TopicPartition]int64{}
		own := map[TopicPartition]uint64{}
		for tp, o := range pos {
			if tok := m.owned[tp]; tok != 0 {
				mine[tp], own[tp] = o, tok
			}
		}
		m.mu.Unlock()
		if len(mine) == 0 {
			return nil
		}
		err := m.commits.commitSync(ctx, mine, metas, own)
		// A partition whose revoke started meanwhile is left out (its
		// revoke commits it): try again with what is still owned.
		if err == nil || !(rebalanceCommitError(err) || errors.Is(err, ErrNotAssigned)) {
			return err
		}
		if time.Now().After(giveUp) {
			return fmt.Errorf("group still rebalancing after %v: %w", m.cfg.rebalanceTimeout, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-t.C:
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// leaderTopicRefreshes is how many refreshes answering a subscribed topic
// unknown a group leader takes before it assigns the topic nothing.
const leaderTopicRefreshes = 4
