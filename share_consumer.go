package riffle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/riffle-go/riffle/internal/lifecycle"
	"github.com/riffle-go/riffle/internal/share"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareConsumer is a member of a share group (KIP-932, Kafka 4.2's
// "queues"): members of the group consume the same partitions
// cooperatively, the broker hands each record to one member at a time
// under an acquisition lock, and each record is acknowledged on its own
// (AckAccept, AckRelease, AckReject, AckRenew), with a delivery count
// (Record.DeliveryCount). Processing is unordered: records of one
// partition run concurrently, on as many handler goroutines as Runners
// says (default GOMAXPROCS*4), beyond the partition count.
//
// Membership is kept with ShareGroupHeartbeat; each broker leading an
// assigned partition has its own fetch loop and share session (one broker's
// slow fetch never delays another's), and acknowledgements ride on the
// next ShareFetch, or go in a ShareAcknowledge when there is nothing to
// fetch. A record whose lock expired before a handler took it is never
// handed out (the broker delivers it again); running handlers' locks are
// renewed (ShareAutoRenew) where the broker supports KIP-1222.
//
// Delivery is at least once: a record is delivered again if its member
// releases it, fails or leaves without acknowledging it, or holds it past
// its lock.
type ShareConsumer struct {
	c   *Client
	cl  *cluster.Cluster
	cfg consumerConfig
	// fetchClass is the member's own fetch connection per broker: a
	// broker holds a ShareFetch for up to its max wait and answers a
	// connection's requests in order, so members sharing one would
	// each wait behind the others' long polls.
	fetchClass cluster.Class

	life     *lifecycle.Group
	hctx     context.Context // handlers': cancelled at Close's deadline
	hcancel  context.CancelFunc
	noFetch  chan struct{} // closed by Close: fetch nothing new
	final    chan struct{} // closed by Close once handlers are done: release and close sessions
	runWG    sync.WaitGroup
	fetchWG  sync.WaitGroup
	memberID string

	mu          sync.Mutex
	memberEpoch int32
	failed      error // set once the membership ended for good (failMembership)
	coordinator int32
	assigned    map[[16]byte][]int32 // the group's assignment, by topic id
	fetchers    map[int32]*shareFetcher
	wake        chan struct{}

	q       shareQueue
	busy    atomic.Int64 // records queued or running, across brokers, and runners reserved by fetches in flight
	active  atomic.Int32 // fetchers with partitions to fetch
	starved atomic.Int32 // of those, the ones waiting for an idle runner
	runners int
	// keepAlive times the requests that keep a fetch connection holding
	// records from the broker's idle timeout (BrokerIdleTimeout).
	keepAlive share.KeepAlive

	accepted, released, rejected, renewed atomic.Int64
	redelivered, ackErrors, keepAlives    atomic.Int64
}

// NewShareConsumer joins the share group named by ShareGroup, subscribed to
// the topics of SubscribeTopics, and runs the HandleRecord handler on the
// records the group hands it. Options that apply: ShareGroup,
// SubscribeTopics, HandleRecord, OnGroupError, Runners, FetchMaxWait, FetchMaxBytes,
// CheckCRC, MaxDecompressedBytes, ShareAcknowledgementMode,
// ShareMaxRecords, ShareAutoRenew. Options that would change what the
// application gets are refused with ErrInvalidConfig, whatever their
// value, the error saying what to do instead: ExactlyOnce (a share group
// has no offsets to commit), Isolation and OffsetReset (the group's
// share.isolation.level and share.auto.offset.reset configs decide: set
// them with Admin.AlterGroupConfigs), OnPartitionError (no partition
// stops), InstanceID (no static membership), SubscribePattern (topics
// by name only), MaxBatchRecords (records come one at a time; see
// ShareMaxRecords), and HandleBatch. The other consumer and group
// options (fetch buffers, session and commit settings) are tuning of the
// regular consumer and are ignored.
//
// The handler's ctx is cancelled at Close's deadline; the record is then
// released. A Client may carry any number of share consumers: each has
// its own fetch connection per broker (closed by Close), so no member's
// ShareFetch waits behind another's long poll. On a closed Client it
// returns ErrClientClosed (which matches ErrClosed) at once.
func NewShareConsumer(c *Client, opts ...ConsumerOption) (*ShareConsumer, error) {
	if err := c.closedErr("NewShareConsumer"); err != nil {
		return nil, err
	}
	cfg := defaultConsumerConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validateShare(); err != nil {
		return nil, err
	}
	life := lifecycle.New()
	hctx, hcancel := context.WithCancel(life.Context())
	sc := &ShareConsumer{
		c: c, cl: c.cl, cfg: cfg, life: life, hctx: hctx, hcancel: hcancel,
		noFetch: make(chan struct{}), final: make(chan struct{}),
		memberID: newMemberID(), coordinator: -1,
		fetchers: map[int32]*shareFetcher{}, wake: make(chan struct{}, 1),
		keepAlive:  share.KeepAlive{Idle: c.cfg.brokerIdle},
		fetchClass: c.cl.NewFetchClass(),
	}
	sc.q.init()
	c.cl.TrackTopics(cfg.group.topics...)
	n := cfg.runnerCount()
	sc.runners = n
	sc.runWG.Add(n)
	for i := 0; i < n; i++ {
		life.Go(sc.runner)
	}
	life.Go(sc.memberLoop, sc.placeLoop)
	return sc, nil
}

func (sc *ShareConsumer) log() []any {
	return []any{"group", sc.cfg.share.group, "member", sc.memberID}
}

// MemberID is the member id the consumer chose (KIP-932 members name
// themselves).
func (sc *ShareConsumer) MemberID() string { return sc.memberID }

// Acknowledge sets what becomes of r, a record this consumer handed to its
// handler: in explicit mode every record needs one final type (AckAccept,
// AckRelease or AckReject), any number of AckRenew before it; in implicit
// mode a call made while the handler runs overrides the acknowledgement
// its return would make: the first final type given wins, so after an
// explicit Acknowledge a handler error releases nothing (it is logged at
// Debug level only); to have the record delivered again, Acknowledge it
// with AckRelease (or return the error without acknowledging it).
// Acknowledgements are batched into the next
// request to r's broker. ErrNotAcquired: r is no longer held by this
// member (acknowledged already, or its lock expired).
func (sc *ShareConsumer) Acknowledge(r *Record, t AcknowledgeType) error {
	if t < AckAccept || t > AckRenew {
		return fmt.Errorf("%w: acknowledge type %d", ErrInvalidConfig, t)
	}
	if r.share == nil {
		return ErrNotAcquired
	}
	f := r.share.f
	if f == nil || f.sc != sc {
		return ErrNotAcquired
	}
	err := f.ack(r.share.key, int8(t))
	if t != AckRenew {
		// Held or not before, r is not held now: its runner need not
		// hold it (explicit mode) when the handler returns.
		atomic.StoreUint32(&r.share.fin, 1)
	}
	return err
}

// runner takes records from the queue and runs the handler on them until
// Close drains the queue.
func (sc *ShareConsumer) runner() {
	defer sc.runWG.Done()
	implicit := sc.cfg.share.mode == ShareAckImplicit
	var r *Record
	started := false
	for {
		if r == nil {
			if r = sc.q.pop(); r == nil {
				return
			}
			started = r.share.f.start(r.share.key)
		}
		f, k := r.share.f, r.share.key
		if !started { // its lock ended in the queue (the tracker counts it)
			sc.idle()
			r = nil
			continue
		}
		err := safeHandle(func() error { return sc.cfg.onRecord(sc.hctx, r) })
		sc.idle()
		switch {
		case err != nil:
			what := "share handler failed; record released"
			if ferr, _ := f.finish(k, share.Release, nil); ferr != nil {
				// The handler acknowledged it (or its lock ended):
				// that acknowledgement stands.
				what = "share handler failed; record not held any more (acknowledged by the handler, or its lock ended)"
			}
			sc.c.log.Debug(what, append(sc.log(), "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err)...)
		case implicit:
			// A record waiting for a runner, from the same broker, starts
			// under the lock this one's acknowledgement takes.
			if next := sc.q.tryPop(); next != nil {
				if next.share.f == f {
					_, started = f.finish(k, share.Accept, &next.share.key)
				} else {
					f.finishIfHeld(k, share.Accept)
					started = next.share.f.start(next.share.key)
				}
				r = next
				continue
			}
			f.finishIfHeld(k, share.Accept)
		case atomic.LoadUint32(&r.share.fin) == 0:
			f.hold(k) // explicit mode, not acknowledged by the handler
		}
		r = nil
	}
}

// idle notes a runner free again: fetchers acquire only what idle runners
// can start, so no record waits out its lock in the queue.
func (sc *ShareConsumer) idle() { sc.unbusy(1) }

// reserve claims up to n idle runners for a fetch about to be sent, so
// that the fetchers of several brokers never acquire records for the same
// idle runner, and returns how many it claimed (0: none idle).
func (sc *ShareConsumer) reserve(n int) int {
	for {
		b := sc.busy.Load()
		idle := int64(sc.runners) - b
		// An even share of the idle runners per fetching broker: one
		// broker's long poll must not claim every idle runner while
		// another broker has records.
		share := idle
		if a := int64(sc.active.Load()); a > 1 {
			share = max(1, (idle+a-1)/a)
		}
		k := min(int64(n), share, idle)
		if k <= 0 {
			return 0
		}
		if sc.busy.CompareAndSwap(b, b+k) {
			return int(k)
		}
	}
}

// unbusy gives back n runners (records done, or a fetch's reservation)
// and wakes the fetchers if that made a runner idle.
func (sc *ShareConsumer) unbusy(n int) {
	if n <= 0 {
		return
	}
	after := sc.busy.Add(-int64(n))
	if after < int64(sc.runners) && after+int64(n) >= int64(sc.runners) {
		sc.mu.Lock()
		for _, f := range sc.fetchers {
			nudge(f.wake)
		}
		sc.mu.Unlock()
	}
	// Enough runners idle for a fetch that waits for more (shareCoalesce).
	if at := int64(sc.runners - sc.coalesceAt()); after <= at && after+int64(n) > at {
		sc.mu.Lock()
		for _, f := range sc.fetchers {
			nudge(f.roomy)
		}
		sc.mu.Unlock()
	}
}

func safeHandle(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("riffle: share handler panicked: %v", r)
		}
	}()
	return fn()
}

// memberLoop keeps the membership: ShareGroupHeartbeat at the
// coordinator's interval, the assignment each answer carries handed to the
// placement loop.
func (sc *ShareConsumer) memberLoop() {
	ctx := sc.life.Context()
	interval := 5 * time.Second
	failures := 0
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sc.final:
			return // Close leaves the group itself
		case <-timer.C:
		}
		next := interval
		sc.mu.Lock()
		epoch := sc.memberEpoch
		sc.mu.Unlock()
		resp, err := sc.heartbeat(ctx, epoch)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errs.ErrUnsupported):
			// No ShareGroupHeartbeat on the coordinator (a broker
			// without share groups): retrying cannot help.
			sc.failMembership(err)
			return
		case err == nil && resp.ErrorCode == kafkaerr.UnsupportedVersion:
			e := errs.Unsupported(int16(kmsg.ShareGroupHeartbeat), "ShareGroupHeartbeat", -1,
				"the group coordinator refused it")
			sc.failMembership(fmt.Errorf("%w: %w", e, kafkaerr.ForCode(resp.ErrorCode)))
			return
		case err != nil:
			failures++
			next = sc.c.cfg.retryBackoff.Delay(failures, 0.5)
			sc.c.log.Info("share group heartbeat failed", append(sc.log(), "err", err)...)
		case resp.ErrorCode == 0:
			failures = 0
			sc.mu.Lock()
			sc.memberEpoch = resp.MemberEpoch
			if resp.Assignment != nil {
				sc.assigned = map[[16]byte][]int32{}
				for _, t := range resp.Assignment.TopicPartitions {
					sc.assigned[t.TopicID] = slices.Clone(t.Partitions)
				}
			}
			sc.mu.Unlock()
			if resp.Assignment != nil {
				nudge(sc.wake)
			}
			if resp.HeartbeatIntervalMillis > 0 {
				interval = time.Duration(resp.HeartbeatIntervalMillis) * time.Millisecond
				next = interval
			}
		case resp.ErrorCode == kafkaerr.UnknownMemberID || resp.ErrorCode == kafkaerr.FencedMemberEpoch:
			// Fenced: join again at epoch 0; what we hold stays ours
			// (share records are locked to the member id) until the
			// broker says otherwise.
			sc.mu.Lock()
			sc.memberEpoch = 0
			sc.assigned = nil
			sc.mu.Unlock()
			nudge(sc.wake)
			next = 0
		default:
			code := resp.ErrorCode
			if code == kafkaerr.NotCoordinator || code == kafkaerr.CoordinatorNotAvailable {
				sc.mu.Lock()
				sc.coordinator = -1
				sc.mu.Unlock()
			}
			failures++
			next = sc.c.cfg.retryBackoff.Delay(failures, 0.5)
			sc.c.log.Info("share group heartbeat error", append(sc.log(), "err", kafkaerr.ForCode(code))...)
		}
		timer.Reset(next)
	}
}

