package riffle

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/fetch"
	"github.com/riffle-go/riffle/internal/lifecycle"
)

// Consumer errors.
var (
	// ErrConsumerClosed: the consumer was closed; every call after Close
	// returns it at once. It matches ErrClosed.
	ErrConsumerClosed = errs.NewClosed("riffle: consumer closed")
	// ErrOffsetOutOfRange: a partition's offset is outside the log and the
	// reset policy is ResetNone.
	ErrOffsetOutOfRange = errors.New("riffle: offset out of range")
	// ErrCorruptBatch: a fetched batch failed its CRC or could not be
	// decoded; only its partition stops.
	ErrCorruptBatch = errors.New("riffle: corrupt record batch")
	// ErrNotAssigned: the partition is not assigned to this consumer.
	ErrNotAssigned = errors.New("riffle: partition not assigned")
)

// Consumer reads assigned partitions and runs a handler on their records.
//
// Each broker has its own fetcher, fetching only the partitions it leads
// that have buffer room, so a slow broker or partition never delays
// another. Each partition is handled in offset order by at most one runner
// at a time; runners for different partitions run concurrently. When a
// partition's leader moves, only that partition moves to the new broker's
// fetcher; an ownership epoch fences results of the old one. When the old
// leader's NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH answer names the
// new leader (KIP-951), the move happens at once, without waiting for a
// metadata refresh.
//
// Follower fetching (KIP-392): when the leader names a preferred read
// replica for a partition (a broker with replica.selector.class set does,
// from the client's Rack), the partition moves, the same way, to that
// replica's fetcher and goes on from the same offset. It goes back to the
// leader when the replica fails to serve it (an error such as
// OFFSET_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH or
// OFFSET_OUT_OF_RANGE, or a failed request), when metadata no longer lists
// the replica (or its broker) or the leader changes, and every
// MetadataMaxAge (as the Java client does after metadata.max.age.ms), so
// that the leader names the replica again or another.
type Consumer struct {
	c   *Client
	cl  *cluster.Cluster
	cfg consumerConfig

	life *lifecycle.Group // owns the consumer's goroutines and its Close
	ctx  context.Context  // life's: cancelled once Close drained

	mu       sync.Mutex
	parts    map[TopicPartition]*cpart // each holds a reference to its topic (TrackTopics)
	fetchers map[int32]*fetcher

	epochMu    sync.Mutex
	epochMarks map[TopicPartition]epochMark // see markEpoch

	buffered atomic.Int64 // decompressed bytes buffered across partitions
	reserved atomic.Int64 // bytes asked for by fetches in flight
	// budgetMu serialises the fetchers' check-and-reserve of the byte
	// budget (two brokers' fetchers could otherwise both take the same
	// room) and guards starved: fetchers that found no room, to which
	// the others leave the budget until they got some.
	budgetMu sync.Mutex
	starved  map[*fetcher]struct{}
	runq     runQueue
	wake     chan struct{} // wakes the coordinator
	passes   atomic.Int64  // the coordinator's passes (tests: no spin)

	member       *member // nil without a group
	memberCancel context.CancelFunc
	memberDone   chan struct{}
	eos          *eos // ExactlyOnce; nil otherwise
}

// NewConsumer returns a consumer with no partitions; add them with Assign
// (or join a group, see the group consumer). On a closed Client it returns
// ErrClientClosed (which matches ErrClosed) at once.
func NewConsumer(c *Client, opts ...ConsumerOption) (*Consumer, error) {
	if err := c.closedErr("NewConsumer"); err != nil {
		return nil, err
	}
	cfg := defaultConsumerConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	life := lifecycle.New()
	ctx := life.Context()
	cs := &Consumer{
		c: c, cl: c.cl, cfg: cfg, life: life, ctx: ctx,
		parts:    map[TopicPartition]*cpart{},
		fetchers: map[int32]*fetcher{},
		starved:  map[*fetcher]struct{}{},
		wake:     make(chan struct{}, 1),
	}
	cs.runq.init()
	for i := 0; i < cfg.runnerCount(); i++ {
		cs.life.Go(cs.runner)
	}
	cs.life.Go(cs.coordinate)
	if len(c.hooks.fetch) > 0 {
		cs.life.Go(cs.refreshLag)
	}
	if cfg.group.id != "" {
		if !c.groupMember.CompareAndSwap(false, true) {
			life.Stop()
			life.Wait()
			life.Finish()
			return nil, ErrClientHasGroupMember
		}
		cs.member = newMember(cs)
		if cfg.eos != nil {
			cs.eos = newEOS(cs)
			if err := cs.eos.start(); err != nil {
				life.Stop()
				life.Wait()
				life.Finish()
				c.groupMember.Store(false)
				return nil, err
			}
		}
		mctx, mcancel := context.WithCancel(ctx)
		cs.memberCancel = mcancel
		cs.memberDone = make(chan struct{})
		cs.life.Go(func() { cs.member.commits.run(ctx) }, func() {
			defer close(cs.memberDone)
			cs.member.run(mctx)
		})
	}
	return cs, nil
}

