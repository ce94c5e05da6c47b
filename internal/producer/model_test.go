package producer

// A model-based test of Partition against a simulated broker and network.
//
// The broker validates idempotent sequences per producer id and epoch like
// Kafka: it accepts seq == last+1 (0 for a new epoch or, by default, for a
// producer it has no state for: UNKNOWN_PRODUCER_ID otherwise, as before
// 2.5; some seeds run a 2.5+ broker that accepts any first sequence), it
// answers a resend of one of the last 5 batches as a success with the
// original offset, OUT_OF_ORDER_SEQUENCE_NUMBER on a gap, and
// INVALID_PRODUCER_EPOCH for an older epoch. Retention deletes the whole
// log and forgets every producer. The network keeps one FIFO connection
// per broker; it can lose a response after the write (Unknown), fail a
// request before it applies (Retry), and die: the shell then learns, maybe
// late, that every outstanding request has an unknown outcome, while the
// broker still applies, in order, those it had read ("ghosts"). Leaders
// move. The driver plays the shell: it adds batches, sends what Next
// returns to the leader it believes in, reports outcomes to Done in send
// order per broker, bumps (new epoch, Reset) when asked or when "another
// partition" asks, once Quiesced, and expires batches at random.
//
// After a fault-free drain, it checks: every batch is reported exactly
// once; a completion points at the batch's records in the log; no record
// is in the live log twice, and the log holds records in add order; a
// failed or expired batch is not in the log; data loss is reported only
// for an injected OUT_OF_ORDER; Next never renumbers a batch without an
// unpin or Reset in between, nor one that was written.
//
// The one allowance is retention: a batch written, then deleted with the
// producer state before its ack arrived, is unknowable to the client;
// after the KIP-360 reset that follows, it may be written again or fail
// (Kafka's own client does the same). The model checks that such copies
// predate a KIP-360 reset. Faults that no client could survive are not
// injected: INVALID_PRODUCER_EPOCH or OUT_OF_ORDER while a written batch is
// unacknowledged (only another instance of our producer id could fence
// us), ghosts outliving a retention, retention with a 2.5+ broker.

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// mBatch is the model's view of one batch (the Batch's Payload).
type mBatch struct {
	idx       int
	first     int64 // first record id; the batch holds first..first+n-1
	n         int32
	poison    bool // the broker always rejects it with a fatal error
	sent      bool
	last      nums // numbers of the last send
	genAtSend int  // driver's unpin generation at the last send
	result    string
	// excused counts the copies of the batch in the log (they are
	// appended together, so those of its first record) the partition
	// could no longer know about: those written before a KIP-360 reset
	// (they are deleted by the retention that caused it).
	excused int
}

type nums struct {
	id  Identity
	seq int32
}

// mReq is one produce request for one batch on one connection.
type mReq struct {
	b          *Batch
	mb         *mBatch
	ep         uint64
	nums       nums
	broker     int
	processed  bool
	out        Outcome
	base       int64
	logStart   int64
	injectedDL bool // an injected OUT_OF_ORDER on a fresh write
}

type mConn struct {
	broker int
	q      []*mReq // FIFO; a processed prefix, then unprocessed requests
	dead   bool    // every request is answered Unknown, in order
}

type pidState struct {
	epoch   int16
	lastSeq int32
	win     []winEntry // the last 5 batches written
}

type winEntry struct {
	first, last int32
	base        int64
}

// faultMix is drawn per seed so that some runs are dominated by one fault.
type faultMix struct {
	// Per mille per processed request.
	retry, lose, ooo, fenced int
	// Per mille per added batch.
	poison int
	// Per mille that a not yet processed request of a killed connection
	// had already been read by the broker (it becomes a ghost).
	ghostKeep int
	// Event weights.
	kill, move, refresh, retention, foreignBump, expire, ghost int
}

