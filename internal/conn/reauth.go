package conn

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Re-authentication (KIP-368). A broker with connections.max.reauth.ms
// (or a token that expires) answers SaslAuthenticate with the session's
// lifetime and closes a connection that sends a request after it ends.
// The client re-authenticates on the same connection before that, at a
// random point between 85% and 95% of the lifetime as the Java client
// does, so connections opened together do not all re-authenticate at once.
//
// The exchange runs between requests: reauthLoop takes the write lock, so
// no request is written while it runs, and sends SaslHandshake and
// SaslAuthenticate through the pipeline like any request. The reader
// answers the requests written before it first, in order, so nothing in
// flight is lost or reordered; callers that want to write meanwhile wait
// for the lock (within their contexts). If re-authentication fails, the
// connection closes with ErrConnClosed: what waited is retried elsewhere,
// as on any broken connection, and the next dial reports the failure
// itself (ErrAuth, if the credentials are the problem).
//
// A short session needs more room than that. Kafka reads a connection's
// requests one at a time (it mutes the connection until it has answered
// the request before) and checks the session when it gets to a request,
// not when the request arrived; only a SaslHandshake passes after the end.
// So every request written before the exchange must be reached before the
// session ends: behind a produce that waits for its replicas or a fetch
// that waits for data, up to 5 pipelined requests may take a while. With
// connections.max.reauth.ms=3000, 5-15% of the session (150-450 ms) was
// too little on a loaded machine (Kafka 4.4 closed connections). The
// point is therefore moved earlier, to leave reauthDrain before the end,
// but not before half of the lifetime (plus u's share of a tenth), nor
// before brokerReauthInterval when the 85-95% point is after it: a broker
// refuses a re-authentication less than a second after the last one.
const (
	reauthMinFraction   = 0.85
	reauthMaxFraction   = 0.95
	reauthDrain         = 5 * time.Second
	reauthFloorFraction = 0.5
	brokerReauthSpacing = 1100 * time.Millisecond
)

// reauthDelay is how long from now to wait before re-authenticating
// session s: until reauthAt with a random u.
func reauthDelay(s session) time.Duration {
	return time.Until(reauthAt(s, rand.Float64()))
}

// reauthAt is when to re-authenticate session s, for u in [0, 1): at the
// fraction reauthMinFraction + u*(reauthMaxFraction-reauthMinFraction) of
// its lifetime after its start, or earlier for a session too short to
// leave reauthDrain after that (see above). u outside [0, 1] (or NaN) is
// clamped to it (NaN to 0). Later for a larger u.
func reauthAt(s session, u float64) time.Time {
	if !(u > 0) {
		u = 0
	} else if u > 1 {
		u = 1
	}
	f := reauthMinFraction + u*(reauthMaxFraction-reauthMinFraction)
	at := time.Duration(float64(s.lifetime) * f)
	if latest := s.lifetime - reauthDrain; at > latest {
		floor := time.Duration(float64(s.lifetime) * (reauthFloorFraction + u*0.1))
		at = max(latest, floor, min(at, brokerReauthSpacing))
	}
	return s.start.Add(at)
}

// reauthLoop re-authenticates before each session ends, until the
// connection closes or the broker stops limiting sessions.
func (c *Conn) reauthLoop(s session) {
	defer c.readerWG.Done()
	for s.lifetime > 0 {
		t := time.NewTimer(reauthDelay(s))
		select {
		case <-t.C:
		case <-c.closed:
			t.Stop()
			return
		}
		select {
		case c.wlock <- struct{}{}:
		case <-c.closed:
			return
		}
		var err error
		s, err = c.reauthenticate()
		<-c.wlock
		if err != nil {
			c.closeWith(fmt.Errorf("broker %s: %w: re-authentication failed: %v", c.addr, errs.ErrConnClosed, err))
			return
		}
		c.cfg.logger().Debug("re-authenticated", "broker", c.addr, "node", c.nodeID, "session", s.lifetime)
	}
}

// reauthenticate runs the SASL exchange on the open connection. The caller
// holds the write lock.
func (c *Conn) reauthenticate() (session, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.requestTimeout())
	defer cancel()
	broker := SASLBroker{Addr: c.addr, NodeID: c.nodeID, Reauth: true}
	return authenticate(ctx, c.cfg.SASL, broker, &c.vers, func(req kmsg.Request) ([]byte, error) {
		return c.roundTripLocked(ctx, req)
	})
}

// roundTripLocked writes req (version set) with the write lock held by the
// caller and waits for its response, read by the reader in turn.
func (c *Conn) roundTripLocked(ctx context.Context, req kmsg.Request) ([]byte, error) {
	frame := c.cfg.formatter().Append(nil, req)
	cl := &call{req: req, flexible: wire.ResponseFlexible(req), done: make(chan result, 1), written: len(frame), internal: true}
	c.nextID++
	cl.id = c.nextID
	wire.SetCorrelationID(frame, cl.id)
	cl.start = time.Now()
	cl.deadline = cl.start.Add(c.cfg.requestTimeout())
	select {
	case c.pending <- cl:
	case <-c.closed:
		return nil, c.closeErr
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	c.nc.SetWriteDeadline(cl.deadline)
	if _, err := c.nc.Write(frame); err != nil {
		c.closeWith(fmt.Errorf("broker %s: write %s: %w: %v", c.addr, kmsg.NameForKey(req.Key()), errs.ErrConnClosed, err))
	}
	return c.wait(ctx, cl)
}
