// Package producer holds the pure core of the producer: per-partition
// sequence numbering and in-flight accounting for idempotent produce
// (KIP-98, KIP-360, KIP-679), and the epoch-bump protocol across
// partitions. Nothing here does I/O, starts goroutines or reads the clock;
// the producer's goroutines call in and act on the answers.
//
// The rules it enforces, each a method of Partition:
//   - a batch's base sequence is assigned when it is first put into a
//     request and pinned, with the producer id and epoch, forever: resends
//     reuse identical numbers;
//   - at most Max requests are in flight per partition, and more than one
//     only after a success on the current leader;
//   - nothing is sent to a new leader (or resent after a rewind) while
//     requests from before are still outstanding;
//   - responses are handled in send order; a retriable failure rewinds the
//     partition to its first unacknowledged batch; results of requests sent
//     before a rewind are recognised by their send epoch and dropped;
//   - an outcome that is unknown (timeout, lost connection) keeps its
//     numbers until it is resolved by a resend; nothing renumbers it;
//   - sequence errors either prove no data was lost (KIP-360) or fail the
//     affected batch as data loss; either way the producer bumps its epoch
//     once nothing is in flight and renumbers only batches that were
//     certainly not written.
package producer

// Identity is the producer id and epoch batches are stamped with.
type Identity struct {
	ID    int64
	Epoch int16
}

// Batch is one sealed batch as the state machine sees it. Payload is the
// shell's (encoded bytes, record callbacks).
type Batch struct {
	Records  int32
	Seq      int32    // base sequence; -1 until pinned
	ID       Identity // pinned with Seq
	Unknown  bool     // sent at least once with an unknown outcome
	Attempts int
	onWire   int // requests carrying the batch not yet answered
	Payload  any
}

// MaybeWritten reports whether the batch may be in the log: a request
// carrying it had an unknown outcome or is still unanswered.
func (b *Batch) MaybeWritten() bool { return b.Unknown || b.onWire > 0 }

// Pinned reports whether the batch has its sequence numbers.
func (b *Batch) Pinned() bool { return b.Seq >= 0 }

// Outcome classifies a produce result for one batch.
type Outcome int

// Outcomes.
const (
	// OK: written (also DUPLICATE_SEQUENCE_NUMBER: written earlier).
	OK Outcome = iota
	// Retry: retriable and certainly not written (NOT_LEADER, ...).
	Retry
	// Unknown: retriable and maybe written (request timed out, connection
	// lost, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND).
	Unknown
	// OutOfOrder: OUT_OF_ORDER_SEQUENCE_NUMBER.
	OutOfOrder
	// UnknownProducer: UNKNOWN_PRODUCER_ID.
	UnknownProducer
	// InvalidEpoch: INVALID_PRODUCER_EPOCH (the batch was not written).
	InvalidEpoch
	// Fatal: a non-retriable error for this batch (too large, invalid
	// record, authorization). The batch fails with it.
	Fatal
)

// Result tells the shell what to do after Done.
type Result struct {
	// Stale: the response belonged to requests sent before a rewind; it
	// was dropped (the batch will be, or was, resent).
	Stale bool
	// Completed: the head batch was written; complete its records.
	Completed *Batch
	// Failed: the head batch fails (data loss or fatal); fail its records.
	Failed *Batch
	// DataLoss: Failed fails because data may have been lost.
	DataLoss bool
	// Rewound: the partition must resend from its first unacked batch
	// (after backoff, and after outstanding requests drain).
	Rewound bool
	// NeedBump: the producer must bump its epoch before pinning more.
	NeedBump bool
}

// Partition is the idempotence state of one partition. Not safe for
// concurrent use: the producer guards each with its own lock.
type Partition struct {
	// Max is the cap of requests in flight (1..5 when idempotent).
	Max int
	// Idempotent enables sequence numbering.
	Idempotent bool

	batches   []*Batch // unacked, in order; batches[:inflight] are in flight
	inflight  int      // in flight under the current send epoch
	wire      int      // requests physically outstanding, stale included
	sendEpoch uint64   // bumped by every rewind
	nextSeq   int32
	leader    int32 // leader of outstanding requests; meaningful when wire > 0
	okLeader  bool  // a success was seen on leader since it took over
	lastAcked int64 // offset of the last acknowledged record, -1 if none
	needBump  bool
}