// failMembership ends the membership for good: err (the broker cannot run
// share groups) goes to the log at Error, to OnGroupError and to Stats, and
// the member stops asking.
func (sc *ShareConsumer) failMembership(err error) {
	err = fmt.Errorf("%w %q: %w", ErrGroup, sc.cfg.share.group, err)
	sc.mu.Lock()
	sc.failed = err
	sc.mu.Unlock()
	sc.c.log.Error("share group membership failed; the member stops", append(sc.log(), "err", err)...)
	if fn := sc.cfg.group.onGroupError; fn != nil {
		fn(err)
	}
}

// heartbeat sends one ShareGroupHeartbeat at epoch (0 joins, -1 leaves).
// The subscription rides on every heartbeat, so every answer carries the
// assignment.
func (sc *ShareConsumer) heartbeat(ctx context.Context, epoch int32) (*kmsg.ShareGroupHeartbeatResponse, error) {
	node, err := sc.findCoordinator(ctx)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch = sc.cfg.share.group, sc.memberID, epoch
	if epoch >= 0 {
		req.SubscribedTopicNames = sc.cfg.group.topics
	}
	resp, err := sc.cl.Request(ctx, node, cluster.ClassGroup, req)
	if err != nil {
		sc.mu.Lock()
		sc.coordinator = -1
		sc.mu.Unlock()
		return nil, err
	}
	return resp.(*kmsg.ShareGroupHeartbeatResponse), nil
}