type modelStats struct {
	sends, resends, stale, rewinds, retries, unknowns, lost, kills, ghosts,
	ghostWrites, moves, retentions, kip360, dataLoss, fatal, fenced, bumps,
	foreignBumps, expired, expiredPinned, dups, renumbered,
	rewrittenDeleted, failedDeleted, completed, pipelined int
}

func (s *modelStats) add(o modelStats) {
	s.sends += o.sends
	s.resends += o.resends
	s.stale += o.stale
	s.rewinds += o.rewinds
	s.retries += o.retries
	s.unknowns += o.unknowns
	s.lost += o.lost
	s.kills += o.kills
	s.ghosts += o.ghosts
	s.ghostWrites += o.ghostWrites
	s.moves += o.moves
	s.retentions += o.retentions
	s.kip360 += o.kip360
	s.dataLoss += o.dataLoss
	s.fatal += o.fatal
	s.fenced += o.fenced
	s.bumps += o.bumps
	s.foreignBumps += o.foreignBumps
	s.expired += o.expired
	s.expiredPinned += o.expiredPinned
	s.dups += o.dups
	s.renumbered += o.renumbered
	s.rewrittenDeleted += o.rewrittenDeleted
	s.failedDeleted += o.failedDeleted
	s.completed += o.completed
	s.pipelined += o.pipelined
}

// src yields choices: from the fuzzer's bytes first, then from a PRNG.
type src struct {
	data []byte
	pos  int
	r    *rand.Rand
}

func (s *src) intn(n int) int {
	if n <= 1 {
		return 0
	}
	if s.pos < len(s.data) {
		v := int(s.data[s.pos])
		s.pos++
		if n > 256 && s.pos < len(s.data) {
			v = v<<8 | int(s.data[s.pos])
			s.pos++
		}
		return v % n
	}
	return s.r.IntN(n)
}

var outcomeNames = [...]string{"OK", "Retry", "Unknown", "OutOfOrder", "UnknownProducer", "InvalidEpoch", "Fatal"}

func on(o Outcome) string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

func (s *src) chance(perMille int) bool { return perMille > 0 && s.intn(1000) < perMille }

const nBrokers = 3

type world struct {
	r       *src
	mix     faultMix
	faults  bool
	tracing bool
	trace   []string
	err     error

	// Broker side: one partition, replicated perfectly (acks=all), so the
	// log and producer state survive leader moves.
	leader   int
	log      []int64 // record ids by offset, full history
	logStart int64
	pids     map[int64]*pidState
	copies   map[int64][]int64 // record id -> offsets it was appended at
	maxFirst int64             // highest record id appended for the first time

	// modern: a broker of 2.5 or later, which accepts any first sequence
	// from a producer it has no state for (so run without retention:
	// after a retention such a broker reorders pipelined batches whatever
	// the client does).
	modern bool

	// Network: the produce connections per broker, oldest first; only the
	// last may be alive. Like the shell, the driver handles the responses
	// of one broker in send order, across connections: a dead
	// connection's requests are reported (Unknown) before those sent
	// since on its successor, but the successor may be used before they
	// are. ghosts are requests the broker had read from connections that
	// died since: it still applies them, in order, and answers nobody.
	conns  [nBrokers][]*mConn
	ghosts [][]*mReq

	// Shell.
	p        *Partition
	id       *Identity
	nextPID  int64
	bumping  bool
	mLeader  int // the shell's (possibly stale) view of the leader
	unpinGen int // bumped by every NeedBump and Reset
	batches  []*mBatch
	nextRec  int64
	toAdd    int

	st modelStats
}

