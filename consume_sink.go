package riffle

import (
	rsink "github.com/riffle-go/riffle/internal/sink"
)

// recordSink takes records off the engine for a processor (riffle/process)
// that finishes them in its own time and tells what commits may cover.
type recordSink = rsink.Sink[*Record]

func sinkParts(tps []TopicPartition) []rsink.Part {
	out := make([]rsink.Part, len(tps))
	for i, tp := range tps {
		out[i] = rsink.Part(tp)
	}
	return out
}

func splitPositions(pos map[rsink.Part]rsink.Pos) (map[TopicPartition]int64, map[TopicPartition]string) {
	offs := make(map[TopicPartition]int64, len(pos))
	metas := make(map[TopicPartition]string, len(pos))
	for p, at := range pos {
		offs[TopicPartition(p)] = at.Offset
		metas[TopicPartition(p)] = at.Meta
	}
	return offs, metas
}

// offer hands chunk to the sink and returns how many records it accepted.
// When it took fewer, the partition is blocked (not scheduled) until the
// sink's wake, unless a wake already came while offering.
func (cs *Consumer) offer(p *cpart, gen uint64, chunk []*Record) int {
	p.mu.Lock()
	if p.gen != gen {
		p.mu.Unlock()
		return 0
	}
	b := rsink.Batch[*Record]{Gen: gen, Start: p.startAt, Meta: p.meta, Recs: chunk, Next: -1}
	if p.buf.len() == 0 && p.fetchErr == nil {
		b.Next = p.fetchOffset
	}
	wakes := p.wakes
	b.Wake = func() {
		p.mu.Lock()
		if p.gen == gen {
			p.wakes++
			p.blocked = false
			p.scheduleLocked()
		}
		p.mu.Unlock()
	}
	p.mu.Unlock()
	n := cs.cfg.sink.Offer(rsink.Part(p.tp), b)
	n = max(0, min(n, len(chunk)))
	var left int64
	if n > 0 && n < len(chunk) {
		left = recordsSize(chunk[n:]) // not accepted: still ours
	}
	p.mu.Lock()
	if n > 0 {
		p.position = chunk[n-1].Offset + 1
		p.inHand, p.inHandBytes = len(chunk)-n, left
	}
	if n == len(chunk) && b.Next >= 0 && p.gen == gen {
		// Everything fetched went over, and the gap after it (markers)
		// is the sink's to cover: Batch.Next.
		p.position = max(p.position, b.Next)
	}
	if n < len(chunk) && p.wakes == wakes && p.gen == gen {
		p.blocked = true
	}
	p.mu.Unlock()
	return n
}