func (sc *ShareConsumer) findCoordinator(ctx context.Context) (int32, error) {
	sc.mu.Lock()
	c := sc.coordinator
	sc.mu.Unlock()
	if c >= 0 {
		return c, nil
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = sc.cfg.share.group
	req.CoordinatorKeys = []string{sc.cfg.share.group}
	resp, err := sc.cl.RequestAny(ctx, req)
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
	sc.mu.Lock()
	sc.coordinator = node
	sc.mu.Unlock()
	return node, nil
}

// placeLoop gives each broker's fetcher the assigned partitions it leads:
// when the assignment changes and every 250 ms (leaders move).
func (sc *ShareConsumer) placeLoop() {
	ctx := sc.life.Context()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		sc.place()
		select {
		case <-ctx.Done():
			return
		case <-sc.noFetch:
			sc.mu.Lock()
			for _, f := range sc.fetchers {
				f.setOwned(nil)
			}
			sc.mu.Unlock()
			return
		case <-sc.wake:
		case <-t.C:
		}
	}
}

func (sc *ShareConsumer) place() {
	snap := sc.cl.Snapshot()
	byID := map[[16]byte]string{}
	for name, tm := range snap.Topics {
		byID[tm.ID] = name
	}
	owned := map[int32][]shareTP{}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	missing := false
	for id, ps := range sc.assigned {
		name, ok := byID[id]
		if !ok {
			missing = true
			continue
		}
		tm := snap.Topics[name]
		for _, p := range ps {
			if p < 0 || int(p) >= len(tm.Partitions) || tm.Partitions[p].Leader < 0 {
				missing = true
				continue
			}
			leader := tm.Partitions[p].Leader
			owned[leader] = append(owned[leader], shareTP{TP: share.TP{ID: id, Partition: p}, topic: name})
		}
	}
	if missing {
		sc.cl.TriggerMetadata()
	}
	for node, tps := range owned {
		if sc.fetchers[node] == nil && !sc.life.Closing() {
			f := newShareFetcher(sc, node)
			sc.fetchWG.Add(1)
			if !sc.life.Go(f.loop) {
				sc.fetchWG.Done()
				continue
			}
			sc.fetchers[node] = f
		}
		sort.Slice(tps, func(i, j int) bool {
			if tps[i].topic != tps[j].topic {
				return tps[i].topic < tps[j].topic
			}
			return tps[i].TP.Partition < tps[j].TP.Partition
		})
		if f := sc.fetchers[node]; f != nil {
			f.setOwned(tps)
		}
	}
	for node, f := range sc.fetchers {
		if _, ok := owned[node]; !ok {
			f.setOwned(nil)
		}
	}
}