func newWorld(seed uint64, data []byte) *world {
	cfg := rand.New(rand.NewPCG(seed, 0x5eed))
	some := func(max int) int { // often zero, so that single faults dominate some runs
		if cfg.IntN(3) == 0 {
			return 0
		}
		return cfg.IntN(max)
	}
	w := &world{
		r: &src{data: data, r: rand.New(rand.NewPCG(seed, 0xe7e7))},
		mix: faultMix{
			retry:       some(250),
			lose:        some(250),
			ooo:         some(20),
			fenced:      some(20),
			poison:      some(50),
			ghostKeep:   cfg.IntN(1000),
			kill:        some(6),
			move:        some(5),
			refresh:     1 + cfg.IntN(8),
			retention:   some(4),
			foreignBump: some(4),
			expire:      some(4),
			ghost:       1 + cfg.IntN(8),
		},
		faults:   true,
		pids:     map[int64]*pidState{},
		copies:   map[int64][]int64{},
		maxFirst: -1,
		nextPID:  1000,
		toAdd:    10 + cfg.IntN(40),
	}
	max := 5
	if cfg.IntN(4) == 0 {
		max = 1 + cfg.IntN(5)
	}
	if cfg.IntN(3) == 0 {
		w.modern = true
		w.mix.retention = 0
	}
	w.p = NewPartition(max, true)
	w.leader = cfg.IntN(nBrokers)
	w.mLeader = w.leader
	return w
}

func (w *world) logf(format string, args ...any) {
	if w.tracing {
		w.trace = append(w.trace, fmt.Sprintf(format, args...))
	}
}

func (w *world) fail(format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf(format, args...)
		if w.tracing {
			w.logf("FAIL: %v", w.err)
		}
	}
}

func (b *mBatch) String() string {
	return fmt.Sprintf("b%d[r%d..%d]", b.idx, b.first, b.first+int64(b.n)-1)
}

func (w *world) conn(broker int) *mConn {
	cs := w.conns[broker]
	if n := len(cs); n > 0 && !cs[n-1].dead {
		return cs[n-1]
	}
	c := &mConn{broker: broker}
	w.conns[broker] = append(cs, c)
	return c
}

func (w *world) outstanding() int {
	n := 0
	for _, cs := range w.conns {
		for _, c := range cs {
			n += len(c.q)
		}
	}
	return n
}

// ---- broker ----

func (w *world) process(q *mReq, faults bool) {
	q.processed = true
	q.logStart = w.logStart
	q.base = -1
	q.out = w.apply(q, faults)
	if w.tracing {
		w.logf("  broker %d: %v %v seq %d -> %s base %d logStart %d", q.broker, q.mb, q.nums.id, q.nums.seq, on(q.out), q.base, q.logStart)
	}
	if faults && w.r.chance(w.mix.lose) {
		// REQUEST_TIMED_OUT / NOT_ENOUGH_REPLICAS_AFTER_APPEND / a lost
		// response: whatever happened, the shell learns nothing.
		q.out = Unknown
		w.st.lost++
		if w.tracing {
			w.logf("  response lost")
		}
	}
}

func (w *world) apply(q *mReq, faults bool) Outcome {
	if q.broker != w.leader {
		return Retry // NOT_LEADER_OR_FOLLOWER
	}
	if faults && w.r.chance(w.mix.retry) {
		return Retry // NOT_ENOUGH_REPLICAS, before the append
	}
	if q.mb.poison {
		return Fatal // MESSAGE_TOO_LARGE, for every attempt
	}
	id, seq, n := q.nums.id, q.nums.seq, q.mb.n
	s := w.pids[id.ID]
	switch {
	case s == nil:
		if seq != 0 && !w.modern {
			return UnknownProducer
		}
	case id.Epoch < s.epoch:
		return InvalidEpoch
	case id.Epoch > s.epoch:
		if seq != 0 {
			return OutOfOrder
		}
	default:
		for _, e := range s.win {
			if e.first == seq && e.last == seq+n-1 {
				q.base = e.base
				w.st.dups++
				return OK // DUPLICATE_SEQUENCE_NUMBER: the original offset
			}
		}
		if seq != s.lastSeq+1 {
			return OutOfOrder
		}
	}
	// A fresh write. Faults injected here answer for a batch that is
	// certainly not in the log (and no ghost can still write it).
	if faults && len(w.ghosts) == 0 && w.r.chance(w.mix.ooo) {
		q.injectedDL = true
		return OutOfOrder // e.g. state lost in an unclean election
	}
	if faults && w.r.chance(w.mix.fenced) && len(w.ghosts) == 0 && !w.unackedInLog() {
		// The broker saw a newer epoch of this producer id (with no
		// data): from now on the old epoch is fenced, ghosts included.
		w.st.fenced++
		w.pids[id.ID] = &pidState{epoch: id.Epoch + 1, lastSeq: -1}
		return InvalidEpoch
	}
	if s == nil || id.Epoch != s.epoch {
		s = &pidState{epoch: id.Epoch}
		w.pids[id.ID] = s
	}
	q.base = w.append(q.mb)
	s.lastSeq = seq + n - 1
	s.win = append(s.win, winEntry{seq, seq + n - 1, q.base})
	if len(s.win) > 5 {
		s.win = s.win[1:]
	}
	return OK
}

