// Package conn is one connection to one Kafka broker: dialing (TCP or TLS),
// ApiVersions negotiation, SASL, and pipelined request/response exchange
// with correlation ids checked and responses matched in order.
//
// A Conn never desynchronizes: a request whose caller gives up (context
// cancelled) stays in the pipeline, its response is read and discarded.
// Anything that makes the byte stream untrustworthy (a request timeout, a
// malformed or unexpected frame, a partial write) closes the connection and
// fails every request in flight with a typed, retriable error.
package conn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riffle-go/riffle/internal/bufpool"
	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Conn is a ready connection to one broker. Safe for concurrent use.
type Conn struct {
	cfg    *Config
	addr   string
	nodeID int32
	nc     net.Conn
	vers   Versions

	sem     chan struct{} // in-flight cap; a slot is released when the response is read
	pending chan *call    // FIFO of written requests awaiting responses

	wlock    chan struct{} // serializes correlation ids, writes and pending order
	nextID   int32
	tmu      sync.Mutex
	throttle time.Time // KIP-219: do not send before this

	id uint64 // unique per connection in the process

	inflight atomic.Int32
	lastUsed atomic.Int64 // unix nanos
	pins     atomic.Int32 // users that need the connection kept while idle
	draining atomic.Bool

	// ctx ends when the connection closes: it bounds re-authentication.
	ctx    context.Context
	cancel context.CancelFunc

	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error // set before closed is closed
	readerWG  sync.WaitGroup
}

type call struct {
	req      kmsg.Request
	id       int32
	flexible bool
	deadline time.Time
	start    time.Time
	written  int
	trusted  int         // response size read without growing; see wire.ReadFrame
	done     chan result // buffered 1; finish sends exactly once
	finished atomic.Bool
	// internal marks the connection's own requests (re-authentication):
	// they take no in-flight slot, so finishing one releases none.
	internal bool
}

type result struct {
	body []byte
	err  error
}

var connIDs atomic.Uint64

// ID returns a number unique to this connection within the process, so
// callers can tell a reconnect from the same connection.
func (c *Conn) ID() uint64 { return c.id }

func (c *Conn) throttleUntil() time.Time {
	c.tmu.Lock()
	defer c.tmu.Unlock()
	return c.throttle
}

// Addr returns the broker address this connection dialed.
func (c *Conn) Addr() string { return c.addr }

// NodeID returns the broker's node id (-1 for a seed).
func (c *Conn) NodeID() int32 { return c.nodeID }

// Versions returns the negotiated versions.
func (c *Conn) Versions() *Versions { return &c.vers }

// Inflight returns the number of requests written and not yet answered.
func (c *Conn) Inflight() int { return int(c.inflight.Load()) }

// Pin marks the connection as needed while idle (on) or no longer (off):
// a share session lives as long as its connection, so a share fetcher
// holding records pins its connection against the idle reaper. Calls
// must pair.
func (c *Conn) Pin(on bool) {
	if on {
		c.pins.Add(1)
	} else {
		c.pins.Add(-1)
	}
}

// Pinned says whether a user pinned the connection (Pin).
func (c *Conn) Pinned() bool { return c.pins.Load() > 0 }

// LastUsed returns when a request was last issued or answered.
func (c *Conn) LastUsed() time.Time { return time.Unix(0, c.lastUsed.Load()) }

// Done is closed when the connection is closed.
func (c *Conn) Done() <-chan struct{} { return c.closed }

// Err returns why the connection closed, or nil while it is open.
func (c *Conn) Err() error {
	select {
	case <-c.closed:
		return c.closeErr
	default:
		return nil
	}
}

// Close closes the connection, failing requests in flight with
// ErrConnClosed, and waits for its reader goroutine.
func (c *Conn) Close() error {
	c.closeWith(fmt.Errorf("broker %s: %w", c.addr, errs.ErrConnClosed))
	c.readerWG.Wait()
	return nil
}

// CloseWhenIdle stops accepting requests and closes the connection once the
// requests already in flight have been answered (or have failed).
func (c *Conn) CloseWhenIdle() {
	c.draining.Store(true)
	if c.inflight.Load() == 0 {
		c.closeWith(fmt.Errorf("broker %s: %w (retired)", c.addr, errs.ErrConnClosed))
	}
}