// ShareStats describes a ShareConsumer.
type ShareStats struct {
	MemberID    string
	MemberEpoch int32
	// Assigned are the partitions the group assigned (others hold them
	// too: share groups assign a partition to several members).
	Assigned []TopicPartition
	// Acquired counts the records this member holds under acquisition
	// locks: Queued (waiting for a handler), Running and Held (explicit
	// mode: the handler returned without acknowledging).
	Acquired, Queued, Running, Held int
	// Accepted, Released, Rejected and Renewed count acknowledgements
	// sent; Expired counts acquisition locks that ended while this member
	// held the record (before a handler took it, while it ran or was held,
	// or before its acknowledgement went out), each record once; an
	// acknowledgement overridden by the handler's own Acknowledge is not
	// an expiry;
	// Redelivered counts records received with a delivery count above 1;
	// AckErrors the partitions a broker refused acknowledgements or
	// fetches for; KeepAlives the requests sent only to keep a fetch
	// connection holding records from the broker's idle timeout
	// (BrokerIdleTimeout).
	Accepted, Released, Rejected, Renewed, Expired, Redelivered, AckErrors, KeepAlives int64
	// LockTimeout is the acquisition lock duration the brokers last
	// reported.
	LockTimeout time.Duration
	// Err is the error that ended the membership for good, nil while the
	// member runs (or retries): the broker has no share groups (an
	// *UnsupportedError naming KIP-932, matching ErrGroup and
	// ErrUnsupported). OnGroupError got it too.
	Err error
}