// unackedInLog reports whether a batch not yet reported is in the log: a
// fence then would make its outcome unresolvable (see the report: only
// another instance of our producer id could fence us, which an
// idempotent-only producer never has).
func (w *world) unackedInLog() bool {
	for _, mb := range w.batches {
		if mb.result == "" && len(w.copies[mb.first]) > 0 {
			return true
		}
	}
	return false
}

func (w *world) append(mb *mBatch) int64 {
	base := int64(len(w.log))
	for i := int64(0); i < int64(mb.n); i++ {
		rec := mb.first + i
		for _, o := range w.copies[rec] {
			if o >= w.logStart {
				w.fail("record %d of %v written twice (offsets %d and %d)", rec, mb, o, base+i)
			}
		}
		if len(w.copies[rec]) > 0 {
			w.st.rewrittenDeleted++
		} else if rec <= w.maxFirst {
			w.fail("record %d of %v first written after record %d: not in add order", rec, mb, w.maxFirst)
		}
		if end := int64(len(w.log)); end > w.logStart && w.log[end-1] >= rec {
			w.fail("log order: record %d of %v follows record %d", rec, mb, w.log[end-1])
		}
		w.copies[rec] = append(w.copies[rec], base+i)
		w.log = append(w.log, rec)
		if rec > w.maxFirst {
			w.maxFirst = rec
		}
	}
	return base
}

// ---- shell ----

func (w *world) add() {
	if w.toAdd == 0 {
		return
	}
	w.toAdd--
	mb := &mBatch{idx: len(w.batches), first: w.nextRec, n: int32(1 + w.r.intn(4))}
	mb.poison = w.faults && w.r.chance(w.mix.poison)
	w.nextRec += int64(mb.n)
	w.batches = append(w.batches, mb)
	w.p.Add(&Batch{Records: mb.n, Payload: mb})
	if w.tracing {
		w.logf("add %v poison=%v", mb, mb.poison)
	}
}

func (w *world) send() {
	for k := 1 + w.r.intn(5); k > 0; k-- {
		b, ep := w.p.Next(int32(w.mLeader), w.id, w.bumping)
		if b == nil {
			return
		}
		w.onNext(b, ep)
	}
}