func (c *Conn) closeWith(err error) {
	c.closeOnce.Do(func() {
		c.closeErr = err
		close(c.closed)
		if c.cancel != nil {
			c.cancel()
		}
		c.nc.Close()
		if c.cfg.Observer != nil {
			c.cfg.Observer.Disconnected(c.addr, c.nodeID, err)
		}
		c.cfg.logger().Debug("connection closed", "broker", c.addr, "node", c.nodeID, "err", err)
	})
}

// Request sends req at the highest version both sides support and waits for
// its response. It returns when the response arrives, the connection dies,
// or ctx ends; in the last case the response is still read and dropped so
// the connection stays usable.
func (c *Conn) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	p, err := c.Send(ctx, req)
	if err != nil {
		return nil, err
	}
	return p.Wait(ctx)
}

// Pending is a request written to the connection whose response has not
// been consumed yet.
type Pending struct {
	c  *Conn
	cl *call // nil when no response is expected (acks=0 produce)
}

// Send writes req (at the negotiated version) and returns without waiting
// for the response. Requests sent by one goroutine reach the broker in the
// order of its Send calls, and their responses come back in that order.
// Send blocks while the connection has MaxInflight requests outstanding.
func (c *Conn) Send(ctx context.Context, req kmsg.Request) (*Pending, error) {
	v, err := c.vers.Pick(req)
	if err != nil {
		return nil, fmt.Errorf("broker %s: %w", c.addr, err)
	}
	req.SetVersion(v)
	cl, err := c.send(ctx, req)
	if err != nil {
		return nil, err
	}
	return &Pending{c: c, cl: cl}, nil
}

// Wait waits for the response. If ctx ends first, Wait returns ctx's error
// and the response is read and dropped when it arrives. A nil response with
// a nil error means the request expects none (acks=0 produce).
func (p *Pending) Wait(ctx context.Context) (kmsg.Response, error) {
	if p.cl == nil {
		return nil, nil
	}
	c, req := p.c, p.cl.req
	body, err := c.wait(ctx, p.cl)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := parse(resp, body); err != nil {
		err = fmt.Errorf("broker %s: %s v%d: %w: %v", c.addr, kmsg.NameForKey(req.Key()), req.GetVersion(), errs.ErrMalformed, err)
		c.closeWith(err)
		c.observe(req, 0, len(body), p.cl.start, err)
		return nil, err
	}
	if tr, ok := resp.(kmsg.ThrottleResponse); ok {
		if ms, _ := tr.Throttle(); ms > 0 {
			d := time.Duration(ms) * time.Millisecond
			c.tmu.Lock()
			if t := time.Now().Add(d); t.After(c.throttle) {
				c.throttle = t
			}
			c.tmu.Unlock()
			if c.cfg.Observer != nil {
				c.cfg.Observer.Throttled(c.addr, c.nodeID, d)
			}
		}
	}
	return resp, nil
}

// parse decodes body into resp. kmsg bounds its reads, but a hostile broker
// must never be able to crash the process, so a panic becomes an error.
func parse(resp kmsg.Response, body []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decoder panic: %v", r)
		}
	}()
	return resp.ReadFrom(body)
}

