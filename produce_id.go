package riffle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/riffle-go/riffle/internal/producer"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var nowFn = time.Now

// idState is the producer id and epoch shared by all partitions, and the
// epoch-bump protocol: once a partition asks for a bump, no partition pins
// new sequences; when every partition is quiesced (nothing outstanding, no
// unknown outcome), idLoop bumps the epoch and restarts every partition's
// sequences at 0.
type idState struct {
	mu      sync.Mutex
	id      producer.Identity
	ready   bool
	bumping bool
	stopErr atomic.Pointer[error]
	wake    chan struct{}
	// lastErr is the last InitProducerId failure while the producer has
	// no id or waits for an epoch bump (nil once it has them), for the
	// delivery timeout's error.
	lastErr error
	// askAgain: a bump was refused (authorization) and the records
	// waiting for it failed; the next record to send asks again.
	askAgain bool
}

// lastFailure returns the last InitProducerId failure while the producer
// has no id or waits for a new epoch, nil if none.
func (s *idState) lastFailure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ready && !s.bumping {
		return nil
	}
	return s.lastErr
}

// current returns the identity to pin with (nil if none yet) and whether a
// bump is pending.
func (s *idState) current() (*producer.Identity, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ready {
		s.poke()
		return nil, s.bumping
	}
	if s.bumping && s.askAgain {
		s.askAgain = false
		s.poke()
	}
	id := s.id
	return &id, s.bumping
}

func (s *idState) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *idState) stop(err error) { s.stopErr.CompareAndSwap(nil, &err) }

// stopped returns the error that stopped the producer (StopOnDataLoss), on
// every Produce call: lock-free.
func (s *idState) stopped() error {
	if e := s.stopErr.Load(); e != nil {
		return *e
	}
	return nil
}

func (p *Producer) requestBump() {
	if p.txn != nil {
		// A transactional producer bumps when the transaction is
		// aborted (which the failure behind this makes necessary);
		// meanwhile it pins no new batches.
		p.txn.requireBump()
	}
	p.id.mu.Lock()
	p.id.bumping = true
	p.id.mu.Unlock()
	p.id.poke()
}

// idLoop obtains the producer id and performs epoch bumps.
func (p *Producer) idLoop() {
	if !p.cfg.idempotent {
		// Non-idempotent produce never pins: mark ready with no id.
		p.id.mu.Lock()
		p.id.ready = true
		p.id.id = producer.Identity{ID: -1, Epoch: -1}
		p.id.mu.Unlock()
	}
	var next *producer.Identity // obtained by a bump, not yet installed
	var idFails idFailures      // the first id's failures in a row
	bumpFails := idFailures{what: "producer epoch bump"}
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-p.id.wake:
		}
		p.id.mu.Lock()
		ready, bumping, cur := p.id.ready, p.id.bumping, p.id.id
		p.id.mu.Unlock()
		switch {
		case p.txn != nil:
			// InitTransactions obtains the id, the transactions'
			// ends bump the epoch.
		case !ready:
			id, err := p.initProducerID(nil)
			if err != nil {
				if p.ctx.Err() != nil {
					continue
				}
				p.id.mu.Lock()
				p.id.lastErr = err
				p.id.mu.Unlock()
				if errors.Is(err, ErrAuthorization) {
					// No retry can succeed until an ACL is granted:
					// the records waiting fail now with the cause (as
					// Java's send fails with the authorization
					// exception), and the next records produced ask
					// again (waking the loop through current).
					p.c.log.Warn("InitProducerId refused; failing the records waiting for a producer id", "err", err)
					idFails = idFailures{}
					p.failWaiting("no producer id", err)
					p.sleep(p.c.cfg.retryBackoff.Max)
					continue
				}
				idFails.log(p.c.log, err, nowFn())
				p.sleep(p.c.cfg.retryBackoff.Max)
				p.id.poke()
				continue
			}
			idFails.recovered(p.c.log)
			idFails = idFailures{}
			p.id.mu.Lock()
			p.id.id, p.id.ready, p.id.lastErr = id, true, nil
			p.id.mu.Unlock()
			p.wakeAll()
		case bumping && p.allQuiesced():
			if !p.cfg.idempotent {
				p.resetAll(cur)
				continue
			}
			if next == nil {
				id, err := p.initProducerID(&cur)
				if err != nil {
					if p.ctx.Err() != nil {
						continue
					}
					p.id.mu.Lock()
					p.id.lastErr = err
					p.id.mu.Unlock()
					if errors.Is(err, ErrAuthorization) {
						// As for the first id: the records waiting
						// for the new epoch fail now with the cause,
						// and the next record to send asks again.
						p.c.log.Warn("producer epoch bump refused; failing the records waiting for it", "err", err)
						bumpFails = idFailures{what: bumpFails.what}
						p.failWaiting("no new producer epoch", err)
						p.id.mu.Lock()
						p.id.askAgain = true
						p.id.mu.Unlock()
						p.sleep(p.c.cfg.retryBackoff.Max)
						continue
					}
					bumpFails.log(p.c.log, err, nowFn())
					p.sleep(p.c.cfg.retryBackoff.Max)
					p.id.poke()
					continue
				}
				bumpFails.recovered(p.c.log)
				bumpFails = idFailures{what: bumpFails.what}
				p.id.mu.Lock()
				p.id.lastErr, p.id.askAgain = nil, false
				p.id.mu.Unlock()
				next = &id
			}
			if !p.resetAll(*next) {
				// A partition stopped being quiesced (it cannot while
				// bumping, but never reset one that is not): retry.
				p.sleep(p.c.cfg.retryBackoff.Base)
				p.id.poke()
				continue
			}
			p.c.log.Info("producer epoch bumped", "producer_id", next.ID, "epoch", next.Epoch)
			next = nil
		}
	}
}