func (w *world) onNext(b *Batch, ep uint64) {
	mb := b.Payload.(*mBatch)
	n := nums{b.ID, b.Seq}
	if w.tracing {
		w.logf("send %v to %d: %v seq %d unknown=%v (sendEpoch %d)", mb, w.mLeader, b.ID, b.Seq, b.Unknown, ep)
	}
	w.st.sends++
	if mb.result != "" {
		w.fail("Next returned %v, already reported %s", mb, mb.result)
	}
	if !b.Pinned() {
		w.fail("Next returned unpinned %v in idempotent mode", mb)
	}
	if w.bumping && !b.Unknown {
		w.fail("Next returned %v while bumping, but its outcome is not unknown", mb)
	}
	renumbered := mb.sent && n != mb.last
	if mb.sent && !renumbered {
		w.st.resends++
	}
	if renumbered {
		w.st.renumbered++
		if mb.genAtSend == w.unpinGen {
			w.fail("%v renumbered from %v/%d to %v/%d without an unpin or reset", mb, mb.last.id, mb.last.seq, n.id, n.seq)
		}
		for k, o := range w.copies[mb.first] {
			switch {
			case o >= w.logStart:
				w.fail("%v renumbered from %v/%d to %v/%d but it is in the log at %d", mb, mb.last.id, mb.last.seq, n.id, n.seq, o)
			case k >= mb.excused:
				w.fail("%v renumbered from %v/%d to %v/%d but it was written at %d (since deleted) with no KIP-360 reset after", mb, mb.last.id, mb.last.seq, n.id, n.seq, o)
			}
		}
	}
	if !mb.sent || renumbered {
		if w.id == nil || n.id != *w.id {
			w.fail("%v pinned with %v, current identity %v", mb, n.id, w.id)
		}
	}
	if w.p.inflight > 1 {
		w.st.pipelined++
	}
	mb.sent, mb.last, mb.genAtSend = true, n, w.unpinGen
	c := w.conn(w.mLeader)
	c.q = append(c.q, &mReq{b: b, mb: mb, ep: ep, nums: n, broker: w.mLeader})
	if w.p.Inflight() > w.p.Max {
		w.fail("%d requests in flight, max %d", w.p.Inflight(), w.p.Max)
	}
}

func (w *world) done(q *mReq, o Outcome, base, logStart int64) {
	res := w.p.Done(q.b, q.ep, o, base, logStart)
	if w.tracing {
		w.logf("done %v %s base %d logStart %d -> %+v", q.mb, on(o), base, logStart, res)
	}
	switch o {
	case Retry:
		w.st.retries++
	case Unknown:
		w.st.unknowns++
	}
	mb := q.mb
	switch {
	case res.Stale:
		w.st.stale++
		if res != (Result{Stale: true}) {
			w.fail("stale result with more: %+v", res)
		}
		return
	case res.Completed != nil:
		if res.Completed != q.b || o != OK {
			w.fail("Done(%v, %s) completed another batch", mb, on(o))
		}
		if base < 0 || base+int64(mb.n) > int64(len(w.log)) {
			w.fail("%v completed at offset %d, log has %d records", mb, base, len(w.log))
		} else {
			for i := int64(0); i < int64(mb.n); i++ {
				if w.log[base+i] != mb.first+i {
					w.fail("%v acknowledged at %d but the log holds record %d there", mb, base, w.log[base+i])
				}
			}
		}
		w.report(mb, "completed")
		w.st.completed++
	case res.Failed != nil:
		if res.Failed != q.b {
			w.fail("Done(%v, %s) failed another batch", mb, on(o))
		}
		switch {
		case res.DataLoss:
			w.st.dataLoss++
			if !q.injectedDL || (o != OutOfOrder && o != UnknownProducer) {
				w.fail("%v failed as data loss on %s without an injected fault", mb, on(o))
			}
			w.report(mb, "data loss")
		case o == Fatal:
			w.st.fatal++
			w.report(mb, "failed")
		default:
			w.fail("%v failed on %s", mb, on(o))
		}
	case res.NeedBump && (o == OutOfOrder || o == UnknownProducer):
		w.st.kip360++
	}
	if res.Rewound {
		w.st.rewinds++
	}
	if res.NeedBump {
		w.unpinGen++
		w.bumping = true
		if res.Failed == nil && (o == OutOfOrder || o == UnknownProducer) {
			for _, b := range w.batches {
				if b.result == "" {
					b.excused = len(w.copies[b.first])
				}
			}
		}
	}
	if o == Retry && q.broker != w.leader && w.r.intn(2) == 0 {
		w.mLeader = w.leader // NOT_LEADER triggers a metadata refresh
	}
}