// ErrClientHasGroupMember: a Client carries one consumer group member at a
// time (as a Java KafkaConsumer does): the coordinator holds JoinGroup
// requests until every member rejoins, so two members sharing connections
// could wait on each other. Use one Client per group member.
var ErrClientHasGroupMember = errors.New("riffle: this client already has a consumer group member")

// errEOSCommit refuses a commit of a consumer under ExactlyOnce.
var errEOSCommit = fmt.Errorf("%w: under ExactlyOnce the offsets commit with the transactions", ErrTransactionState)

// ErrGroupManaged: partitions of a group consumer are assigned by the group.
var ErrGroupManaged = errors.New("riffle: partitions are assigned by the consumer group")

// resetStart is where a partition without a committed offset starts.
func (cs *Consumer) resetStart() StartOffset {
	if cs.cfg.reset == ResetEarliest {
		return AtEarliest()
	}
	return AtLatest()
}

// assignFromGroup adds partitions the group assigned, with the commit
// metadata of their committed offsets.
func (cs *Consumer) assignFromGroup(as []Assignment, metas map[TopicPartition]string) {
	cs.mu.Lock()
	if cs.life.Closing() {
		cs.mu.Unlock()
		return
	}
	var added []*cpart
	for _, a := range as {
		if _, ok := cs.parts[a.TopicPartition]; !ok {
			cs.cl.TrackTopics(a.Topic)
			p := newCPart(cs, a)
			p.meta = metas[a.TopicPartition]
			cs.parts[a.TopicPartition] = p
			added = append(added, p)
		}
	}
	cs.poke()
	cs.mu.Unlock()
	for _, p := range added {
		p.syncHooks()
	}
}

// processedOffsets returns, for the given partitions, the offset after the
// last finished record (what a commit may cover) and, with a sink, the
// commit metadata that goes with it.
func (cs *Consumer) processedOffsets(tps []TopicPartition) (map[TopicPartition]int64, map[TopicPartition]string) {
	out := map[TopicPartition]int64{}
	if cs.cfg.sink != nil {
		return splitPositions(cs.cfg.sink.Positions(sinkParts(tps)))
	}
	for _, tp := range tps {
		if p := cs.partition(tp); p != nil {
			p.mu.Lock()
			if p.processed >= 0 {
				out[tp] = p.processed
				cs.markEpoch(tp, p.processed, p.processedEpoch)
			}
			p.mu.Unlock()
		}
	}
	return out, nil
}

// epochMark is the leader epoch of the record before a processed offset.
type epochMark struct {
	offset int64
	epoch  int32
}

// markEpoch notes the leader epoch of the record before offset, as the
// positions a commit may cover are read, so that the commit carries it
// (KIP-320) without every path from a position to a commit passing it on.
func (cs *Consumer) markEpoch(tp TopicPartition, offset int64, epoch int32) {
	cs.epochMu.Lock()
	if cs.epochMarks == nil {
		cs.epochMarks = map[TopicPartition]epochMark{}
	}
	cs.epochMarks[tp] = epochMark{offset, epoch}
	cs.epochMu.Unlock()
}

