package ranges

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/internal/clientinternal"
	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrNoGroup: a Checkpoint was asked to commit without a group.
var ErrNoGroup = errors.New("ranges: no consumer group to commit to")

// ErrGroupActive is riffle.ErrGroupActive: a checkpoint commit was refused
// because the group has members, whose commits would overwrite it.
var ErrGroupActive = riffle.ErrGroupActive

// MaxRecords makes a Planner split ranges into at most n offsets each (0,
// the default: one range per partition and round). Readers ignore it.
func MaxRecords(n int64) Option { return func(c *config) { c.maxRecords = n } }

// StartAt says where a Planner starts on a partition the group has no
// committed offset for: riffle.AtEarliest() (the default), AtLatest(),
// AtTime or AtOffset. Only the first round uses it: partitions that appear
// later (the topic grew) start where NewPartitionsStartAt says. A
// standalone Checkpoint (NewCheckpoint) uses it the same way for
// partitions it has no start for. Readers ignore it.
func StartAt(s riffle.StartOffset) Option {
	return func(c *config) { c.start = s }
}

// NewPartitionsStartAt says where a Planner starts on a partition that
// appears after its first round (partitions were added to a topic) and
// that the group has no committed offset for: riffle.AtEarliest() (the
// default), AtLatest(), AtTime or AtOffset (clamped to the partition's
// log). StartAt does not apply to them: it says where an existing topic
// is picked up, while a new partition holds only records written after it
// was created, all of them new to the planner.
//
// Earliest is the default because producers can write to a new partition
// before the planner's next round sees it (Next refreshes metadata once
// per round; Watch rounds are an interval apart): starting at the latest
// offset, as a Java consumer with auto.offset.reset=latest does for a
// partition it has no offset for, skips those records, and no later
// round plans them. Kafka's consumer documentation warns of exactly this
// loss for auto.offset.reset=latest when a topic's partition count grows
// (KAFKA-12261). AtLatest fits only a planner that wants what is written
// from its own discovery on; AtTime(t) with t the job's start bounds the
// read by time instead (as Kafka's by_duration reset, KIP-1106, does).
//
// A partition the group has a committed offset for starts there whatever
// this says. Partitions added while no Planner ran are not "new" to the
// next Planner: its first round starts them at StartAt, like every
// partition without a committed offset. Readers and NewCheckpoint ignore
// it.
func NewPartitionsStartAt(s riffle.StartOffset) Option {
	return func(c *config) { c.newStart = s }
}

// Untracked makes a Planner's Checkpoint keep no record of the ranges Next
// returns: Outstanding counts none of them. It suits a Planner whose
// ranges are marked done on another Checkpoint, or never (one that only
// discovers partitions and where they start): without it, such a Planner
// running for a long time would hold every range it ever planned.
// Offsets, MarkDone and Commit work as without it.
func Untracked() Option { return func(c *config) { c.untracked = true } }

// Planner plans a consumer group's topics into ranges incrementally: each
// call to Next returns only ranges it has not returned before, from where
// the group's checkpoint stands up to the high watermark (the last stable
// offset with ReadCommitted), so across calls, while producers append,
// the ranges never overlap and leave no gap. Its Checkpoint takes the
// ranges back as they are done and commits the group's offsets.
//
// A Planner owns no goroutines. Next and Watch are serialized; the
// Checkpoint is safe for concurrent use.
//
// Options: MaxRecords, StartAt, NewPartitionsStartAt and ReadCommitted
// (hand ReadCommitted to the Readers too, so they read what was planned).
type Planner struct {
	client *riffle.Client
	cl     *cluster.Cluster
	group  string
	topics []string
	cfg    config

	mu        sync.Mutex // serializes rounds
	front     frontier
	rounds    int
	committed map[riffle.TopicPartition]int64 // the group's, as of the first round (and later fetches)
	cp        *Checkpoint
}