// NewPartition returns an empty partition state.
func NewPartition(maxInflight int, idempotent bool) *Partition {
	if maxInflight < 1 {
		maxInflight = 1
	}
	return &Partition{Max: maxInflight, Idempotent: idempotent, leader: -1, lastAcked: -1}
}

// Add appends a sealed batch to the queue.
func (p *Partition) Add(b *Batch) {
	b.Seq = -1
	p.batches = append(p.batches, b)
}

// Len returns the number of unacknowledged batches (queued or in flight).
func (p *Partition) Len() int { return len(p.batches) }

// Batches returns the unacknowledged batches in order (read only).
func (p *Partition) Batches() []*Batch { return p.batches }

// Inflight returns requests physically outstanding for this partition.
func (p *Partition) Inflight() int { return p.wire }

// NeedsBump reports whether this partition waits for an epoch bump.
func (p *Partition) NeedsBump() bool { return p.needBump }

// HasSendable reports whether a batch is queued behind the in-flight ones.
func (p *Partition) HasSendable() bool { return p.inflight < len(p.batches) }

// Next returns the batch to send to leader now, or nil. When id is nil
// (no producer id yet) or bumping is set, only batches already pinned may
// go: they carry their own numbers. The returned epoch must be passed back
// to Done with the batch's result.
func (p *Partition) Next(leader int32, id *Identity, bumping bool) (*Batch, uint64) {
	if p.inflight >= len(p.batches) || p.inflight >= p.Max {
		return nil, 0
	}
	if p.wire > 0 && (p.leader != leader || p.inflight == 0) {
		// Requests to the old leader, or from before a rewind, are
		// still out: sending now could overtake them.
		return nil, 0
	}
	if p.inflight > 0 && !p.okLeader {
		return nil, 0
	}
	b := p.batches[p.inflight]
	if p.Idempotent {
		if !b.Pinned() {
			if id == nil || bumping || p.needBump {
				return nil, 0
			}
			b.Seq, b.ID = p.nextSeq, *id
			p.nextSeq += b.Records
		} else if bumping && !b.Unknown {
			// Certainly not written; it will be renumbered under the
			// new epoch. Only unknown outcomes must be resolved first.
			return nil, 0
		}
	}
	if p.wire == 0 && p.leader != leader {
		p.leader = leader
		p.okLeader = false
	}
	p.inflight++
	p.wire++
	b.Attempts++
	b.onWire++
	return b, p.sendEpoch
}

// Done records the result for batch b sent under epoch. baseOffset is the
// offset of b's first record on OK; logStart is the partition's log start
// offset the broker reported (-1 if unknown), used by KIP-360.
func (p *Partition) Done(b *Batch, epoch uint64, o Outcome, baseOffset, logStart int64) Result {
	p.wire--
	b.onWire--
	if epoch != p.sendEpoch || p.inflight == 0 || p.batches[0] != b {
		if o == OK || o == Unknown {
			// Dropped, but b may be in the log under its numbers.
			p.maybeWritten(b)
		}
		return Result{Stale: true}
	}
	switch o {
	case OK:
		p.pop()
		p.okLeader = true
		if baseOffset >= 0 {
			p.lastAcked = baseOffset + int64(b.Records) - 1
		}
		return Result{Completed: b}
	case Retry, Unknown:
		if o == Unknown {
			b.Unknown = true
		}
		p.rewind()
		return Result{Rewound: true}
	case InvalidEpoch:
		p.unpinAll()
		p.needBump = true
		p.rewind()
		return Result{Rewound: true, NeedBump: true}
	case OutOfOrder, UnknownProducer:
		// KIP-360: the broker forgot our state because the log start
		// moved past everything we had acknowledged: nothing was lost.
		if p.lastAcked >= 0 && logStart > p.lastAcked {
			p.unpinAll()
			p.needBump = true
			p.rewind()
			return Result{Rewound: true, NeedBump: true}
		}
		p.pop()
		p.unpinAll()
		p.needBump = true
		p.rewind()
		return Result{Failed: b, DataLoss: true, Rewound: true, NeedBump: true}
	default: // Fatal
		p.pop()
		// The failed batch's numbers are a hole in the sequence: later
		// pinned batches follow it (they were not, and cannot be,
		// written), and so would every batch pinned from nextSeq. Even
		// with nothing else pinned, only a new epoch closes the hole.
		if p.Idempotent {
			p.unpinAll()
			p.needBump = true
		}
		p.rewind()
		return Result{Failed: b, Rewound: true, NeedBump: p.needBump}
	}
}