func (w *world) report(mb *mBatch, how string) {
	if mb.result != "" {
		w.fail("%v reported %s after %s", mb, how, mb.result)
	}
	mb.result = how
}

// ---- events ----

func (w *world) processSome() {
	var cs []*mConn
	for _, bc := range w.conns {
		for _, c := range bc {
			if !c.dead && len(c.q) > 0 && !c.q[len(c.q)-1].processed {
				cs = append(cs, c)
			}
		}
	}
	if len(cs) == 0 {
		return
	}
	c := cs[w.r.intn(len(cs))]
	for _, q := range c.q {
		if !q.processed {
			w.process(q, w.faults)
			return
		}
	}
}

// deliver hands the oldest response of one broker to the partition.
func (w *world) deliver() {
	var brokers []int
	for b, bc := range w.conns {
		if len(bc) > 0 && len(bc[0].q) > 0 && bc[0].q[0].processed {
			brokers = append(brokers, b)
		}
	}
	if len(brokers) == 0 {
		return
	}
	w.deliverFrom(brokers[w.r.intn(len(brokers))])
}

// kill breaks a connection. The broker had read a prefix of the requests
// it had not handled yet (they become ghosts); the shell will learn that
// every outstanding request has an unknown outcome, but maybe only after
// it sent more on a new connection.
func (w *world) kill() {
	var cs []*mConn
	for _, bc := range w.conns {
		if n := len(bc); n > 0 && !bc[n-1].dead {
			cs = append(cs, bc[n-1])
		}
	}
	if len(cs) == 0 {
		return
	}
	c := cs[w.r.intn(len(cs))]
	c.dead = true
	w.st.kills++
	if w.tracing {
		w.logf("kill connection to %d (%d outstanding)", c.broker, len(c.q))
	}
	var ghosts []*mReq
	reading := true
	for _, q := range c.q {
		if !q.processed {
			if reading = reading && w.r.chance(w.mix.ghostKeep); reading {
				g := *q
				ghosts = append(ghosts, &g)
			}
		}
		q.processed, q.out, q.base, q.logStart = true, Unknown, -1, -1
	}
	if len(c.q) == 0 {
		bc := w.conns[c.broker]
		w.conns[c.broker] = bc[:len(bc)-1]
	}
	if len(ghosts) > 0 {
		w.st.ghosts += len(ghosts)
		w.ghosts = append(w.ghosts, ghosts)
	}
	if w.r.intn(2) == 0 { // the shell notices at once
		for len(w.conns[c.broker]) > 0 && w.conns[c.broker][0].dead {
			w.deliverFrom(c.broker)
		}
	}
}

func (w *world) deliverFrom(b int) {
	c := w.conns[b][0]
	q := c.q[0]
	c.q = c.q[1:]
	if len(c.q) == 0 && c.dead {
		w.conns[b] = w.conns[b][1:]
	}
	w.done(q, q.out, q.base, q.logStart)
}

func (w *world) processGhost() {
	if len(w.ghosts) == 0 {
		return
	}
	i := w.r.intn(len(w.ghosts))
	q := w.ghosts[i][0]
	if w.tracing {
		w.logf("ghost:")
	}
	before := len(w.log)
	w.process(q, false)
	if len(w.log) > before {
		w.st.ghostWrites++
	}
	if w.ghosts[i] = w.ghosts[i][1:]; len(w.ghosts[i]) == 0 {
		w.ghosts = append(w.ghosts[:i], w.ghosts[i+1:]...)
	}
}

func (w *world) move() {
	w.leader = (w.leader + 1 + w.r.intn(nBrokers-1)) % nBrokers
	w.st.moves++
	if w.tracing {
		w.logf("leader moves to %d", w.leader)
	}
}