// send writes req (version already set) and returns its call, or nil for a
// request that expects no response (produce with acks=0).
func (c *Conn) send(ctx context.Context, req kmsg.Request) (*call, error) {
	if c.draining.Load() {
		return nil, fmt.Errorf("broker %s: %w (retired)", c.addr, errs.ErrConnClosed)
	}
	// Frames are encoded into pooled buffers: a produce request carries
	// whole batches, and growing a fresh buffer to that size per request
	// would dominate the producer's allocations.
	// Sized once (appending whole batches to a smaller buffer doubled
	// and copied it again and again), from the size class that fits, so
	// a small request never takes a produce request's buffer.
	frame := c.cfg.formatter().Append(bufpool.Get(frameSizeHint(req)), req)
	defer bufpool.Put(frame)
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closed:
		return nil, c.closeErr
	}
	noResponse := false
	if p, ok := req.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
		noResponse = true
	}
	cl := &call{req: req, flexible: wire.ResponseFlexible(req), done: make(chan result, 1), written: len(frame), trusted: trustedResponse(req)}
	c.inflight.Add(1)
	c.touch()

	// The write lock is a channel so that waiting for it honours ctx: a
	// writer stuck on a full socket must not hold other callers past
	// their deadlines.
	select {
	case c.wlock <- struct{}{}:
	case <-ctx.Done():
		c.release()
		return nil, ctx.Err()
	case <-c.closed:
		c.release()
		return nil, c.closeErr
	}
	unlock := func() { <-c.wlock }
	if wait := time.Until(c.throttleUntil()); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			unlock()
			c.release()
			return nil, ctx.Err()
		case <-c.closed:
			t.Stop()
			unlock()
			c.release()
			return nil, c.closeErr
		}
	}
	// A caller that already gave up sends nothing.
	if err := ctx.Err(); err != nil {
		unlock()
		c.release()
		return nil, err
	}
	c.nextID++
	cl.id = c.nextID
	wire.SetCorrelationID(frame, cl.id)
	cl.start = time.Now()
	cl.deadline = cl.start.Add(c.cfg.requestTimeout() + extraTimeout(req))
	if !noResponse {
		// Enqueue before writing: the reader pops in write order, and a
		// failed write closes the connection, failing this call too.
		select {
		case c.pending <- cl:
		case <-c.closed:
			unlock()
			c.release()
			return nil, c.closeErr
		}
	}
	// The write is bounded by the request timeout, not by ctx's deadline
	// (an expiring deadline must not close the connection under every
	// other request on it). But a caller that gives up while its write is
	// actually stuck (a broker that stopped reading) interrupts it: the
	// connection is then unusable anyway, and Close must not hang on it.
	c.nc.SetWriteDeadline(cl.deadline)
	stop := context.AfterFunc(ctx, func() { c.nc.SetWriteDeadline(time.Now()) })
	_, werr := c.nc.Write(frame)
	stop()
	unlock()
	if werr != nil {
		// A partial write leaves the stream unusable; the outcome of the
		// request is unknown.
		c.closeWith(fmt.Errorf("broker %s: write %s: %w: %v", c.addr, kmsg.NameForKey(req.Key()), errs.ErrConnClosed, werr))
	}
	if noResponse {
		c.release()
		c.observe(req, len(frame), 0, cl.start, werr)
		if werr != nil {
			return nil, c.closeErr
		}
		return nil, nil
	}
	return cl, nil
}

// wait waits for cl's raw response body.
func (c *Conn) wait(ctx context.Context, cl *call) ([]byte, error) {
	select {
	case r := <-cl.done:
		return r.body, r.err
	case <-c.closed:
		// The reader may have exited before it saw this call; finish is
		// idempotent, so whichever side gets there first answers.
		c.finish(cl, result{err: c.closeErr}, 0)
		r := <-cl.done
		return r.body, r.err
	case <-ctx.Done():
		// The reader still consumes and discards the response.
		return nil, ctx.Err()
	}
}

func (c *Conn) release() {
	c.touch()
	n := c.inflight.Add(-1)
	<-c.sem
	if n == 0 && c.draining.Load() {
		c.closeWith(fmt.Errorf("broker %s: %w (retired)", c.addr, errs.ErrConnClosed))
	}
}

func (c *Conn) touch() { c.lastUsed.Store(time.Now().UnixNano()) }

// extraTimeout is how long a request may legitimately wait at the broker on
// top of the request timeout: long polls and server-side timeouts.
func extraTimeout(req kmsg.Request) time.Duration {
	if f, ok := AsFetch(req); ok {
		return time.Duration(f.MaxWaitMillis) * time.Millisecond
	}
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		return time.Duration(r.RebalanceTimeoutMillis) * time.Millisecond
	case kmsg.TimeoutRequest:
		return time.Duration(r.Timeout()) * time.Millisecond
	}
	return 0
}

// frameSizeHint is about how large req's frame is, for the requests that
// carry bulk data (produce: its batches), 0 for the rest.
func frameSizeHint(req kmsg.Request) int {
	p, ok := req.(*kmsg.ProduceRequest)
	if !ok {
		return 0
	}
	n := 256
	for i := range p.Topics {
		n += 32 + len(p.Topics[i].Topic)
		for j := range p.Topics[i].Partitions {
			n += 16 + len(p.Topics[i].Partitions[j].Records)
		}
	}
	return n
}

