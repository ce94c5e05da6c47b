package riffle

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Log truncation detection (KIP-320). After an unclean leader election the
// new leader's log may lack the end of the old one's: records the consumer
// fetched may be gone, replaced by others at the same offsets. So when a
// partition's leader epoch rises past the one its fetch position was last
// checked under (or the position came from a commit carrying an epoch),
// the consumer stops fetching it and asks the leader, with
// OffsetForLeaderEpoch, where the epoch of the last fetched record ends in
// its log. An end before the fetch position means truncation: the
// partition gets an ErrLogTruncated (through OnPartitionError and the
// log), and then, as in the Java client, with a reset policy it resumes at
// the first offset where the logs diverge; with ResetNone it stops.
// Partitions whose epoch did not change are never checked: the hot path
// pays nothing.

// ErrLogTruncated: the partition's log was truncated below the consumer's
// position (an unclean leader election); see LogTruncationError.
var ErrLogTruncated = errors.New("riffle: log truncated below the consumer's position")

// LogTruncationError describes a detected truncation. It matches
// ErrLogTruncated.
type LogTruncationError struct {
	Topic     string
	Partition int32
	// FetchOffset is where the consumer was about to fetch.
	FetchOffset int64
	// DivergingOffset is the first offset where the consumer's records
	// and the leader's log differ.
	DivergingOffset int64
}

// Error describes the truncation.
func (e *LogTruncationError) Error() string {
	return fmt.Sprintf("%s[%d]: log truncated below fetch offset %d: the logs diverge at %d", e.Topic, e.Partition, e.FetchOffset, e.DivergingOffset)
}

// Unwrap returns ErrLogTruncated.
func (e *LogTruncationError) Unwrap() error { return ErrLogTruncated }

// needsCheckLocked reports whether the partition's fetch position must be
// checked against the log of a leader of epoch leaderEpoch first.
func (p *cpart) needsCheckLocked(leaderEpoch int32) bool {
	return leaderEpoch >= 0 && p.fetchedEpoch >= 0 && leaderEpoch > p.checkedEpoch
}

// checkItem is one partition in an OffsetForLeaderEpoch request.
type checkItem struct {
	p           *cpart
	epoch       uint64 // the partition's epoch when the check started
	offset      int64  // the fetch position being checked
	lastEpoch   int32  // the leader epoch of the last fetched record
	leaderEpoch int32  // the current leader's epoch
}

// startChecks stops fetching the partitions and checks their positions,
// one request per leader, each on its own goroutine.
func (cs *Consumer) startChecks(byLeader map[int32][]*cpart) {
	for leader, ps := range byLeader {
		var items []checkItem
		for _, p := range ps {
			p.mu.Lock()
			if p.state == stateFetching && p.checking == 0 && p.needsCheckLocked(p.leaderEpoch) {
				// A new epoch fences fetches already out: what they
				// bring may be from the log being checked.
				p.epoch++
				p.checking = p.epoch + 1
				items = append(items, checkItem{p: p, epoch: p.epoch, offset: p.fetchOffset, lastEpoch: p.fetchedEpoch, leaderEpoch: p.leaderEpoch})
			}
			p.mu.Unlock()
		}
		if len(items) > 0 {
			cs.life.Go(func() { cs.checkPositions(leader, items) })
		}
	}
}