// Stats returns a snapshot.
func (sc *ShareConsumer) Stats() ShareStats {
	st := ShareStats{
		MemberID: sc.memberID, Accepted: sc.accepted.Load(), Released: sc.released.Load(),
		Rejected: sc.rejected.Load(), Renewed: sc.renewed.Load(),
		Redelivered: sc.redelivered.Load(), AckErrors: sc.ackErrors.Load(), KeepAlives: sc.keepAlives.Load(),
	}
	snap := sc.cl.Snapshot()
	byID := map[[16]byte]string{}
	for name, tm := range snap.Topics {
		byID[tm.ID] = name
	}
	sc.mu.Lock()
	st.MemberEpoch, st.Err = sc.memberEpoch, sc.failed
	for id, ps := range sc.assigned {
		for _, p := range ps {
			st.Assigned = append(st.Assigned, TopicPartition{byID[id], p})
		}
	}
	fs := make([]*shareFetcher, 0, len(sc.fetchers))
	for _, f := range sc.fetchers {
		fs = append(fs, f)
	}
	sc.mu.Unlock()
	for _, f := range fs {
		f.mu.Lock()
		st.Queued += f.tr.Count(share.Queued)
		st.Running += f.tr.Count(share.Running)
		st.Held += f.tr.Count(share.Held)
		st.Expired += f.tr.Expired()
		f.mu.Unlock()
		if l := time.Duration(f.lockMs.Load()) * time.Millisecond; l > st.LockTimeout {
			st.LockTimeout = l
		}
	}
	st.Acquired = st.Queued + st.Running + st.Held
	sort.Slice(st.Assigned, func(i, j int) bool {
		a, b := st.Assigned[i], st.Assigned[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	return st
}

// Close stops fetching, releases the records no handler took, waits for
// the running handlers until ctx ends (then cancels their context: those
// records are released), releases what explicit mode still holds, closes
// every share session with its last acknowledgements and leaves the group.
// A second or concurrent Close waits for the first.
func (sc *ShareConsumer) Close(ctx context.Context) error {
	if !sc.life.Close() {
		return sc.life.AwaitDone(ctx)
	}
	defer sc.life.Finish()
	close(sc.noFetch)
	// Queued records go back at once.
	for _, r := range sc.q.close() {
		r.share.f.finishIfHeld(r.share.key, share.Release)
		sc.busy.Add(-1)
	}
	runDone := make(chan struct{})
	sc.life.Go(func() { sc.runWG.Wait(); close(runDone) })
	var err error
	select {
	case <-runDone:
	case <-ctx.Done():
		err = ctx.Err()
		sc.hcancel() // handlers end; their records are released
		<-runDone
	}
	close(sc.final)
	fetchDone := make(chan struct{})
	sc.life.Go(func() { sc.fetchWG.Wait(); close(fetchDone) })
	select {
	case <-fetchDone:
	case <-ctx.Done():
		err = ctx.Err()
	}
	lctx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		lctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
	}
	sc.mu.Lock()
	failed := sc.failed != nil
	sc.mu.Unlock()
	if failed {
		// Never in the group: nothing to leave.
	} else if resp, lerr := sc.heartbeat(lctx, -1); lerr != nil {
		sc.c.log.Info("leaving the share group failed", append(sc.log(), "err", lerr)...)
	} else if resp.ErrorCode != 0 {
		sc.c.log.Info("leaving the share group failed", append(sc.log(), "err", kafkaerr.ForCode(resp.ErrorCode))...)
	}
	sc.hcancel()
	sc.life.Stop()
	sc.life.Wait()
	sc.cl.ReleaseClass(sc.fetchClass)
	sc.cl.UntrackTopics(sc.cfg.group.topics...)
	return err
}

// shareQueue is the records waiting for a handler, across brokers.
//
// A push wakes only as many runners as there are records no woken runner
// will take: waiting counts the runners blocked in pop that no Signal has
// been issued for, wakes the Signals issued whose runner has not returned
// from Wait yet. A runner waits only while the queue is empty, so a
// record never waits while a runner sleeps unsignaled.
type shareQueue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	recs    []*Record
	head    int // recs[head:] wait
	waiting int
	wakes   int
	closed  bool
	avail   atomic.Int32 // len(recs)-head, read without mu by tryPop
}

func (q *shareQueue) init() { q.cond = sync.NewCond(&q.mu) }

// push queues rs; after close it queues nothing and returns false.
func (q *shareQueue) push(rs []*Record) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	if q.head == len(q.recs) {
		q.recs, q.head = q.recs[:0], 0
	} else if q.head > len(q.recs)/2 && len(q.recs)+len(rs) > cap(q.recs) {
		n := copy(q.recs, q.recs[q.head:])
		clear(q.recs[n:])
		q.recs, q.head = q.recs[:n], 0
	}
	q.recs = append(q.recs, rs...)
	q.avail.Store(int32(len(q.recs) - q.head))
	wake := q.wakeLocked()
	q.mu.Unlock()
	if wake {
		q.cond.Signal()
	}
	return true
}

