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
	if c >= numClasses {
		return fmt.Sprintf("fetch-%d", int(c-numClasses)+1)
	}
	return [...]string{"other", "produce", "fetch", "group", "read", "join"}[c]
}

// keyed reports whether c is a class of its own from NewFetchClass.
func (c Class) keyed() bool { return c >= numClasses }

// broker is one node (or seed address) with lazily dialed connections. Its
// address never changes: a broker that moves is retired and replaced.
type broker struct {
	cl     *Cluster
	nodeID int32 // -1 for a seed
	addr   string

	mu       sync.Mutex
	conns    [numClasses]slot
	keyed    map[Class]*slot // classes of their own (NewFetchClass), created on first use
	retired  bool
	draining []*conn.Conn // connections of a retired broker finishing their requests
}

// slot is one class's connection to the broker and the dial under way
// for it.
type slot struct {
	c       *conn.Conn
	dialing *dialCall
}

// slot returns class cls's slot (b.mu held), creating a keyed class's on
// first use unless create is false (then it may return nil).
func (b *broker) slot(cls Class, create bool) *slot {
	if !cls.keyed() {
		return &b.conns[cls]
	}
	s := b.keyed[cls]
	if s == nil && create {
		if b.keyed == nil {
			b.keyed = make(map[Class]*slot)
		}
		s = &slot{}
		b.keyed[cls] = s
	}
	return s
}

// slots calls fn for every slot (b.mu held).
func (b *broker) slots(fn func(Class, *slot)) {
	for i := range b.conns {
		fn(Class(i), &b.conns[i])
	}
	for cls, s := range b.keyed {
		fn(cls, s)
	}
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
	sl := b.slot(cls, true)
	if c := sl.c; c != nil {
		if c.Err() == nil {
			b.mu.Unlock()
			return c, nil
		}
		sl.c = nil
	}
	d := sl.dialing
	if d == nil {
		d = &dialCall{done: make(chan struct{})}
		sl.dialing = d
		if !b.cl.goOwned(func() { b.runDial(d, cls) }) {
			sl.dialing = nil
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
	sl := b.slot(cls, false)
	if sl != nil && sl.dialing == d {
		sl.dialing = nil
	}
	if err == nil {
		switch {
		case b.retired:
			c.Close()
			c, err = nil, fmt.Errorf("broker %s (node %d) left the cluster: %w", b.addr, b.nodeID, errs.ErrConnClosed)
		case sl == nil:
			// A keyed class released while we dialed.
			c.Close()
			c, err = nil, fmt.Errorf("connection class %s to broker %s (node %d) was released: %w", cls, b.addr, b.nodeID, errs.ErrConnClosed)
		case sl.c != nil && sl.c.Err() == nil:
			// Another path (an "any broker" race) installed a live
			// connection meanwhile: keep it, drop ours.
			c.Close()
			c = sl.c
		default:
			sl.c = c
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
	sl := b.slot(cls, true)
	if cur := sl.c; cur != nil && cur.Err() == nil {
		c.Close()
		return cur
	}
	if b.retired {
		c.CloseWhenIdle()
		return c
	}
	sl.c = c
	return c
}

// liveConn returns the class cls connection if it is open, without dialing.
func (b *broker) liveConn(cls Class) *conn.Conn {
	b.mu.Lock()
	defer b.mu.Unlock()
	if sl := b.slot(cls, false); sl != nil && sl.c != nil && sl.c.Err() == nil {
		return sl.c
	}
	return nil
}

// release forgets keyed class cls and closes its connection once its
// requests finish; a dial under way for it closes what it gets.
func (b *broker) release(cls Class) {
	b.mu.Lock()
	sl := b.keyed[cls]
	delete(b.keyed, cls)
	var c *conn.Conn
	if sl != nil {
		c = sl.c // nil once retire moved it to draining
	}
	b.mu.Unlock()
	if c != nil {
		c.CloseWhenIdle()
	}
}

// retire stops new use of the broker and closes each connection once its
// in-flight requests finish.
func (b *broker) retire() {
	b.mu.Lock()
	b.retired = true
	var conns []*conn.Conn
	b.slots(func(_ Class, sl *slot) {
		if sl.c != nil {
			conns = append(conns, sl.c)
			b.draining = append(b.draining, sl.c)
			sl.c = nil
		}
	})
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
	b.slots(func(cls Class, sl *slot) {
		c := sl.c
		if c == nil {
			return
		}
		if c.Err() != nil || (c.Inflight() == 0 && !c.Pinned() && now.Sub(c.LastUsed()) > idle) {
			toClose = append(toClose, c)
			sl.c = nil
		}
	})
	b.mu.Unlock()
	for _, c := range toClose {
		c.CloseWhenIdle()
	}
}

// closeAll closes every connection now, draining ones included.
func (b *broker) closeAll() {
	b.mu.Lock()
	var conns []*conn.Conn
	b.slots(func(_ Class, sl *slot) {
		conns = append(conns, sl.c)
		sl.c = nil
	})
	conns = append(conns, b.draining...)
	b.draining = nil
	b.retired = true
	b.mu.Unlock()
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
}