func (w *world) refresh() {
	w.mLeader = w.leader
}

func (w *world) retention() {
	// Retention takes hours; a request the broker had read was handled
	// long before. (A ghost outliving it could be written as sequence 0
	// of a forgotten producer after its batch was acknowledged: no
	// client can prevent that, and no broker behaves that way.)
	for len(w.ghosts) > 0 {
		w.processGhost()
	}
	w.logStart = int64(len(w.log))
	clear(w.pids)
	w.st.retentions++
	if w.tracing {
		w.logf("retention: log start %d, producer state forgotten", w.logStart)
	}
}

func (w *world) foreignBump() {
	if w.id != nil && !w.bumping {
		w.bumping = true
		w.st.foreignBumps++
		if w.tracing {
			w.logf("another partition needs a bump")
		}
	}
}

func (w *world) expire() {
	q := 1 + w.r.intn(4)
	out, needBump := w.p.Expire(func(*Batch) bool { return w.r.intn(5) < q })
	for _, b := range out {
		mb := b.Payload.(*mBatch)
		if w.tracing {
			w.logf("expired %v pinned=%v", mb, b.Pinned())
		}
		if b.Pinned() {
			w.st.expiredPinned++
		}
		for _, bc := range w.conns {
			for _, c := range bc {
				for _, q := range c.q {
					if q.b == b && b.Pinned() {
						w.fail("pinned %v expired with a request outstanding", mb)
					}
				}
			}
		}
		w.report(mb, "expired")
		w.st.expired++
	}
	if needBump {
		w.unpinGen++
		w.bumping = true
	}
}

func (w *world) tryBump() {
	if w.id == nil {
		w.id = &Identity{ID: w.nextPID}
		w.nextPID++
		if w.tracing {
			w.logf("producer id %v", *w.id)
		}
		return
	}
	if !w.bumping || !w.p.Quiesced() {
		return
	}
	id := Identity{ID: w.id.ID, Epoch: w.id.Epoch + 1}
	if w.r.intn(8) == 0 {
		id = Identity{ID: w.nextPID}
		w.nextPID++
	}
	w.id = &id
	w.p.Reset()
	w.bumping = false
	w.unpinGen++
	w.st.bumps++
	if w.tracing {
		w.logf("bump: %v, Reset", id)
	}
}

func (w *world) check() {
	if got, want := w.p.Inflight(), w.outstanding(); got != want {
		w.fail("Inflight() = %d, %d requests outstanding", got, want)
	}
	if w.p.NeedsBump() && !w.bumping {
		w.fail("partition needs a bump the shell was not told about")
	}
}

func (w *world) step() {
	m := w.mix
	add := 0
	if w.toAdd > 0 {
		add = 12
	}
	weights := [...]int{add, 20, 25, 25, 6, m.kill, m.move, m.refresh, m.retention, m.foreignBump, m.expire, m.ghost}
	total := 0
	for _, x := range weights {
		total += x
	}
	x := w.r.intn(total)
	ev := 0
	for ; x >= weights[ev]; ev++ {
		x -= weights[ev]
	}
	switch ev {
	case 0:
		w.add()
	case 1:
		w.send()
	case 2:
		w.processSome()
	case 3:
		w.deliver()
	case 4:
		w.tryBump()
	case 5:
		w.kill()
	case 6:
		w.move()
	case 7:
		w.refresh()
	case 8:
		w.retention()
	case 9:
		w.foreignBump()
	case 10:
		w.expire()
	case 11:
		w.processGhost()
	}
	w.check()
}

// drain runs with a fault-free network until everything is resolved.
func (w *world) drain() {
	w.faults = false
	w.mix = faultMix{refresh: 4, ghost: 4}
	if w.tracing {
		w.logf("---- drain ----")
	}
	for i := 0; i < 20000 && w.err == nil; i++ {
		if w.toAdd == 0 && w.p.Len() == 0 && w.outstanding() == 0 && len(w.ghosts) == 0 {
			return
		}
		w.step()
	}
	if w.err == nil {
		w.fail("did not drain: %d batches, %d outstanding, %d ghost lists, bumping=%v quiesced=%v", w.p.Len(), w.outstanding(), len(w.ghosts), w.bumping, w.p.Quiesced())
	}
}

