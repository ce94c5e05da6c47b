package cluster

import (
	"context"
	"time"

	"github.com/riffle-go/riffle/internal/conn"
)

// racer is the decision core of a staggered parallel dial ("happy
// eyeballs"): start one candidate; start the next when the newest attempt
// fails (at once: a refused or unresolvable address costs no wait) or when
// the pacing delay passes; the first handshake to complete wins and
// everything else is abandoned. It does no I/O and keeps no time.
//
// The delay depends on what the attempts in flight are doing. While none
// has a TCP connection yet, it is the short stagger: a live broker in the
// same region accepts a connection within a few milliseconds, so a host
// that has not after the stagger is probably dead (firewalled, blackholed)
// and the next candidate starts. Once one has connected, the host is alive
// and busy with TLS, ApiVersions and SASL, which may take longer than the
// stagger; the next candidate then waits for the longer handshake grace,
// so a healthy but slow handshake does not open a connection to every
// seed, while a broker that accepts and then hangs still does not hold the
// race past the grace.
type racer struct {
	n           int
	started     int
	failed      int
	winner      int // -1 until a success
	stopped     bool
	connected   []bool
	handshaking int // started, connected, not finished
}

func newRacer(n int) *racer { return &racer{n: n, winner: -1, connected: make([]bool, n)} }

// next starts the next candidate, returning its index, or -1 if none is
// left or the race is decided.
func (r *racer) next() int {
	if r.stopped || r.winner >= 0 || r.started >= r.n {
		return -1
	}
	r.started++
	return r.started - 1
}

// tick is the pacing timer firing: start another candidate.
func (r *racer) tick() int { return r.next() }

// connect records that candidate i has its TCP connection and is now in
// its handshake.
func (r *racer) connect(i int) {
	if !r.connected[i] {
		r.connected[i] = true
		r.handshaking++
	}
}

// fail records that candidate i failed and returns the candidate to start
// in its place (-1 if none).
func (r *racer) fail(i int) int {
	r.done(i)
	r.failed++
	return r.next()
}

func (r *racer) done(i int) {
	if r.connected[i] {
		r.connected[i] = false
		r.handshaking--
	}
}

// succeed records that candidate i completed its handshake. It returns
// true if i won; false means a winner exists and i must be closed.
func (r *racer) succeed(i int) bool {
	r.done(i)
	if r.winner >= 0 || r.stopped {
		return false
	}
	r.winner = i
	return true
}

// stop ends the race without a winner (the caller gave up).
func (r *racer) stop() { r.stopped = true }

// exhausted reports whether every candidate failed.
func (r *racer) exhausted() bool { return r.failed == r.n }

// delay returns how long to wait before starting another candidate:
// stagger while no attempt is in its handshake, grace while one is.
func (r *racer) delay(stagger, grace time.Duration) time.Duration {
	if r.handshaking > 0 {
		return max(grace, stagger)
	}
	return stagger
}

// candidate is one address an "any broker" request may use.
type candidate struct {
	addr   string
	nodeID int32 // -1 for seeds
}

// raceEvent is one attempt's progress: connected (TCP up, handshake
// running) or done (conn or err set).
type raceEvent struct {
	idx       int
	connected bool
	conn      *conn.Conn
	err       error
}

// raceDial dials candidates paced as the racer says and returns the first
// connection to finish its handshake. dial must call connected (once, if
// at all) when its TCP connection is up. Every other attempt is cancelled
// (or its late connection closed), and raceDial waits for all of them, so
// no goroutine outlives it. errs has one entry per candidate: its failure,
// context.Canceled for a loser, or nil if it was never started or won.
func raceDial(ctx context.Context, cands []candidate, stagger, grace time.Duration,
	dial func(ctx context.Context, cd candidate, connected func()) (*conn.Conn, error)) (win int, c *conn.Conn, errs []error) {
	errs = make([]error, len(cands))
	if len(cands) == 0 {
		return -1, nil, errs
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Each attempt sends at most two events: never blocks.
	events := make(chan raceEvent, 2*len(cands))
	running := 0
	launch := func(i int) {
		if i < 0 {
			return
		}
		running++
		go func() {
			cn, err := dial(rctx, cands[i], func() { events <- raceEvent{idx: i, connected: true} })
			events <- raceEvent{idx: i, conn: cn, err: err}
		}()
	}
	r := newRacer(len(cands))
	launch(r.next())
	timer := time.NewTimer(stagger)
	defer timer.Stop()
	rearm := func() {
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(r.delay(stagger, grace))
	}
	win = -1
	done := ctx.Done()
	for running > 0 {
		select {
		case <-timer.C:
			if i := r.tick(); i >= 0 {
				launch(i)
				timer.Reset(r.delay(stagger, grace))
			}
		case ev := <-events:
			switch {
			case ev.connected:
				r.connect(ev.idx)
				rearm() // the grace runs from the connection
			case ev.err != nil:
				running--
				errs[ev.idx] = ev.err
				if i := r.fail(ev.idx); i >= 0 {
					launch(i)
					rearm()
				}
			case r.succeed(ev.idx):
				running--
				win, c = ev.idx, ev.conn
				cancel() // losers stop dialing
			default:
				running--
				ev.conn.Close()
				errs[ev.idx] = context.Canceled
			}
		case <-done:
			done = nil
			r.stop()
			cancel()
		}
	}
	return win, c, errs
}