// NewPlanner returns a planner of topics for group. An empty group plans
// from the start spec alone and its Checkpoint cannot commit. The
// planner contacts nothing until Next.
func NewPlanner(client *riffle.Client, group string, topics []string, opts ...Option) (*Planner, error) {
	cfg := newConfig(opts)
	if cfg.maxRecords < 0 {
		return nil, fmt.Errorf("%w: MaxRecords must not be negative (0: no limit)", riffle.ErrInvalidConfig)
	}
	if len(topics) == 0 {
		return nil, fmt.Errorf("%w: no topics to plan", riffle.ErrInvalidConfig)
	}
	for _, t := range topics {
		if t == "" {
			return nil, fmt.Errorf("%w: empty topic name", riffle.ErrInvalidConfig)
		}
	}
	cl, _ := clientinternal.Access(client)
	p := &Planner{
		client: client, cl: cl, group: group, topics: append([]string(nil), topics...), cfg: cfg,
		front: newFrontier(),
	}
	p.cp = newCheckpoint(client, group, cfg)
	return p, nil
}

// Checkpoint returns the planner's checkpoint: mark the ranges of Next
// done there, and commit it.
func (p *Planner) Checkpoint() *Checkpoint { return p.cp }

// Next plans one round: every partition of the planner's topics, new
// partitions included, from where the previous round stopped (on the
// first round: the group's committed offset, else StartAt; on a partition
// first seen later: the group's committed offset, else
// NewPartitionsStartAt) to the partition's end now, split by MaxRecords
// and ordered by topic, partition and offset. It returns no ranges when nothing was appended.
// Offsets the log deleted before they were planned (retention passed
// them) are skipped and count as done in the checkpoint. On error the
// round plans nothing and the next call starts from the same place.
func (p *Planner) Next(ctx context.Context) ([]Range, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rounds > 0 {
		// Pick up partitions added since the last round.
		if err := p.cl.RefreshMetadata(ctx); err != nil {
			return nil, err
		}
	}
	logStarts, err := listOffsets(ctx, p.cl, p.topics, riffle.OffsetEarliest, false)
	if err != nil {
		return nil, err
	}
	ends, err := listOffsets(ctx, p.cl, p.topics, riffle.OffsetLatest, p.cfg.readCommitted)
	if err != nil {
		return nil, err
	}
	var fresh []riffle.TopicPartition
	for tp := range ends {
		if _, ok := p.front.next[tp]; !ok {
			fresh = append(fresh, tp)
		}
	}
	starts := map[riffle.TopicPartition]int64{}
	later := map[riffle.TopicPartition]bool{}     // left for the next round
	groupHas := map[riffle.TopicPartition]int64{} // fresh partitions starting at the group's offset
	if len(fresh) > 0 {
		if p.group != "" && (p.rounds == 0 || !allIn(fresh, p.committed)) {
			committed, err := groupOffsets(ctx, p.client, p.group)
			if err != nil {
				return nil, err
			}
			p.committed = committed
		}
		var nostart []riffle.TopicPartition
		for _, tp := range fresh {
			if o, ok := p.committed[tp]; ok {
				starts[tp] = o
				groupHas[tp] = o
			} else {
				nostart = append(nostart, tp)
			}
		}
		switch {
		case len(nostart) == 0:
		case p.rounds == 0:
			spec, err := specStarts(ctx, p.client, p.group, p.topics, p.cfg.start, ends)
			if err != nil {
				return nil, err
			}
			for _, tp := range nostart {
				starts[tp] = spec[tp]
			}
		case p.cfg.newStart == riffle.AtEarliest():
			for _, tp := range nostart {
				starts[tp] = logStarts[tp]
			}
		default:
			spec, err := specStarts(ctx, p.client, p.group, topicsOf(nostart), p.cfg.newStart, ends)
			if err != nil {
				return nil, err
			}
			for _, tp := range nostart {
				o, ok := spec[tp]
				if !ok {
					// Not listed there yet (metadata moving): the
					// next round finds it new again.
					later[tp] = true
					continue
				}
				starts[tp] = o
			}
		}
	}
	obs := make([]observed, 0, len(ends))
	for tp, end := range ends {
		if later[tp] {
			continue
		}
		ls, ok := logStarts[tp]
		if !ok {
			ls = -1 // listed in one call, not the other: a partition just created
		}
		obs = append(obs, observed{tp: tp, start: starts[tp], logStart: ls, end: end})
	}
	st := p.front.plan(obs, p.cfg.maxRecords)
	p.rounds++
	p.cp.planned(st, groupHas)
	return st.ranges, nil
}