// maybeWritten marks b, if still pinned, as having an unknown outcome, and
// with it every pinned batch before it: the broker accepts a sequence only
// in order, so if b may be written, so may they. None of them may then be
// renumbered (Quiesced, Expire) before a resend resolves it, and, being a
// prefix, they can be resent while bumping.
func (p *Partition) maybeWritten(b *Batch) {
	for i, x := range p.batches {
		if x == b {
			if !b.Pinned() {
				return // unpinned since: rejected, see unpinAll
			}
			for _, y := range p.batches[:i+1] {
				if y.Pinned() {
					y.Unknown = true
				}
			}
			return
		}
	}
}

func (p *Partition) pop() {
	p.batches[0] = nil
	p.batches = p.batches[1:]
	p.inflight--
}

func (p *Partition) rewind() {
	p.inflight = 0
	p.sendEpoch++
	p.okLeader = false
}

// unpinAll drops the numbers of every batch of the partition. Called only
// when the broker rejected the partition's sequence, so none of them can
// have been written under it.
func (p *Partition) unpinAll() {
	for _, b := range p.batches {
		b.Seq = -1
		b.Unknown = false
	}
}

// Quiesced reports whether the partition allows an epoch bump: nothing is
// outstanding and no batch has an unknown outcome (renumbering such a
// batch could duplicate it).
func (p *Partition) Quiesced() bool { return p.wire == 0 && !p.anyUnknown() }

// Reset starts the partition over under a new epoch: sequences restart at
// 0 and every queued batch (certainly unwritten, see Quiesced) loses its
// numbers. It refuses (returns false, changing nothing) unless the
// partition is Quiesced; the producer bumps only when all partitions are.
func (p *Partition) Reset() bool {
	if !p.Quiesced() {
		return false
	}
	p.nextSeq = 0
	for _, b := range p.batches {
		b.Seq = -1
		b.Unknown = false
	}
	p.needBump = false
	p.inflight = 0
	p.sendEpoch++
	p.okLeader = false
	return true
}

// Expire removes and returns batches whose deadline passed, as far as that
// is safe: unpinned batches (never sent) always; pinned batches only when
// nothing is outstanding and no batch has an unknown outcome, and then the
// hole they leave needs an epoch bump (needBump). Batches with unknown
// outcomes always wait for their outcome.
func (p *Partition) Expire(expired func(*Batch) bool) (out []*Batch, needBump bool) {
	canDropPinned := p.wire == 0 && p.inflight == 0 && !p.anyUnknown()
	keep := p.batches[:0]
	for i, b := range p.batches {
		switch {
		case i < p.inflight, b.onWire > 0, !expired(b):
			// In flight, or still carried by a request (possibly one
			// being built right now): its bytes are in use.
			keep = append(keep, b)
		case !b.Pinned():
			out = append(out, b)
		case canDropPinned:
			out = append(out, b)
			needBump = true
		default:
			keep = append(keep, b)
		}
	}
	for i := len(keep); i < len(p.batches); i++ {
		p.batches[i] = nil
	}
	p.batches = keep
	if needBump {
		p.unpinAll()
		p.needBump = true
	}
	return out, needBump
}

func (p *Partition) anyUnknown() bool {
	for _, b := range p.batches {
		if b.Pinned() && b.Unknown {
			return true
		}
	}
	return false
}

// TakeAll removes every batch (for shutdown): the caller fails them.
func (p *Partition) TakeAll() []*Batch {
	out := p.batches
	p.batches = nil
	p.inflight = 0
	p.sendEpoch++
	return out
}