// wakeLocked reports whether to wake a waiting runner: records wait, a
// runner waits, and no wake is on its way. Runners are woken one at a
// time, each woken one waking the next once it has taken its record
// (pop): with quick handlers the runners already awake take most
// records (tryPop) and few are woken, where waking one per record
// cost a goroutine switch per record; with slow ones the chain wakes
// as many as there are records, a scheduler hop apart.
func (q *shareQueue) wakeLocked() bool {
	if q.head == len(q.recs) || q.waiting == 0 || q.wakes > 0 {
		return false
	}
	q.waiting--
	q.wakes++
	return true
}

// tryPop returns the next record if one waits, without waiting.
func (q *shareQueue) tryPop() *Record {
	if q.avail.Load() == 0 {
		return nil // nothing queued: no lock
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.head == len(q.recs) {
		return nil
	}
	return q.take()
}

func (q *shareQueue) take() *Record {
	r := q.recs[q.head]
	q.recs[q.head] = nil
	q.head++
	q.avail.Store(int32(len(q.recs) - q.head))
	return r
}

// pop returns the next record, or nil once the queue is closed.
func (q *shareQueue) pop() *Record {
	q.mu.Lock()
	for q.head == len(q.recs) && !q.closed {
		q.waiting++
		q.cond.Wait()
		if q.wakes > 0 {
			q.wakes--
		}
	}
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	r := q.take()
	wake := q.wakeLocked() // the next in the chain
	q.mu.Unlock()
	if wake {
		q.cond.Signal()
	}
	return r
}

// close wakes every runner and returns what was still queued.
func (q *shareQueue) close() []*Record {
	q.mu.Lock()
	rs := q.recs[q.head:]
	q.recs, q.head, q.closed = nil, 0, true
	q.avail.Store(0)
	q.mu.Unlock()
	q.cond.Broadcast()
	return rs
}