// Watch plans on an interval: it calls Next at once and then every
// interval, and calls fn on the caller's goroutine with each round's
// ranges when there are any. It returns when ctx ends (ctx's error), when
// Next fails (its error) or when fn fails (fn's error). A slow fn delays
// the next round; rounds never overlap.
func (p *Planner) Watch(ctx context.Context, interval time.Duration, fn func(context.Context, []Range) error) error {
	if interval <= 0 {
		return fmt.Errorf("%w: Watch interval must be positive", riffle.ErrInvalidConfig)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		rs, err := p.Next(ctx)
		if err != nil {
			return err
		}
		if len(rs) > 0 {
			if err := fn(ctx, rs); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Checkpoint tracks which ranges are done and commits, per partition, the
// offset below which every offset is done, as the group's committed
// offset (so `riffle group lag` and every lag tool see the progress, and
// a new Planner on the group resumes there: ranges planned but not done
// before are planned again). Ranges may be marked done in any order and
// more than once; a range not done yet, or offsets no range covered, hold
// the partition's offset back until they are done.
//
// Get one from Planner.Checkpoint, or from NewCheckpoint in a process that
// only commits what others planned. It is safe for concurrent use and
// owns no goroutines.
type Checkpoint struct {
	client *riffle.Client
	cl     *cluster.Cluster
	group  string
	cfg    config

	mu        sync.Mutex
	tr        tracker
	committed map[riffle.TopicPartition]int64 // what this checkpoint last committed, or the group had
	commitMu  sync.Mutex                      // one commit at a time
}

// NewCheckpoint returns a checkpoint of group for ranges planned
// elsewhere, e.g. by another process running a Planner on the same group
// with the same options. A partition starts where the group's committed
// offset stands, else where the start spec (StartAt, default earliest)
// puts it when Commit first needs it. A moving start spec (AtLatest) does
// not land where the planner's did: commit the group's starting offsets
// first (Planner.Checkpoint().Commit after the first round, or `riffle
// group reset`). Options: StartAt and ReadCommitted.
func NewCheckpoint(client *riffle.Client, group string, opts ...Option) *Checkpoint {
	return newCheckpoint(client, group, newConfig(opts))
}

func newCheckpoint(client *riffle.Client, group string, cfg config) *Checkpoint {
	cl, _ := clientinternal.Access(client)
	return &Checkpoint{client: client, cl: cl, group: group, cfg: cfg, tr: newTracker(), committed: map[riffle.TopicPartition]int64{}}
}

// planned takes a planning round's new partitions, skipped offsets and
// ranges; groupHas are the group's committed offsets the new partitions
// started from. Those are not committed again (Commit commits what
// moved): a stale copy of the group's offset, committed after another
// process committed further, would move the group back.
func (c *Checkpoint) planned(st step, groupHas map[riffle.TopicPartition]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tp := range sortedKeys(st.bases) {
		c.tr.setBase(tp, st.bases[tp])
		if o, ok := groupHas[tp]; ok {
			c.committed[tp] = o
		}
	}
	for _, r := range st.skips {
		c.tr.markDone(r)
	}
	if c.cfg.untracked {
		return
	}
	for _, r := range st.ranges {
		c.tr.plan(r)
	}
}

// Outstanding is how much of what a Planner planned is not done yet.
type Outstanding struct {
	// Ranges is the number of ranges returned by Next that are not
	// entirely done: some offset of theirs was not marked done (by
	// MarkDone of that range or of any other covering the offset).
	Ranges int
	// Offsets is the number of offsets of those ranges not done yet. It
	// bounds their records from above: compaction, transaction markers
	// and aborted records leave offsets without a record to read.
	Offsets int64
}

// Outstanding returns how many ranges the Planner returned from Next are
// not done yet, and how many of their offsets: 0 and 0 once every range
// planned so far is done. Offsets skipped because retention deleted them
// before they were planned are in no range. A Checkpoint from
// NewCheckpoint plans nothing, so its Outstanding is always zero; so is,
// after a restart, what an earlier Planner planned (the new one plans it
// again).
func (c *Checkpoint) Outstanding() Outstanding {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, offsets := c.tr.outstanding()
	return Outstanding{Ranges: n, Offsets: offsets}
}

// MarkDone records r as done. It fails with ErrInvalidRange for a range
// with no topic, a negative offset or Low > High, and records nothing.
func (c *Checkpoint) MarkDone(r Range) error {
	if r.Low < 0 || r.High < r.Low || r.Topic == "" || r.Partition < 0 {
		return fmt.Errorf("%w: %s", ErrInvalidRange, r)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tr.markDone(r)
	return nil
}

// Offsets returns the offset Commit would commit for every partition
// whose start is known: every offset below it is done.
func (c *Checkpoint) Offsets() map[riffle.TopicPartition]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tr.offsets()
}

// Commit commits the checkpoint as the group's committed offsets: for
// each partition whose offset moved since the last commit (or differs
// from the group's), the offset below which every offset is done. It is
// a standalone commit, made outside any group generation, so the group
// must have no active members: a group with members fails with an error
// matching ErrGroupActive (riffle.ErrGroupActive) and nothing is
// committed. Without a group it fails with ErrNoGroup. With nothing new
// to commit it does nothing.
func (c *Checkpoint) Commit(ctx context.Context) error {
	if c.group == "" {
		return ErrNoGroup
	}
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	if err := c.resolve(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	want := c.tr.offsets()
	for tp, o := range want {
		if prev, ok := c.committed[tp]; ok && prev == o {
			delete(want, tp)
		}
	}
	c.mu.Unlock()
	if len(want) == 0 {
		return nil
	}
	if err := c.client.Admin().AlterGroupOffsets(ctx, c.group, want); err != nil {
		return err
	}
	c.mu.Lock()
	maps.Copy(c.committed, want)
	c.mu.Unlock()
	return nil
}

// resolve finds the start of partitions with done ranges and no known
// start (a standalone checkpoint): the group's committed offset, else the
// start spec; offsets below the log start count as done.
func (c *Checkpoint) resolve(ctx context.Context) error {
	c.mu.Lock()
	unknown := c.tr.unknown()
	c.mu.Unlock()
	if len(unknown) == 0 {
		return nil
	}
	committed, err := groupOffsets(ctx, c.client, c.group)
	if err != nil {
		return err
	}
	topics := topicsOf(unknown)
	logStarts, err := listOffsets(ctx, c.cl, topics, riffle.OffsetEarliest, false)
	if err != nil {
		return err
	}
	starts := map[riffle.TopicPartition]int64{}
	var nostart bool
	for _, tp := range unknown {
		if o, ok := committed[tp]; ok {
			starts[tp] = o
		} else {
			nostart = true
		}
	}
	if nostart {
		ends, err := listOffsets(ctx, c.cl, topics, riffle.OffsetLatest, c.cfg.readCommitted)
		if err != nil {
			return err
		}
		spec, err := specStarts(ctx, c.client, c.group, topics, c.cfg.start, ends)
		if err != nil {
			return err
		}
		for _, tp := range unknown {
			if _, ok := starts[tp]; !ok {
				o, ok := spec[tp]
				if !ok {
					return fmt.Errorf("%w: %s is not a partition of the topic", riffle.ErrUnknownTopicOrPartition, tp)
				}
				starts[tp] = o
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tp := range unknown {
		if !c.tr.setBase(tp, starts[tp]) {
			continue
		}
		if o, ok := committed[tp]; ok {
			c.committed[tp] = o
		}
		if ls, ok := logStarts[tp]; ok && ls > starts[tp] {
			c.tr.markDone(Range{Topic: tp.Topic, Partition: tp.Partition, Low: starts[tp], High: ls})
		}
	}
	return nil
}

// groupOffsets returns the group's committed offsets.
func groupOffsets(ctx context.Context, client *riffle.Client, group string) (map[riffle.TopicPartition]int64, error) {
	got, err := client.Admin().FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	out := make(map[riffle.TopicPartition]int64, len(got))
	for tp, om := range got {
		out[tp] = om.Offset
	}
	return out, nil
}

// specStarts resolves the start spec on every partition of topics; ends
// are the planning ends (AtLatest starts there).
func specStarts(ctx context.Context, client *riffle.Client, group string, topics []string, spec riffle.StartOffset, ends map[riffle.TopicPartition]int64) (map[riffle.TopicPartition]int64, error) {
	if spec == riffle.AtLatest() {
		return ends, nil
	}
	return client.Admin().PreviewResetOffsets(ctx, group, spec, topics...)
}

// topicsOf returns the topics of tps, once each, sorted.
func topicsOf(tps []riffle.TopicPartition) []string {
	var out []string
	seen := map[string]bool{}
	for _, tp := range tps {
		if !seen[tp.Topic] {
			seen[tp.Topic] = true
			out = append(out, tp.Topic)
		}
	}
	sort.Strings(out)
	return out
}

func allIn(tps []riffle.TopicPartition, m map[riffle.TopicPartition]int64) bool {
	for _, tp := range tps {
		if _, ok := m[tp]; !ok {
			return false
		}
	}
	return true
}

func sortedKeys(m map[riffle.TopicPartition]int64) []riffle.TopicPartition {
	out := make([]riffle.TopicPartition, 0, len(m))
	for tp := range m {
		out = append(out, tp)
	}
	sortTPs(out)
	return out
}

// listOffsets lists, for every partition of topics, the offset for ts
// (OffsetEarliest or OffsetLatest) at the isolation level: with
// readCommitted, OffsetLatest is the last stable offset. Requests go to
// each partition's leader; leader moves and other retriable errors are
// retried within the client's retry budget. Any other per-partition error
// fails the call.
func listOffsets(ctx context.Context, cl *cluster.Cluster, topics []string, ts int64, readCommitted bool) (map[riffle.TopicPartition]int64, error) {
	var pending []riffle.TopicPartition
	for _, t := range topics {
		tm, err := cl.LookupTopic(ctx, t)
		if err != nil {
			return nil, err
		}
		for _, p := range tm.Partitions {
			pending = append(pending, riffle.TopicPartition{Topic: t, Partition: p.Partition})
		}
	}
	out := make(map[riffle.TopicPartition]int64, len(pending))
	err := cl.Retry(ctx, func(ctx context.Context) error {
		byLeader := map[int32][]riffle.TopicPartition{}
		for _, tp := range pending {
			pm, err := cl.Leader(ctx, tp.Topic, tp.Partition)
			if err != nil {
				return err
			}
			byLeader[pm.Leader] = append(byLeader[pm.Leader], tp)
		}
		var (
			mu      sync.Mutex
			wg      sync.WaitGroup
			retry   []riffle.TopicPartition
			lastErr error
			fatal   error
		)
		for leader, tps := range byLeader {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := cl.Request(ctx, leader, cluster.ClassOther, listOffsetsRequest(tps, ts, readCommitted))
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					lastErr = err
					if errs.IsRetriable(err) {
						retry = append(retry, tps...)
					} else {
						fatal = err
					}
					return
				}
				answered := map[riffle.TopicPartition]bool{}
				for _, rt := range resp.(*kmsg.ListOffsetsResponse).Topics {
					for _, rp := range rt.Partitions {
						tp := riffle.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
						answered[tp] = true
						if rp.ErrorCode != 0 {
							e := kafkaerr.ForCode(rp.ErrorCode)
							if kafkaerr.Typed(rp.ErrorCode).Retriable {
								retry = append(retry, tp)
								lastErr = e
							} else {
								fatal = fmt.Errorf("listing offsets of %s: %w", tp, e)
							}
							continue
						}
						out[tp] = rp.Offset
					}
				}
				for _, tp := range tps {
					if !answered[tp] {
						fatal = fmt.Errorf("%w: list offsets response lacks %s", riffle.ErrMalformedResponse, tp)
					}
				}
			}()
		}
		wg.Wait()
		switch {
		case fatal != nil:
			return fatal // not retriable: a Kafka error that says so, or a malformed answer retried
		case len(retry) > 0:
			pending = retry
			cl.TriggerMetadata()
			return fmt.Errorf("list offsets: %d partitions to retry: %w", len(retry), lastErr)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func listOffsetsRequest(tps []riffle.TopicPartition, ts int64, readCommitted bool) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	if readCommitted {
		req.IsolationLevel = 1
	}
	idx := map[string]int{}
	for _, tp := range tps {
		i, ok := idx[tp.Topic]
		if !ok {
			i = len(req.Topics)
			idx[tp.Topic] = i
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = tp.Topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = tp.Partition
		rp.Timestamp = ts
		rp.CurrentLeaderEpoch = -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	return req
}
