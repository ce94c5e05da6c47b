package cluster

import (
	"context"
	"time"

	"github.com/riffle-go/riffle/internal/conn"
)

// racer is the decision core of a staggered parallel dial ("happy
// eyeballs"): start one candidate; start the next when a stagger delay
// passes or when the newest attempt fails; the first success wins and
// everything else is abandoned. It does no I/O and keeps no time.
type racer struct {
	n       int
	started int
	failed  int
	winner  int // -1 until a success
	stopped bool
}

func newRacer(n int) *racer { return &racer{n: n, winner: -1} }

// next starts the next candidate, returning its index, or -1 if none is
// left or the race is decided.
func (r *racer) next() int {
	if r.stopped || r.winner >= 0 || r.started >= r.n {
		return -1
	}
	r.started++
	return r.started - 1
}

// tick is the stagger timer firing: start another candidate.
func (r *racer) tick() int { return r.next() }

// fail records that candidate i failed and returns the candidate to start
// in its place (-1 if none).
func (r *racer) fail(int) int {
	r.failed++
	return r.next()
}

// succeed records that candidate i completed its handshake. It returns
// true if i won; false means a winner exists and i must be closed.
func (r *racer) succeed(i int) bool {
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

// candidate is one address an "any broker" request may use.
type candidate struct {
	addr   string
	nodeID int32 // -1 for seeds
}

type raceResult struct {
	idx  int
	conn *conn.Conn
	err  error
}

// raceDial dials candidates staggered in parallel and returns the first
// connection to finish its handshake. Every other attempt is cancelled (or
// its late connection closed), and raceDial waits for all of them, so no
// goroutine outlives it. errs has one entry per candidate: its failure,
// context.Canceled for a loser, or nil if it was never started or won.
func raceDial(ctx context.Context, cands []candidate, stagger time.Duration,
	dial func(context.Context, candidate) (*conn.Conn, error)) (win int, c *conn.Conn, errs []error) {
	errs = make([]error, len(cands))
	if len(cands) == 0 {
		return -1, nil, errs
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan raceResult, len(cands))
	running := 0
	launch := func(i int) {
		if i < 0 {
			return
		}
		running++
		go func() {
			cn, err := dial(rctx, cands[i])
			results <- raceResult{i, cn, err}
		}()
	}
	r := newRacer(len(cands))
	launch(r.next())
	timer := time.NewTimer(stagger)
	defer timer.Stop()
	win = -1
	done := ctx.Done()
	for running > 0 {
		select {
		case <-timer.C:
			if i := r.tick(); i >= 0 {
				launch(i)
				timer.Reset(stagger)
			}
		case res := <-results:
			running--
			if res.err != nil {
				errs[res.idx] = res.err
				if i := r.fail(res.idx); i >= 0 {
					launch(i)
					if !timer.Stop() {
						select {
						case <-timer.C:
						default:
						}
					}
					timer.Reset(stagger)
				}
				continue
			}
			if r.succeed(res.idx) {
				win, c = res.idx, res.conn
				cancel() // losers stop dialing
				continue
			}
			res.conn.Close()
			errs[res.idx] = context.Canceled
		case <-done:
			done = nil
			r.stop()
			cancel()
		}
	}
	return win, c, errs
}