// idWarnAfter is how long InitProducerId may keep failing with a
// retriable error before the producer warns. On a fresh cluster the
// first one gets COORDINATOR_LOAD_IN_PROGRESS for a moment while
// __transaction_state is created; that is expected, and Java's producer
// retries it without a warning too.
const idWarnAfter = 10 * time.Second

// idFailures counts the producer's InitProducerId failures in a row (for
// the first id, or for an epoch bump), for logging: Debug while they are
// young, one Warn once they persist, Info when they end after it.
type idFailures struct {
	what   string // "" is "InitProducerId"
	n      int
	since  time.Time
	warned bool
}

func (f *idFailures) name() string {
	if f.what == "" {
		return "InitProducerId"
	}
	return f.what
}

func (f *idFailures) log(lg *slog.Logger, err error, now time.Time) {
	if f.n == 0 {
		f.since = now
	}
	f.n++
	if !f.warned && now.Sub(f.since) >= idWarnAfter {
		f.warned = true
		lg.Warn(f.name()+" keeps failing; retrying", "attempts", f.n, "for", now.Sub(f.since).Round(time.Millisecond), "err", err)
		return
	}
	lg.Debug(f.name()+" failed; retrying", "attempt", f.n, "err", err)
}

// recovered logs the end of failures that were warned about.
func (f *idFailures) recovered(lg *slog.Logger) {
	if f.warned {
		lg.Info(f.name()+" succeeded again", "after_attempts", f.n)
	}
}

// failWaiting fails every record waiting for a producer id or a new epoch
// (why says which), with cause.
func (p *Producer) failWaiting(why string, cause error) {
	for _, ts := range *p.topics.Load() {
		for _, part := range ts.partitions() {
			part.failWaiting(why, cause)
		}
	}
}

func (p *Producer) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.ctx.Done():
	}
}

func (p *Producer) allQuiesced() bool {
	for _, ts := range *p.topics.Load() {
		for _, part := range ts.partitions() {
			part.mu.Lock()
			q := part.seq.Quiesced()
			part.mu.Unlock()
			if !q {
				return false
			}
		}
	}
	return true
}

// resetAll installs a new identity and restarts every partition's
// sequences. Safe because every partition is quiesced and, while bumping,
// none pins or sends anything but unknown-outcome batches (there are none).
func (p *Producer) resetAll(id producer.Identity) bool {
	for _, ts := range *p.topics.Load() {
		for _, part := range ts.partitions() {
			part.mu.Lock()
			ok := part.seq.Reset()
			part.mu.Unlock()
			if !ok {
				return false
			}
		}
	}
	p.id.mu.Lock()
	p.id.id, p.id.bumping = id, false
	p.id.mu.Unlock()
	p.wakeAll()
	return true
}

// initProducerID asks for a producer id. With cur (KIP-360, InitProducerId
// v3+) the broker bumps cur's epoch, fencing requests of the old epoch;
// older brokers hand out a new id instead, which is just as safe for an
// idempotent producer.
func (p *Producer) initProducerID(cur *producer.Identity) (producer.Identity, error) {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = 60000
	req.ProducerID, req.ProducerEpoch = -1, -1
	if cur != nil {
		req.ProducerID, req.ProducerEpoch = cur.ID, cur.Epoch
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.c.cfg.retryTimeout)
	defer cancel()
	resp, err := p.cl.RequestAny(ctx, req)
	if err != nil {
		return producer.Identity{}, err
	}
	r := resp.(*kmsg.InitProducerIDResponse)
	if r.ErrorCode != 0 {
		if cur != nil && req.GetVersion() < 3 {
			return p.initProducerID(nil)
		}
		return producer.Identity{}, fmt.Errorf("InitProducerId: %w", kafkaerr.ForCode(r.ErrorCode))
	}
	return producer.Identity{ID: r.ProducerID, Epoch: r.ProducerEpoch}, nil
}

// currentIdentity returns the producer id and epoch in use.
func (p *Producer) currentIdentity() producer.Identity {
	p.id.mu.Lock()
	defer p.id.mu.Unlock()
	return p.id.id
}
