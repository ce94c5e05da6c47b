package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/riffle-go/riffle/internal/conn"
	"github.com/riffle-go/riffle/internal/errs"
)

// Class is a traffic class. Each broker gets one connection per class, so a
// long-poll fetch or a slow acks=all produce never delays metadata,
// heartbeats or commits: a broker answers one connection's requests in order.
type Class int

// Traffic classes.
const (
	ClassOther Class = iota // metadata, offsets, admin
	ClassProduce
	ClassFetch
	ClassGroup // group coordinator: join, sync, heartbeat, commit
	// ClassRead carries range reads: short fetches that must not queue
	// behind a consumer's long polls on the fetch connection.
	ClassRead
	// ClassJoin carries JoinGroup and SyncGroup, which the coordinator
	// holds for up to a rebalance timeout: group members sharing a client
	// must keep heartbeating meanwhile.
	ClassJoin
	numClasses
)

func (c Class) String() string {
	return [...]string{"other", "produce", "fetch", "group", "read", "join"}[c]
}

// broker is one node (or seed address) with lazily dialed connections. Its
// address never changes: a broker that moves is retired and replaced.
type broker struct {
	cl     *Cluster
	nodeID int32 // -1 for a seed
	addr   string

	mu       sync.Mutex
	conns    [numClasses]*conn.Conn
	dialing  [numClasses]*dialCall
	retired  bool
	draining []*conn.Conn // connections of a retired broker finishing their requests
}

// dialCall is a single-flight dial shared by every caller that needs the
// same class while it runs.
type dialCall struct {
	done chan struct{}
	c    *conn.Conn
	err  error
}

// conn returns a live connection of class cls, dialing it if needed. Only
// one dial per class runs at a time; concurrent callers share its outcome.
// The dial itself belongs to the cluster (not to the first caller), so one
// caller's cancellation does not fail the others.
func (b *broker) conn(ctx context.Context, cls Class) (*conn.Conn, error) {
	b.mu.Lock()
	if b.retired {
		b.mu.Unlock()
		return nil, fmt.Errorf("broker %s (node %d) left the cluster: %w", b.addr, b.nodeID, errs.ErrConnClosed)
	}
	if c := b.conns[cls]; c != nil {
		if c.Err() == nil {
			b.mu.Unlock()
			return c, nil
		}
		b.conns[cls] = nil
	}
	d := b.dialing[cls]
	if d == nil {
		d = &dialCall{done: make(chan struct{})}
		b.dialing[cls] = d
		if !b.cl.goOwned(func() { b.runDial(d, cls) }) {
			b.dialing[cls] = nil
			b.mu.Unlock()
			return nil, errs.ErrClientClosed
		}
	}
	b.mu.Unlock()
	select {
	case <-d.done:
		return d.c, d.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (b *broker) runDial(d *dialCall, cls Class) {
	// Respect this address's backoff: wait until it may be tried again.
	if wait := time.Until(b.cl.readyAt(b.addr)); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-b.cl.ctx.Done():
			t.Stop()
		}
	}
	var c *conn.Conn
	err := b.cl.ctx.Err()
	if err == nil {
		c, err = conn.Dial(b.cl.ctx, b.cl.connCfg, b.addr, b.nodeID)
	}
	if err != nil && b.cl.ctx.Err() != nil {
		err = errs.ErrClientClosed
	}
	b.cl.recordDial(b.addr, err)
	b.mu.Lock()
	b.dialing[cls] = nil
	if err == nil {
		switch cur := b.conns[cls]; {
		case b.retired:
			c.Close()
			c, err = nil, fmt.Errorf("broker %s (node %d) left the cluster: %w", b.addr, b.nodeID, errs.ErrConnClosed)
		case cur != nil && cur.Err() == nil:
			// Another path (an "any broker" race) installed a live
			// connection meanwhile: keep it, drop ours.
			c.Close()
			c = cur
		default:
			b.conns[cls] = c
		}
	}
	d.c, d.err = c, err
	b.mu.Unlock()
	close(d.done)
}

// adopt installs a connection dialed elsewhere (by an "any broker" race)
// as this broker's class cls connection, unless one is already live.
// It returns the connection to use.
func (b *broker) adopt(cls Class, c *conn.Conn) *conn.Conn {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur := b.conns[cls]; cur != nil && cur.Err() == nil {
		c.Close()
		return cur
	}
	if b.retired {
		c.CloseWhenIdle()
		return c
	}
	b.conns[cls] = c
	return c
}

// liveConn returns the class cls connection if it is open, without dialing.
func (b *broker) liveConn(cls Class) *conn.Conn {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c := b.conns[cls]; c != nil && c.Err() == nil {
		return c
	}
	return nil
}

// retire stops new use of the broker and closes each connection once its
// in-flight requests finish.
func (b *broker) retire() {
	b.mu.Lock()
	b.retired = true
	conns := b.conns
	b.conns = [numClasses]*conn.Conn{}
	for _, c := range conns {
		if c != nil {
			b.draining = append(b.draining, c)
		}
	}
	b.mu.Unlock()
	for _, c := range conns {
		if c != nil {
			c.CloseWhenIdle()
		}
	}
}

// drained reports whether a retired broker's connections have all closed.
func (b *broker) drained() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.draining {
		if c.Err() == nil {
			return false
		}
	}
	return true
}

// closeIdle closes connections idle for longer than idle.
func (b *broker) closeIdle(now time.Time, idle time.Duration) {
	b.mu.Lock()
	var toClose []*conn.Conn
	for i, c := range b.conns {
		if c == nil {
			continue
		}
		if c.Err() != nil || (c.Inflight() == 0 && !c.Pinned() && now.Sub(c.LastUsed()) > idle) {
			toClose = append(toClose, c)
			b.conns[i] = nil
		}
	}
	b.mu.Unlock()
	for _, c := range toClose {
		c.CloseWhenIdle()
	}
}

// closeAll closes every connection now, draining ones included.
func (b *broker) closeAll() {
	b.mu.Lock()
	conns := append(b.conns[:0:0], b.conns[:]...)
	conns = append(conns, b.draining...)
	b.conns = [numClasses]*conn.Conn{}
	b.draining = nil
	b.retired = true
	b.mu.Unlock()
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
}
