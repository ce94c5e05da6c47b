package riffle

import (
	"slices"
	"time"

	"github.com/riffle-go/riffle/internal/fetch"
)

// Calls of the data-path hooks (hooks.go), kept off the hot paths' files:
// each call site checks for hooks and calls one of these.

// batchDone reports a batch's outcome to the ProduceBatchHooks.
func (p *Producer) batchDone(b *pbatch, topic string, partition int32, err error) {
	e := ProduceBatchEvent{
		Topic: topic, Partition: partition, Records: len(b.recs),
		UncompressedBytes: b.rawBytes, CompressedBytes: b.wireBytes, Err: err,
		Unbatched: b.created.IsZero(), // open records failed before a batch was sealed
	}
	if !b.created.IsZero() {
		e.Latency = time.Since(b.created)
	}
	p.reportBatch(e)
}

// unbatchedDone reports a record that failed before it was buffered: an
// Unbatched event of one record (partition -1 when none was chosen).
func (p *Producer) unbatchedDone(rec *Record, partition int32, err error) {
	p.reportBatch(ProduceBatchEvent{Topic: rec.Topic, Partition: partition, Records: 1, Err: err, Unbatched: true})
}

func (p *Producer) reportBatch(e ProduceBatchEvent) {
	for _, h := range p.batchHks {
		h.OnProduceBatch(e)
	}
}

// ProducerStats is a snapshot of the producer's buffer (the Java client's
// buffer-total-bytes and buffer-available-bytes are MaxBufferedBytes and
// MaxBufferedBytes - BufferedBytes).
type ProducerStats struct {
	// BufferedBytes and BufferedRecords are the records produced whose
	// outcome is not known yet, as MaxBufferedBytes counts them.
	BufferedBytes, BufferedRecords int64
	// MaxBufferedBytes and MaxBufferedRecords are the limits
	// (MaxBufferedBytes, MaxBufferedRecords options).
	MaxBufferedBytes, MaxBufferedRecords int64
}

// Stats returns a snapshot of the producer's buffer. It is cheap (two
// atomic loads) and may be called at any time, also after Close.
func (p *Producer) Stats() ProducerStats {
	return ProducerStats{
		BufferedBytes: p.buf.bytes.Load(), BufferedRecords: p.buf.recs.Load(),
		MaxBufferedBytes: p.buf.maxB, MaxBufferedRecords: p.buf.maxR,
	}
}

// fetchEventLocked describes an applied fetch result of the partition,
// served by node.
func (p *cpart) fetchEventLocked(node int32, res fetch.Partition, records int, bytes int64) FetchBatchEvent {
	e := p.lagEventLocked(node)
	e.Records, e.Bytes, e.UncompressedBytes, e.Err = records, res.Bytes, bytes, res.Err
	return e
}

// lagEventLocked is an event of no records with the partition's current
// high watermark and lag, node the broker that told.
func (p *cpart) lagEventLocked(node int32) FetchBatchEvent {
	return FetchBatchEvent{
		Group: p.cs.cfg.group.id, Topic: p.tp.Topic, Partition: p.tp.Partition, Node: node,
		HighWatermark: p.hw, Lag: p.lagLocked(),
	}
}

// fetched reports a fetch result to the FetchBatchHooks.
func (cs *Consumer) fetched(e FetchBatchEvent) {
	for _, h := range cs.c.hooks.fetch {
		h.OnFetchBatch(e)
	}
}

// rebalanced reports a rebalance that began at start to the
// RebalanceHooks (m.moved holds what it revoked and added).
func (m *member) rebalanced(start time.Time, err error) {
	hs := m.cs.c.hooks.rebalance
	if len(hs) == 0 {
		return
	}
	proto := "consumer"
	if m.cfg.protocol != GroupProtocolConsumer {
		proto = "eager"
		if m.cooperative() {
			proto = "cooperative"
		}
	}
	m.mu.Lock()
	gen := m.generation
	m.mu.Unlock()
	e := RebalanceEvent{
		Group: m.cfg.id, Protocol: proto, Generation: gen,
		Revoked: m.moved[0], Assigned: m.moved[1], Duration: time.Since(start), Err: err,
	}
	if err != nil {
		e.Revoked, e.Assigned = 0, 0
	}
	for _, h := range hs {
		h.OnRebalance(e)
	}
}

// reportCommit reports an offset commit of batch (the entries the
// request carried) to the CommitHooks.
func (c *committer) reportCommit(batch map[TopicPartition]commitEntry, start time.Time, err error) {
	offs := make(map[TopicPartition]OffsetAndMetadata, len(batch))
	for tp, e := range batch {
		meta := c.m.cfg.commitMetadata
		if e.hasMeta {
			meta = e.meta
		}
		offs[tp] = OffsetAndMetadata{Offset: e.offset, LeaderEpoch: e.epoch, Metadata: meta}
	}
	e := CommitEvent{Group: c.m.cfg.id, Partitions: len(offs), Offsets: offs, Latency: time.Since(start), Err: err}
	for _, h := range c.m.cs.c.hooks.commit {
		h.OnCommit(e)
	}
}

// reportTxnCommit reports the offsets of a committed transaction, one
// event per group (in group order), to the producer's CommitHooks.
func (p *Producer) reportTxnCommit(offs map[string]map[TopicPartition]OffsetAndMetadata, start time.Time) {
	lat := time.Since(start)
	groups := make([]string, 0, len(offs))
	for g := range offs {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	for _, g := range groups {
		e := CommitEvent{Group: g, Partitions: len(offs[g]), Offsets: offs[g], Transactional: true, Latency: lat}
		for _, h := range p.commitHks {
			h.OnCommit(e)
		}
	}
}
