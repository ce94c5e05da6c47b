package riffle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// term is a stretch of membership the coordinator can end by fencing the
// member: a classic generation, or a KIP-848 membership until it is fenced.
// The member's revoke and assign work for the term runs under its context,
// so a fence aborts that work: a partition being revoked is then lost, not
// committed.
type term struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	// handled is closed once the member dealt with the fence (KIP-848:
	// heartbeats wait for it before joining again).
	handled chan struct{}
}

func newTerm(parent context.Context) *term {
	ctx, cancel := context.WithCancelCause(parent)
	return &term{ctx: ctx, cancel: cancel, handled: make(chan struct{})}
}

// fencedError says why a term ended: the coordinator's error code, or 0
// when no heartbeat was answered for a whole session.
type fencedError struct {
	code int16
	err  error
}

func (e *fencedError) Error() string { return "fenced: " + e.err.Error() }
func (e *fencedError) Unwrap() error { return e.err }

func (t *term) fence(code int16, err error) { t.cancel(&fencedError{code, err}) }

// fenced returns why the term was fenced, or nil (still running, or ended
// because the member stops).
func (t *term) fenced() *fencedError {
	var fe *fencedError
	if errors.As(context.Cause(t.ctx), &fe) {
		return fe
	}
	return nil
}

// generation is a classic generation the member synced into. Its
// heartbeats run on their own goroutine, started with it and stopped
// before the member joins again, so revokes, offset fetches and callbacks
// never delay them.
type generation struct {
	*term
	id       int32
	memberID string
	// rebalance is signalled when a heartbeat answers
	// REBALANCE_IN_PROGRESS. The member rejoins once its current work (a
	// revoke in progress) is done, keeping the protocol's order;
	// heartbeats go on meanwhile, and count for the session.
	rebalance chan struct{}
	stop      context.CancelFunc
	done      chan struct{}
}

// startGeneration starts heartbeating for the generation just synced.
func (m *member) startGeneration(ctx context.Context) *generation {
	m.mu.Lock()
	g := &generation{term: newTerm(ctx), id: m.generation, memberID: m.memberID,
		rebalance: make(chan struct{}, 1), done: make(chan struct{})}
	m.mu.Unlock()
	hctx, stop := context.WithCancel(g.ctx)
	g.stop = stop
	go func() {
		defer close(g.done)
		m.heartbeatLoop(hctx, g)
	}()
	return g
}

// stopHeartbeats stops the generation's heartbeats and waits for them.
func (g *generation) stopHeartbeats() {
	g.stop()
	<-g.done
}

// heartbeatLoop heartbeats for generation g until ctx ends or the member
// is fenced, which it reports by fencing g: the coordinator no longer
// knows the member or the generation, or no heartbeat was answered for a
// whole session (the coordinator has surely evicted it by then).
func (m *member) heartbeatLoop(ctx context.Context, g *generation) {
	t := time.NewTicker(m.cfg.heartbeatInterval)
	defer t.Stop()
	lastOK := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group, req.Generation, req.MemberID = m.cfg.id, g.id, g.memberID
		if m.cfg.instanceID != "" {
			req.InstanceID = &m.cfg.instanceID
		}
		sent := time.Now()
		// The coordinator counts the session from when it received our
		// last heartbeat, which is after we sent it: measuring from the
		// send time gives up no later than it evicts us.
		hctx, cancel := context.WithDeadline(ctx, lastOK.Add(m.cfg.sessionTimeout))
		resp, err := m.groupRequest(hctx, req)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if time.Since(lastOK) >= m.cfg.sessionTimeout {
				g.fence(0, fmt.Errorf("no heartbeat answered for %v: %w", m.cfg.sessionTimeout, err))
				return
			}
			continue
		}
		switch code := resp.(*kmsg.HeartbeatResponse).ErrorCode; code {
		case 0:
			lastOK = sent
		case kafkaerr.RebalanceInProgress:
			lastOK = sent
			select {
			case g.rebalance <- struct{}{}:
			default:
			}
		case kafkaerr.UnknownMemberID, kafkaerr.IllegalGeneration, kafkaerr.FencedInstanceID:
			g.fence(code, kafkaerr.ForCode(code))
			return
		default:
			m.coordinatorError(code)
		}
	}
}

// autoCommit commits the finished positions of the owned partitions every
// AutoCommitInterval on its own goroutine, so joins, revokes and callbacks
// never delay it: partitions kept through a rebalance keep being
// committed. Each commit carries the generation (member epoch) current
// when it is sent; one refused because the group is rebalancing waits for
// the next tick, and partitions given up meanwhile are left out.
func (m *member) autoCommit(ctx context.Context) {
	t := time.NewTicker(m.cfg.autoCommitEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.commits.commitAsync(m.ownedPositions())
	}
}