// trustedResponse is how large a response to req may be and still get its
// buffer in one allocation: for a fetch, what it asked for plus room for
// the response's own fields (a broker may also exceed MaxBytes by one
// batch, KIP-74: such a response grows as it arrives). The memory was
// budgeted by whoever sized the request, so a lying size prefix costs no
// more than an honest full response.
func trustedResponse(req kmsg.Request) int {
	if f, ok := AsFetch(req); ok && f.MaxBytes > 0 {
		return int(f.MaxBytes) + 1<<20
	}
	return 0
}

// readLoop reads responses in order. It owns the read side of the socket.
func (c *Conn) readLoop() {
	defer c.readerWG.Done()
	var buf []byte
	for {
		var cl *call
		select {
		case cl = <-c.pending:
		case <-c.closed:
			c.failPending()
			return
		}
		c.nc.SetReadDeadline(cl.deadline)
		body, err := wire.ReadFrame(c.nc, c.cfg.maxFrame(), buf[:0], cl.trusted)
		if err != nil {
			var ne net.Error
			switch {
			case errors.As(err, &ne) && ne.Timeout():
				err = fmt.Errorf("broker %s: %s: %w after %v", c.addr, kmsg.NameForKey(cl.req.Key()), errs.ErrRequestTimeout, time.Since(cl.start).Round(time.Millisecond))
			case errors.Is(err, errs.ErrMalformed):
				err = fmt.Errorf("broker %s: %w", c.addr, err)
			default:
				err = fmt.Errorf("broker %s: read: %w: %v", c.addr, errs.ErrConnClosed, err)
			}
			c.closeWith(err)
			c.finish(cl, result{err: err}, 0)
			c.failPending()
			return
		}
		id, rest, err := wire.SplitResponse(body, cl.flexible)
		if err == nil && id != cl.id {
			err = &wire.FrameError{Reason: fmt.Sprintf("correlation id %d, expected %d", id, cl.id)}
		}
		if err != nil {
			err = fmt.Errorf("broker %s: %w", c.addr, err)
			c.closeWith(err)
			c.finish(cl, result{err: err}, len(body))
			c.failPending()
			return
		}
		// The body is handed to the caller, so it cannot be reused. Copy
		// small responses into an exact-size slice and keep the big buffer.
		// bytes.Clone keeps an empty body non-nil, as it was uncopied.
		if cap(body) > 64<<10 && len(rest) < cap(body)/4 {
			rest = bytes.Clone(rest)
			buf = body
		} else {
			buf = nil
		}
		c.finish(cl, result{body: rest}, len(body)+4)
	}
}

func (c *Conn) finish(cl *call, r result, read int) {
	if !cl.finished.CompareAndSwap(false, true) {
		return
	}
	// Account before answering: once the caller has its response, the
	// request is no longer in flight and has been observed.
	c.observe(cl.req, cl.written, read, cl.start, r.err)
	if !cl.internal {
		c.release()
	}
	cl.done <- r
}

// failPending fails every request still queued after the connection closed.
func (c *Conn) failPending() {
	for {
		select {
		case cl := <-c.pending:
			c.finish(cl, result{err: c.closeErr}, 0)
		default:
			return
		}
	}
}

func (c *Conn) observe(req kmsg.Request, written, read int, start time.Time, err error) {
	if c.cfg.Observer != nil {
		c.cfg.Observer.Request(c.addr, c.nodeID, req.Key(), written, read, time.Since(start), err)
	}
}

// Observer receives connection events for metrics. Implementations must be
// fast and must not block: they run on the connection's goroutines.
type Observer interface {
	Connected(addr string, nodeID int32, dialTime time.Duration, err error)
	Disconnected(addr string, nodeID int32, err error)
	Request(addr string, nodeID int32, key int16, written, read int, latency time.Duration, err error)
	Throttled(addr string, nodeID int32, d time.Duration)
}

func (cfg *Config) logger() *slog.Logger {
	if cfg.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return cfg.Logger
}