// checkPositions sends one OffsetForLeaderEpoch to leader and applies the
// answers.
func (cs *Consumer) checkPositions(leader int32, items []checkItem) {
	ctx, cancel := context.WithTimeout(cs.ctx, cs.c.cfg.retryTimeout)
	defer cancel()
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	idx := map[string]int{}
	for _, it := range items {
		rt := topicEntry(&req.Topics, idx, it.p.tp.Topic, func(name string) kmsg.OffsetForLeaderEpochRequestTopic {
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = name
			return rt
		})
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition = it.p.tp.Partition
		rp.CurrentLeaderEpoch = it.leaderEpoch
		rp.LeaderEpoch = it.lastEpoch
		rt.Partitions = append(rt.Partitions, rp)
	}
	type answer struct {
		endOffset int64
		endEpoch  int32
		err       error
	}
	answers := map[*cpart]answer{}
	resp, err := cs.cl.Request(ctx, leader, cluster.ClassOther, req)
	if err == nil {
		byTP := map[TopicPartition]*cpart{}
		for _, it := range items {
			byTP[it.p.tp] = it.p
		}
		for _, rt := range resp.(*kmsg.OffsetForLeaderEpochResponse).Topics {
			for _, rp := range rt.Partitions {
				p := byTP[TopicPartition{rt.Topic, rp.Partition}]
				if p == nil {
					continue
				}
				a := answer{endOffset: rp.EndOffset, endEpoch: rp.LeaderEpoch}
				if rp.ErrorCode != 0 {
					a.err = kafkaerr.ForCode(rp.ErrorCode)
				}
				answers[p] = a
			}
		}
	}
	retry := false
	for _, it := range items {
		p := it.p
		a, ok := answers[p]
		if !ok {
			a.err = err
			if a.err == nil {
				a.err = fmt.Errorf("%w: OffsetForLeaderEpoch response lacks %s", ErrMalformedResponse, p.tp)
			}
		}
		var report *PartitionError
		p.mu.Lock()
		if p.checking == it.epoch+1 {
			p.checking = 0
		}
		if p.state != stateFetching || p.epoch != it.epoch {
			p.mu.Unlock() // reset, moved again or revoked meanwhile
			continue
		}
		switch {
		case a.err != nil && (isRetriable(a.err) || !ok):
			// Ask again after a backoff, from fresh metadata (a
			// fenced or unknown epoch means ours is stale).
			p.resolveFails++
			p.resolveAfter = time.Now().Add(cs.c.cfg.retryBackoff.Delay(p.resolveFails, rand.Float64()))
			retry = true
		case a.err != nil:
			// The broker cannot tell (an old broker, authorization):
			// fetch on unchecked, as a client without KIP-320 would.
			cs.c.log.Warn("cannot check the fetch position after a leader change", "topic", p.tp.Topic, "partition", p.tp.Partition, "err", a.err)
			p.checkedEpoch = it.leaderEpoch
		case a.endOffset < 0 || a.endEpoch < 0 || a.endOffset >= it.offset:
			// The log still holds what we fetched, or the leader
			// knows no end for that epoch. The latter is not taken
			// for truncation (the Java client resets on it): a
			// leader whose log has no batch of a later epoch answers
			// so (kfake does, for every leader move without new
			// records; a real broker whose epoch cache lost the entry
			// to retention too), and fetching at our offset then
			// either works or fails with OFFSET_OUT_OF_RANGE, where
			// the reset policy applies.
			p.resolveFails = 0
			p.checkedEpoch = it.leaderEpoch
		default:
			te := &LogTruncationError{Topic: p.tp.Topic, Partition: p.tp.Partition, FetchOffset: it.offset, DivergingOffset: a.endOffset}
			report = &PartitionError{Topic: p.tp.Topic, Partition: p.tp.Partition, Offset: it.offset, Err: te}
			p.truncatedLocked(te)
		}
		p.mu.Unlock()
		if report != nil {
			p.syncHooks() // stopped, with ResetNone
			cs.reportTruncation(report)
		}
	}
	if retry {
		cs.cl.TriggerMetadata()
	}
	cs.poke()
}

// truncatedLocked applies a detected truncation: with ResetNone the
// partition stops; otherwise it resumes at the diverging offset, or where
// the handler is if that is lower (the fetch position runs ahead of it:
// records fetched below the divergence but not yet handled are intact and
// are fetched again, not skipped). Buffered records go; the running
// handler call finishes but the rest of its chunk is dropped (fetched
// again too); the processed offset never moves up.
func (p *cpart) truncatedLocked(te *LogTruncationError) {
	if p.cs.cfg.reset == ResetNone {
		p.state = stateFailed
		p.err = &PartitionError{Topic: p.tp.Topic, Partition: p.tp.Partition, Offset: te.FetchOffset, Err: te}
		return
	}
	off := te.DivergingOffset
	if p.position >= 0 && p.position < off {
		off = p.position
	}
	processed, processedEpoch := p.processed, p.processedEpoch
	p.epoch++
	p.gen++
	p.dropBufferLocked()
	p.startLocked(off, -1)
	if processed >= 0 && processed < off {
		p.processed, p.processedEpoch = processed, processedEpoch
	}
	p.checkedEpoch = p.leaderEpoch
}

// reportTruncation tells the user about a truncation: always in the log
// and to OnPartitionError; whether the partition stopped is in the
// partition's state (ResetNone) and its error.
func (cs *Consumer) reportTruncation(pe *PartitionError) {
	cs.c.log.Warn("log truncation detected", "topic", pe.Topic, "partition", pe.Partition, "fetch_offset", pe.Offset, "err", pe.Err)
	if cs.cfg.onError != nil {
		cs.cfg.onError(pe)
	}
}