func (w *world) finalCheck() {
	if w.err != nil {
		return
	}
	for _, mb := range w.batches {
		if mb.result == "" {
			w.fail("%v never reported", mb)
			continue
		}
		for i := int64(0); i < int64(mb.n); i++ {
			rec := mb.first + i
			copies := w.copies[rec]
			switch mb.result {
			case "completed":
				if len(copies) == 0 {
					w.fail("%v completed but record %d is not in the log", mb, rec)
				}
			default:
				for _, o := range copies {
					if o >= w.logStart {
						w.fail("%v reported %s but record %d is in the log at %d", mb, mb.result, rec, o)
					}
				}
				if len(copies) > mb.excused && mb.result != "data loss" {
					// Written, deleted by retention, and the partition
					// had no reason to forget it. (Data loss may hit a
					// resend of sequence 0 that a broker which forgot
					// the producer took as new.)
					w.fail("%v reported %s but record %d was written (offset %d, since deleted) with no KIP-360 reset after", mb, mb.result, rec, copies[len(copies)-1])
				}
				if len(copies) > 0 {
					w.st.failedDeleted++
				}
			}
		}
	}
}

func (w *world) run(steps int) {
	for i := 0; i < steps && w.err == nil; i++ {
		w.step()
	}
	w.drain()
	w.finalCheck()
}

// runModel runs one simulation; on failure it reruns it with a trace.
func runModel(t testing.TB, seed uint64, data []byte) modelStats {
	w := newWorld(seed, data)
	w.run(24 * w.toAdd)
	if w.err == nil {
		return w.st
	}
	w = newWorld(seed, data)
	mix := w.mix
	w.tracing = true
	w.run(24 * w.toAdd)
	tail := w.trace
	if len(tail) > 300 {
		tail = tail[len(tail)-300:]
	}
	t.Fatalf("seed %d (modern %v, mix %+v, max %d): %v\ntrace (last %d lines):\n%s", seed, w.modern, mix, w.p.Max, w.err, len(tail), strings.Join(tail, "\n"))
	return w.st
}

func TestPartitionRandomized(t *testing.T) {
	seeds := 2000
	if testing.Short() {
		seeds = 300
	}
	var total modelStats
	for seed := range uint64(seeds) {
		total.add(runModel(t, seed, nil))
	}
	t.Logf("%+v", total)
	// The event mix must actually exercise every path.
	for name, n := range map[string]int{
		"resends": total.resends, "stale": total.stale, "retries": total.retries,
		"unknowns": total.unknowns, "kills": total.kills, "ghost writes": total.ghostWrites,
		"leader moves": total.moves, "retentions": total.retentions, "kip360": total.kip360,
		"data loss": total.dataLoss, "fatal": total.fatal, "bumps": total.bumps,
		"foreign bumps": total.foreignBumps, "expired": total.expired,
		"expired pinned": total.expiredPinned, "duplicates": total.dups,
		"renumbered": total.renumbered, "pipelined": total.pipelined,
	} {
		if n < 20 {
			t.Errorf("only %d %s over %d seeds", n, name, seeds)
		}
	}
}

func FuzzPartitionAgainstBroker(f *testing.F) {
	for seed := range uint64(8) {
		f.Add(seed, []byte(nil))
	}
	f.Add(uint64(42), []byte{3, 1, 1, 2, 3, 2, 3, 0, 1, 2, 3, 5, 1, 2, 3})
	f.Fuzz(func(t *testing.T, seed uint64, data []byte) {
		runModel(t, seed, data)
	})
}