// epochFor returns the leader epoch to commit with offset for tp: the one
// noted for that offset, else -1 (unknown, as offsets given by the user or
// a processor are).
func (cs *Consumer) epochFor(tp TopicPartition, offset int64) int32 {
	cs.epochMu.Lock()
	defer cs.epochMu.Unlock()
	if m, ok := cs.epochMarks[tp]; ok && m.offset == offset {
		return m.epoch
	}
	return -1
}

// Commit synchronously commits, for every partition the group assigned to
// this consumer, the offset after the last record whose handler finished.
// Records merely fetched or still being handled are never covered.
// After Close it returns ErrConsumerClosed at once.
func (cs *Consumer) Commit(ctx context.Context) error {
	if cs.life.Closing() {
		return ErrConsumerClosed
	}
	if cs.member == nil {
		return fmt.Errorf("%w: Commit needs a consumer group", ErrInvalidConfig)
	}
	if cs.eos != nil {
		return errEOSCommit
	}
	offs, metas, own := cs.member.ownedPositions()
	return cs.member.commits.commitSync(ctx, offs, metas, own)
}

// GroupMetadata returns the consumer's current group membership, for
// Producer.SendOffsetsToTransaction (Java's groupMetadata()): the group,
// the generation (classic protocol) or member epoch (KIP-848), the member
// id and the static instance id. It changes with every rebalance, so read
// it when sending the offsets, not once. Without a group it returns a
// GroupMetadata with an empty GroupID and GenerationID -1; while the member
// is joining, the generation is -1 and a transaction sending offsets with
// it is refused by the coordinator (abortable).
func (cs *Consumer) GroupMetadata() GroupMetadata {
	m := cs.member
	if m == nil {
		return GroupMetadata{GenerationID: -1}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return GroupMetadata{GroupID: m.cfg.id, GenerationID: m.generation, MemberID: m.memberID, GroupInstanceID: m.cfg.instanceID}
}

// CommitOffsets synchronously commits the given offsets (the next offset to
// consume, per partition) for the group. After Close it returns
// ErrConsumerClosed at once.
func (cs *Consumer) CommitOffsets(ctx context.Context, offsets map[TopicPartition]int64) error {
	if cs.life.Closing() {
		return ErrConsumerClosed
	}
	if cs.member == nil {
		return fmt.Errorf("%w: CommitOffsets needs a consumer group", ErrInvalidConfig)
	}
	if cs.eos != nil {
		return errEOSCommit
	}
	return cs.member.commits.commitSync(ctx, offsets, nil, nil)
}

// CommitAsync commits like Commit without waiting; fn (may be nil) gets
// the outcome. Commits are sent one at a time in order, so a later commit
// is never overtaken by an earlier one. After Close, fn gets
// ErrConsumerClosed at once, on the calling goroutine.
func (cs *Consumer) CommitAsync(fn func(error)) {
	if cs.life.Closing() {
		if fn != nil {
			fn(ErrConsumerClosed)
		}
		return
	}
	if cs.member == nil {
		if fn != nil {
			fn(fmt.Errorf("%w: CommitAsync needs a consumer group", ErrInvalidConfig))
		}
		return
	}
	if cs.eos != nil {
		if fn != nil {
			fn(errEOSCommit)
		}
		return
	}
	offsets, metas, own := cs.member.ownedPositions()
	w := make(chan error, 1)
	cs.member.commits.enqueue(offsets, metas, own, w)
	if fn != nil {
		started := cs.life.Go(func() {
			select {
			case err := <-w:
				fn(err)
			case <-cs.ctx.Done():
				fn(ErrConsumerClosed)
			}
		})
		if !started {
			fn(ErrConsumerClosed)
		}
	}
}

// closedErr is the error of a constructor (what) called on a closed
// Client, nil while it is open.
func (c *Client) closedErr(what string) error {
	select {
	case <-c.cl.Closed():
		return fmt.Errorf("riffle: %s: %w", what, ErrClientClosed)
	default:
		return nil
	}
}

func (cs *Consumer) poke() {
	select {
	case cs.wake <- struct{}{}:
	default:
	}
}

// Assignment is a partition to consume and where to start.
type Assignment struct {
	TopicPartition
	Start StartOffset
}

// String formats the assignment with its field names, e.g.
// "events[3]{Start:earliest}". (Without it, the String of the embedded
// TopicPartition would be promoted and %v would print only "events[3]".)
func (a Assignment) String() string {
	return fmt.Sprintf("%v{Start:%v}", a.TopicPartition, a.Start)
}

// Assign adds partitions. A partition already assigned keeps its position.
// After Close it returns ErrConsumerClosed.
func (cs *Consumer) Assign(as ...Assignment) error {
	if cs.life.Closing() {
		return ErrConsumerClosed
	}
	if cs.member != nil {
		return ErrGroupManaged
	}
	cs.mu.Lock()
	// Checked again under mu: Close collects the partitions under it
	// after it started closing, so none added here escapes it.
	if cs.life.Closing() {
		cs.mu.Unlock()
		return ErrConsumerClosed
	}
	var added []*cpart
	for _, a := range as {
		if _, ok := cs.parts[a.TopicPartition]; ok {
			continue
		}
		cs.cl.TrackTopics(a.Topic)
		p := newCPart(cs, a)
		cs.parts[a.TopicPartition] = p
		added = append(added, p)
	}
	cs.poke()
	cs.mu.Unlock()
	for _, p := range added {
		p.syncHooks() // a revoke since tells nothing: never reported
	}
	return nil
}

// Unassign removes partitions: dispatch stops, a handler call in progress
// is waited for (bounded by ctx), buffered records are dropped. It returns
// the positions reached (the offset after the last finished record).
// Their topics are no longer refreshed for this consumer. After Close it
// returns ErrConsumerClosed (Close unassigned everything).
func (cs *Consumer) Unassign(ctx context.Context, tps ...TopicPartition) (map[TopicPartition]int64, error) {
	if cs.life.Closing() {
		return nil, ErrConsumerClosed
	}
	pos, _, err := cs.remove(ctx, false, tps)
	return pos, err
}

// remove revokes (waits for handlers) or, when lost, cancels handlers and
// does not wait. It returns the positions reached and, with a sink, their
// commit metadata.
func (cs *Consumer) remove(ctx context.Context, lost bool, tps []TopicPartition) (map[TopicPartition]int64, map[TopicPartition]string, error) {
	cs.mu.Lock()
	var ps []*cpart
	for _, tp := range tps {
		if p, ok := cs.parts[tp]; ok {
			ps = append(ps, p)
			delete(cs.parts, tp)
			cs.cl.UntrackTopics(tp.Topic)
		}
	}
	cs.mu.Unlock()
	for _, p := range ps {
		p.revoke(lost)
	}
	var errsOut []error
	done := map[TopicPartition]int64{}
	var stopped []TopicPartition
	for _, p := range ps {
		if cs.cfg.sink != nil {
			// The runner only offers records to the sink (it never
			// blocks), so it is idle at once; the sink waits for what
			// it runs.
			<-p.idle()
			stopped = append(stopped, p.tp)
			continue
		}
		if !lost {
			// An idle partition wins over an expired ctx: select picks
			// at random among ready cases, so once ctx had ended while
			// waiting for one slow handler, every later partition,
			// idle or not, would randomly lose its position.
			idle := p.idle()
			select {
			case <-idle:
			default:
				select {
				case <-idle:
				case <-ctx.Done():
					errsOut = append(errsOut, fmt.Errorf("%s: handler still running: %w", p.tp, ctx.Err()))
					p.cancelHandler()
					continue
				}
			}
		} else {
			p.cancelHandler()
		}
		p.mu.Lock()
		if p.processed >= 0 {
			// -1: removed before its start offset was resolved. Never
			// commit that: it would erase the group's committed offset.
			done[p.tp] = p.processed
			cs.markEpoch(p.tp, p.processed, p.processedEpoch)
		}
		p.mu.Unlock()
	}
	var metas map[TopicPartition]string
	if len(stopped) > 0 {
		pos, err := cs.cfg.sink.Stop(ctx, sinkParts(stopped), lost)
		if err != nil {
			errsOut = append(errsOut, err)
		}
		done, metas = splitPositions(pos)
	}
	cs.poke()
	return done, metas, errors.Join(errsOut...)
}

// Pause stops fetching and dispatching the partitions until Resume. A
// handler call in progress finishes; buffered records stay. Pausing lasts
// until Resume or until the partition is unassigned. Partitions not
// assigned are ignored. After Close it returns ErrConsumerClosed.
func (cs *Consumer) Pause(tps ...TopicPartition) error {
	return cs.setPaused(tps, true)
}

// Resume resumes paused partitions, and restarts partitions stopped by an
// error at the offset the error reported. After Close it returns
// ErrConsumerClosed.
func (cs *Consumer) Resume(tps ...TopicPartition) error {
	return cs.setPaused(tps, false)
}

func (cs *Consumer) setPaused(tps []TopicPartition, paused bool) error {
	if cs.life.Closing() {
		return ErrConsumerClosed
	}
	cs.mu.Lock()
	var ps []*cpart
	for _, tp := range tps {
		if p, ok := cs.parts[tp]; ok {
			ps = append(ps, p)
		}
	}
	cs.mu.Unlock()
	for _, p := range ps {
		p.setPaused(paused)
	}
	cs.poke()
	return nil
}

// PartitionStats describes one assigned partition.
type PartitionStats struct {
	TopicPartition
	// Position is the next offset to hand to the handler.
	Position int64
	// Processed is the offset after the last record the handler finished
	// (with riffle/process: the first record not finished).
	Processed int64
	// HighWatermark is the partition's high watermark at the last fetch
	// (or, with a FetchBatchHook, the last refresh of a partition not
	// fetched: see FetchBatchEvent.Refreshed), -1 if unknown.
	HighWatermark int64
	// LastStable is the partition's last stable offset at the last fetch
	// (with ReadCommitted also at the last refresh), -1 if unknown: the
	// end of what a ReadCommitted consumer can read.
	LastStable int64
	// BufferedRecords and BufferedBytes are fetched but not yet handed to
	// the handler (nor to the processor, with riffle/process): with
	// Position == Processed and none buffered, every record fetched is
	// finished.
	BufferedRecords int
	BufferedBytes   int64
	Paused          bool
	// Leader is the partition's leader as of the last metadata, -1 if
	// unknown.
	Leader int32
	// ReadReplica is the broker the partition is fetched from when it is
	// not the leader: the preferred read replica the leader named
	// (KIP-392, see Rack); -1 while fetching from the leader.
	ReadReplica int32
	Err         error
	// Committed is the group's committed offset (-1 if none or no group).
	Committed int64
	// LagCommitted is HighWatermark - Committed; LagProcessed is
	// HighWatermark - Processed (-1 when either side is unknown). With
	// ReadCommitted they count from LastStable instead (while it is
	// known), as the Java client's records-lag does: records past it
	// cannot be read yet.
	LagCommitted int64
	LagProcessed int64
}

// String formats every field with its name, e.g.
// "events[3]{Position:120 Processed:118 ... LagProcessed:2}". (Without it,
// the String of the embedded TopicPartition would be promoted and %v would
// print only "events[3]".)
func (s PartitionStats) String() string {
	return fmt.Sprintf("%v{Position:%v Processed:%v HighWatermark:%v LastStable:%v BufferedRecords:%v BufferedBytes:%v Paused:%v Leader:%v ReadReplica:%v Err:%v Committed:%v LagCommitted:%v LagProcessed:%v}",
		s.TopicPartition, s.Position, s.Processed, s.HighWatermark, s.LastStable, s.BufferedRecords, s.BufferedBytes,
		s.Paused, s.Leader, s.ReadReplica, s.Err, s.Committed, s.LagCommitted, s.LagProcessed)
}

// ConsumerStats is a snapshot of the consumer's state.
type ConsumerStats struct {
	// BufferedBytes is the decompressed size of all buffered records; it
	// stays within FetchBufferBytes (plus at most one batch larger than
	// what a fetch asked for).
	BufferedBytes int64
	// TxnCommitted and TxnAborted count the transactions committed and
	// aborted under ExactlyOnce (aborts of transactions with inputs
	// handled in them).
	TxnCommitted, TxnAborted int64
	Partitions               []PartitionStats
	// GroupErr is the error that ended the group membership for good,
	// nil while the member runs (or retries): the broker cannot run the
	// group's protocol, e.g. GroupProtocolConsumer on a broker without
	// KIP-848 (an *UnsupportedError, matching ErrGroup and
	// ErrUnsupported). OnGroupError got it too.
	GroupErr error
}

// Stats returns a snapshot of the consumer's state.
func (cs *Consumer) Stats() ConsumerStats {
	cs.mu.Lock()
	ps := make([]*cpart, 0, len(cs.parts))
	for _, p := range cs.parts {
		ps = append(ps, p)
	}
	cs.mu.Unlock()
	st := ConsumerStats{BufferedBytes: cs.buffered.Load()}
	if m := cs.member; m != nil {
		m.mu.Lock()
		st.GroupErr = m.failed
		m.mu.Unlock()
	}
	if cs.eos != nil {
		st.TxnCommitted, st.TxnAborted = cs.eos.commits.Load(), cs.eos.aborts.Load()
	}
	var done map[TopicPartition]int64
	if cs.cfg.sink != nil {
		// With a processor, what finished is what it may commit.
		tps := make([]TopicPartition, len(ps))
		for i, p := range ps {
			tps[i] = p.tp
		}
		done = map[TopicPartition]int64{}
		for sp, o := range cs.cfg.sink.Offsets(sinkParts(tps)) {
			done[TopicPartition(sp)] = o
		}
	}
	for _, p := range ps {
		ps := p.stats()
		if done != nil {
			if o, ok := done[p.tp]; ok {
				ps.Processed = o
			}
		}
		ps.Committed = -1
		if cs.member != nil {
			ps.Committed = cs.member.commits.committedOffset(p.tp)
		}
		end := ps.HighWatermark
		if cs.cfg.isolation == ReadCommitted && ps.LastStable >= 0 {
			end = ps.LastStable
		}
		ps.LagCommitted, ps.LagProcessed = lag(end, ps.Committed), lag(end, ps.Processed)
		st.Partitions = append(st.Partitions, ps)
	}
	sort.Slice(st.Partitions, func(i, j int) bool {
		a, b := st.Partitions[i], st.Partitions[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	return st
}

// Close stops the consumer: dispatch stops, handler calls in progress are
// waited for until ctx ends (then their contexts are cancelled), and every
// goroutine is stopped before Close returns. It returns the positions
// reached. A group member drains until three quarters of ctx's remaining
// time (at most 5 s before its deadline), keeping the rest for the final
// commit; then, in the Java client's order, it calls OnPartitionsRevoked
// for the partitions it still owns (OnPartitionsLost if it was fenced or a
// rebalance was in progress) and leaves the group.
//
// Partitions that were stopped by an error when Close was called (a
// handler's error, a corrupt batch, an offset out of range with
// ResetNone; see OnPartitionError) are reported in the returned error, a
// *StoppedPartitionsError, along with any other failure: a stopped
// partition is never silent, even without an OnPartitionError callback.
//
// From the moment Close is called, the consumer's methods (but Stats) return
// ErrConsumerClosed (CommitAsync passes it to its callback). A second or
// concurrent Close waits for the first (or its own ctx) and returns no
// positions.
func (cs *Consumer) Close(ctx context.Context) (map[TopicPartition]int64, error) {
	if !cs.life.Close() {
		return nil, cs.life.AwaitDone(ctx)
	}
	defer cs.life.Finish()
	cs.mu.Lock()
	tps := make([]TopicPartition, 0, len(cs.parts))
	var stopped []*PartitionError
	for tp, p := range cs.parts {
		tps = append(tps, tp)
		p.mu.Lock()
		if p.state == stateFailed && p.err != nil {
			stopped = append(stopped, p.err)
		}
		p.mu.Unlock()
	}
	cs.mu.Unlock()
	if cs.member != nil {
		// The member takes nothing new from here on but stays in the
		// group until what finished is committed.
		cs.member.mu.Lock()
		cs.member.leaving = true
		cs.member.closingReady = make(chan struct{})
		cs.member.mu.Unlock()
	}
	// Drain by a deadline a little before ctx's, so that the final commit
	// still has time when handlers run to the end of it.
	dctx := ctx
	if dl, ok := ctx.Deadline(); ok && cs.member != nil {
		reserve := min(time.Until(dl)/4, 5*time.Second)
		var cancel context.CancelFunc
		dctx, cancel = context.WithDeadline(ctx, dl.Add(-reserve))
		defer cancel()
	}
	pos, metas, err := cs.remove(dctx, false, tps)
	if cs.member != nil {
		if cerr := cs.member.commitFinal(ctx, pos, metas); cerr != nil {
			err = errors.Join(err, fmt.Errorf("final commit: %w", cerr))
		}
		cs.memberCancel()
		<-cs.memberDone
		cs.member.leave(ctx)
	}
	cs.life.Stop()
	cs.life.Wait()
	if cs.member != nil {
		cs.c.groupMember.Store(false)
	}
	if len(stopped) > 0 {
		sort.Slice(stopped, func(i, j int) bool {
			a, b := stopped[i], stopped[j]
			return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
		})
		se := &StoppedPartitionsError{Partitions: stopped}
		if err == nil {
			err = se
		} else {
			err = errors.Join(err, se)
		}
	}
	return pos, err
}

// partition returns an assigned partition.
func (cs *Consumer) partition(tp TopicPartition) *cpart {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.parts[tp]
}

// coordinate assigns partitions to the fetcher of their leader, resolves
// start offsets, and moves partitions whose leader changed. It runs on
// every change and periodically, since leadership can move without errors.
func (cs *Consumer) coordinate() {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	// A tick with the same metadata as the last pass, which left nothing
	// to retry, has nothing to do: with thousands of partitions the pass
	// is most of an idle consumer's CPU. Wakes (assignments, leader
	// errors, resets) always run it.
	var lastSnap *cluster.Snapshot
	settled := false
	var expiry time.Time // the first preferred read replica to expire, zero: none
	for {
		select {
		case <-cs.ctx.Done():
			return
		case <-cs.wake:
			settled = false
		case now := <-tick.C:
			if settled && cs.cl.Snapshot() == lastSnap && (expiry.IsZero() || now.Before(expiry)) {
				continue
			}
		}
		cs.passes.Add(1)
		cs.mu.Lock()
		ps := make([]*cpart, 0, len(cs.parts))
		for _, p := range cs.parts {
			ps = append(ps, p)
		}
		cs.mu.Unlock()
		var needOffsets []*cpart
		snap := cs.cl.Snapshot()
		lastSnap = snap
		pending := false // something a later tick must retry
		owned := map[int32][]*cpart{}
		var checks map[int32][]*cpart // positions to check after a leader change
		now := time.Now()
		known := func(node int32) bool { _, ok := snap.Brokers[node]; return ok }
		expiry = time.Time{}
		for _, p := range ps {
			p.mu.Lock()
			switch {
			case p.state == stateRevoked || p.state == stateFailed:
			case p.state == stateNeedOffset:
				needOffsets = append(needOffsets, p)
				pending = true
			default:
				leader := int32(-1)
				pl := fetch.Placement{Leader: -1, Known: known}
				if tm := snap.Topics[p.tp.Topic]; tm != nil {
					if pm, ok := tm.Partition(p.tp.Partition); ok && pm.Err == nil {
						leader = pm.Leader
						p.leaderEpoch = pm.LeaderEpoch
						pl = fetch.Placement{Leader: pm.Leader, LeaderEpoch: pm.LeaderEpoch,
							Replicas: pm.Replicas, Offline: pm.Offline, Known: known}
					}
				}
				p.leader = leader
				// The leader, or the preferred read replica while
				// it is valid (KIP-392).
				target := p.replica.Target(pl, now)
				if until, ok := p.replica.Until(); ok && (expiry.IsZero() || until.Before(expiry)) {
					expiry = until
				}
				if leader < 0 {
					cs.cl.TriggerMetadata()
					pending = true
				}
				if p.checking != 0 || p.needsCheckLocked(p.leaderEpoch) {
					pending = true
				}
				if target != p.fetcher {
					// Only this partition moves; results of the old
					// fetcher are fenced by the new epoch. Buffered
					// records stay and are delivered first.
					p.epoch++
					p.fetcher = target
				}
				if target >= 0 {
					owned[target] = append(owned[target], p)
				}
				if leader >= 0 {
					if p.checking == 0 && p.needsCheckLocked(p.leaderEpoch) && !now.Before(p.resolveAfter) {
						if checks == nil {
							checks = map[int32][]*cpart{}
						}
						checks[leader] = append(checks[leader], p)
					}
				}
			}
			p.mu.Unlock()
		}
		if len(needOffsets) > 0 {
			cs.resolveOffsets(needOffsets)
		}
		if len(checks) > 0 {
			cs.startChecks(checks)
		}
		fs := cs.setFetchers(owned)
		for _, f := range fs {
			f.poke()
		}
		settled = !pending && !cs.fetchersIdle(fs)
	}
}

// fetchersIdle reports whether a fetcher waits to be retired (a later
// pass retires it).
func (cs *Consumer) fetchersIdle(fs []*fetcher) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, f := range fs {
		if !f.idleSince.IsZero() {
			return true
		}
	}
	return false
}

// fetcherRetireAfter is how long a fetcher whose broker leads none of the
// consumer's partitions lingers before it is retired (closing its fetch
// session): long enough that a leader moving away and back does not churn
// sessions.
const fetcherRetireAfter = time.Second

// setFetchers gives every broker's fetcher the partitions that broker
// leads (or serves as preferred read replica), starting fetchers for new leaders and retiring those that led
// nothing for fetcherRetireAfter, and returns the fetchers that remain.
func (cs *Consumer) setFetchers(owned map[int32][]*cpart) []*fetcher {
	now := time.Now()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for node, ps := range owned {
		f := cs.fetcherForLocked(node)
		f.owned.Store(&ps)
		f.idleSince = time.Time{}
	}
	out := make([]*fetcher, 0, len(cs.fetchers))
	for node, f := range cs.fetchers {
		if _, ok := owned[node]; !ok {
			var none []*cpart
			f.owned.Store(&none)
			if f.idleSince.IsZero() {
				f.idleSince = now
			} else if now.Sub(f.idleSince) >= fetcherRetireAfter {
				delete(cs.fetchers, node)
				f.cancel() // its loop closes the session and exits
				cs.forgetStarved(f)
				continue
			}
		}
		out = append(out, f)
	}
	return out
}

// fetcherForLocked returns node's fetcher, starting it if needed. cs.mu
// must be held.
func (cs *Consumer) fetcherForLocked(node int32) *fetcher {
	f, ok := cs.fetchers[node]
	if ok {
		return f
	}
	ctx, cancel := context.WithCancel(cs.ctx)
	f = &fetcher{cs: cs, node: node, wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel}
	cs.fetchers[node] = f
	cs.life.Go(f.loop) // refused once stopping: nothing is fetched any more
	return f
}

// pokeFetcher wakes node's fetcher, if it has one.
func (cs *Consumer) pokeFetcher(node int32) {
	cs.mu.Lock()
	f := cs.fetchers[node]
	cs.mu.Unlock()
	if f != nil {
		f.poke()
	}
}

func (cs *Consumer) reportError(pe *PartitionError) {
	cs.c.log.Warn("partition stopped", "topic", pe.Topic, "partition", pe.Partition, "offset", pe.Offset, "err", pe.Err)
	if cs.cfg.onError != nil {
		cs.cfg.onError(pe)
	}
}

func lag(hw, at int64) int64 {
	if hw < 0 || at < 0 {
		return -1
	}
	return max(hw-at, 0)
}

// kill stops the consumer like a crashed process (for tests): no revoke,
// no commit, no LeaveGroup; handlers' contexts are cancelled and every
// goroutine stops.
func (cs *Consumer) kill() {
	if !cs.life.Close() {
		cs.life.AwaitDone(context.Background())
		return
	}
	defer cs.life.Finish()
	cs.life.Stop()
	cs.life.Wait()
	cs.mu.Lock()
	for tp := range cs.parts {
		cs.cl.UntrackTopics(tp.Topic)
	}
	clear(cs.parts)
	cs.mu.Unlock()
	if cs.member != nil {
		cs.member.untrackSubscription()
		cs.c.groupMember.Store(false)
	}
}
