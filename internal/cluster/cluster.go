// Package cluster manages a client's view of a Kafka cluster: seed
// addresses kept for the client's lifetime, brokers discovered from
// metadata, one lazily dialed connection per broker and traffic class, a
// single-flight metadata owner, and retries bounded by a budget.
//
// The decisions are pure types with table tests (racer, merge, backoff);
// Cluster is the shell whose goroutines own sockets and call into them.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riffle-go/riffle/internal/backoff"
	"github.com/riffle-go/riffle/internal/conn"
	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/lifecycle"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config configures a Cluster. Zero durations take the documented defaults.
type Config struct {
	Seeds []string
	Conn  *conn.Config

	DialStagger         time.Duration  // happy-eyeballs delay before a TCP connection; default 25 ms
	DialGrace           time.Duration  // the delay while a candidate is in its handshake; default 300 ms
	ReconnectBackoff    backoff.Policy // per address; default 50 ms .. 1 s, jitter 0.2
	RetryBackoff        backoff.Policy // between request retries; default 100 ms .. 1 s, jitter 0.2
	RetryTimeout        time.Duration  // budget for one call's retries; default 30 s
	IdleTimeout         time.Duration  // close unused connections; default 30 s
	MetadataMinAge      time.Duration  // floor between refreshes; default 100 ms
	MetadataMaxAge      time.Duration  // periodic refresh; default 5 min
	UnknownTopicWait    time.Duration  // how long a lookup waits for a topic to appear; 0: not at all
	UnknownTopicRetries int            // refreshes answering a topic unknown before a lookup fails; 0: no bound

	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.DialStagger, 25*time.Millisecond)
	def(&c.DialGrace, 300*time.Millisecond)
	def(&c.RetryTimeout, 30*time.Second)
	def(&c.IdleTimeout, 30*time.Second)
	def(&c.MetadataMinAge, 100*time.Millisecond)
	def(&c.MetadataMaxAge, 5*time.Minute)
	if c.ReconnectBackoff.Base <= 0 {
		c.ReconnectBackoff = backoff.Policy{Base: 50 * time.Millisecond, Max: time.Second, Jitter: 0.2}
	}
	if c.RetryBackoff.Base <= 0 {
		c.RetryBackoff = backoff.Policy{Base: 100 * time.Millisecond, Max: time.Second, Jitter: 0.2}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Conn == nil {
		c.Conn = &conn.Config{}
	}
}

// Cluster is the connection and metadata manager shared by a client's
// producer, consumer and admin. Safe for concurrent use.
type Cluster struct {
	cfg     Config
	connCfg *conn.Config
	log     *slog.Logger

	life *lifecycle.Group // owns every goroutine; stops on Close
	ctx  context.Context  // life's: cancelled by Close; every owned goroutine watches it

	mu       sync.Mutex
	seeds    []*broker
	brokers  map[int32]*broker
	retired  []*broker // left the cluster; connections draining
	tracker  *backoff.Tracker
	lastErrs map[string]error         // last dial failure per address, for reports
	dialing  map[string]*inflightDial // "any broker" dials running, for reports

	meta metaState

	lastClass atomic.Int32 // the last class NewFetchClass handed out
}

// NewFetchClass returns a traffic class of the caller's own: a
// connection per broker that no other caller's requests share, for a
// long-poll loop that must not queue behind another's (each share group
// member's ShareFetches: a broker holds each for up to its max wait, and
// answers one connection's requests in order). ReleaseClass closes its
// connections once the caller is done with them.
func (c *Cluster) NewFetchClass() Class {
	return numClasses + Class(c.lastClass.Add(1)) - 1
}

// ReleaseClass closes the connections of a class from NewFetchClass, each
// once its requests finish, and forgets them. A later Conn of the class
// dials again (the caller should not make one).
func (c *Cluster) ReleaseClass(cls Class) {
	if !cls.keyed() {
		return
	}
	c.mu.Lock()
	all := append([]*broker(nil), c.seeds...)
	for _, b := range c.brokers {
		all = append(all, b)
	}
	all = append(all, c.retired...)
	c.mu.Unlock()
	for _, b := range all {
		b.release(cls)
	}
}

// RetryBackoff is the delay policy between retries (Config.RetryBackoff).
func (c *Cluster) RetryBackoff() backoff.Policy { return c.cfg.RetryBackoff }

// New starts a cluster manager. It dials nothing until first needed.
func New(cfg Config) (*Cluster, error) {
	if len(cfg.Seeds) == 0 {
		return nil, fmt.Errorf("%w: no seed brokers", errs.ErrConfig)
	}
	cfg.setDefaults()
	cfg.Conn.Init()
	life := lifecycle.New()
	c := &Cluster{
		cfg:      cfg,
		connCfg:  cfg.Conn,
		log:      cfg.Logger,
		life:     life,
		ctx:      life.Context(),
		brokers:  make(map[int32]*broker),
		tracker:  backoff.NewTracker(cfg.ReconnectBackoff),
		lastErrs: make(map[string]error),
		dialing:  make(map[string]*inflightDial),
	}
	seen := map[string]bool{}
	for _, s := range cfg.Seeds {
		if seen[s] {
			continue
		}
		seen[s] = true
		c.seeds = append(c.seeds, &broker{cl: c, nodeID: -1, addr: s})
	}
	c.meta.init()
	c.goOwned(c.metadataLoop)
	c.goOwned(c.reapLoop)
	return c, nil
}

// goOwned runs fn on a goroutine the cluster waits for on Close. It
// returns false (and runs nothing) once the cluster is closing.
func (c *Cluster) goOwned(fn func()) bool { return c.life.Go(fn) }

// Close closes every connection and waits for every goroutine. Calls made
// after (or waiting when) it starts fail with errs.ErrClientClosed. A
// second or concurrent Close waits for the first.
func (c *Cluster) Close() {
	if !c.life.Close() {
		<-c.life.Done()
		return
	}
	defer c.life.Finish()
	// Closing is set before the brokers are collected: a broker added
	// after (applyBrokerChanges checks it under c.mu) is never created.
	c.mu.Lock()
	all := append([]*broker(nil), c.seeds...)
	for _, b := range c.brokers {
		all = append(all, b)
	}
	all = append(all, c.retired...)
	c.mu.Unlock()
	c.life.Stop()
	for _, b := range all {
		b.closeAll()
	}
	c.life.Wait()
	// Dials that finished after closeAll raced in; close them too.
	for _, b := range all {
		b.closeAll()
	}
}

// Closed is closed when Close starts.
func (c *Cluster) Closed() <-chan struct{} { return c.ctx.Done() }

// Closing reports whether Close was called.
func (c *Cluster) Closing() bool { return c.life.Closing() }

func (c *Cluster) readyAt(addr string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tracker.ReadyAt(addr)
}

func (c *Cluster) recordDial(addr string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		c.tracker.Succeeded(addr)
		delete(c.lastErrs, addr)
		return
	}
	if errors.Is(err, errs.ErrClientClosed) || errors.Is(err, context.Canceled) {
		return
	}
	until := c.tracker.Failed(addr, time.Now(), rand.Float64())
	c.lastErrs[addr] = err
	c.log.Debug("broker backing off", "broker", addr, "until", until, "err", err)
}

// Broker returns the broker with nodeID, if metadata knows it.
func (c *Cluster) broker(nodeID int32) (*broker, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.brokers[nodeID]
	return b, ok
}

// OpenConn returns the open connection of class cls to nodeID, or nil: it
// never dials (for a courtesy such as closing a fetch session, which is not
// worth a connection of its own).
func (c *Cluster) OpenConn(nodeID int32, cls Class) *conn.Conn {
	if b, ok := c.broker(nodeID); ok {
		return b.liveConn(cls)
	}
	return nil
}

// Conn returns a connection of class cls to broker nodeID, dialing lazily.
// A broker not in the metadata triggers one refresh before failing.
func (c *Cluster) Conn(ctx context.Context, nodeID int32, cls Class) (*conn.Conn, error) {
	if c.ctx.Err() != nil {
		return nil, errs.ErrClientClosed
	}
	b, ok := c.broker(nodeID)
	if !ok {
		if _, err := c.awaitRefresh(ctx, nil); err != nil {
			return nil, err
		}
		if b, ok = c.broker(nodeID); !ok {
			return nil, fmt.Errorf("broker node %d is not in the cluster metadata: %w", nodeID, errs.ErrConnClosed)
		}
	}
	return b.conn(ctx, cls)
}

// Request sends req to broker nodeID on class cls once (no retries).
func (c *Cluster) Request(ctx context.Context, nodeID int32, cls Class, req kmsg.Request) (kmsg.Response, error) {
	cn, err := c.Conn(ctx, nodeID, cls)
	if err != nil {
		return nil, err
	}
	return cn.Request(ctx, req)
}

// reapLoop closes idle connections.
func (c *Cluster) reapLoop() {
	every := min(c.cfg.IdleTimeout/2, 5*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case now := <-t.C:
			c.mu.Lock()
			all := append([]*broker(nil), c.seeds...)
			for _, b := range c.brokers {
				all = append(all, b)
			}
			keep := c.retired[:0]
			for _, b := range c.retired {
				if !b.drained() {
					keep = append(keep, b)
				}
			}
			clear(c.retired[len(keep):])
			c.retired = keep
			c.mu.Unlock()
			for _, b := range all {
				b.closeIdle(now, c.cfg.IdleTimeout)
			}
		}
	}
}

// applyBrokerChanges retires brokers that left or moved and creates
// entries for new ones; nothing is dialed here.
func (c *Cluster) applyBrokerChanges(changes []BrokerChange) {
	var retire []*broker
	c.mu.Lock()
	for _, ch := range changes {
		if ch.OldAddr != "" {
			if b, ok := c.brokers[ch.NodeID]; ok {
				retire = append(retire, b)
				delete(c.brokers, ch.NodeID)
			}
		}
		if ch.NewAddr != "" && !c.life.Closing() {
			c.brokers[ch.NodeID] = &broker{cl: c, nodeID: ch.NodeID, addr: ch.NewAddr}
		}
	}
	c.mu.Unlock()
	for _, b := range retire {
		c.log.Info("broker retired", "node", b.nodeID, "broker", b.addr)
		b.retire()
	}
	if len(retire) > 0 {
		// Their draining connections still belong to us: Close must
		// close them too.
		c.mu.Lock()
		c.retired = append(c.retired, retire...)
		c.mu.Unlock()
	}
}

// anyCandidates lists addresses an "any broker" request may use, known
// brokers first (they are the live cluster), then seeds, each group
// shuffled; addresses backing
// off are left out, but if that leaves nothing, everything is tried so a
// caller never fails without a single attempt.
func (c *Cluster) anyCandidates() ([]*broker, map[string]error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	var ready, all []*broker
	known := make([]*broker, 0, len(c.brokers))
	for _, b := range c.brokers {
		known = append(known, b)
	}
	rand.Shuffle(len(known), func(i, j int) { known[i], known[j] = known[j], known[i] })
	// Seeds are shuffled too, as the Java client does: load spreads
	// across them, and with staggered dialing each dead seed ahead of a
	// live one costs one stagger delay, never a TCP timeout.
	seeds := append([]*broker(nil), c.seeds...)
	rand.Shuffle(len(seeds), func(i, j int) { seeds[i], seeds[j] = seeds[j], seeds[i] })
	skipped := map[string]error{}
	for _, b := range append(known, seeds...) {
		all = append(all, b)
		if c.tracker.Ready(b.addr, now) {
			ready = append(ready, b)
		} else if err := c.lastErrs[b.addr]; err != nil {
			skipped[b.addr] = err
		}
	}
	if len(ready) == 0 {
		return all, nil
	}
	return ready, skipped
}

// AnyConn returns a ready connection of class Other to some broker: an
// open one if any exists, otherwise the winner of a staggered parallel dial
// over known brokers and seeds. Failure is an *UnreachableError listing
// every address tried and why.
func (c *Cluster) AnyConn(ctx context.Context) (*conn.Conn, error) {
	if err := c.ctx.Err(); err != nil {
		return nil, errs.ErrClientClosed
	}
	cands, skipped := c.anyCandidates()
	for _, b := range cands {
		if cn := b.liveConn(ClassOther); cn != nil {
			return cn, nil
		}
	}
	list := make([]candidate, len(cands))
	for i, b := range cands {
		list[i] = candidate{addr: b.addr, nodeID: b.nodeID}
	}
	// The race runs under both the caller's and the cluster's lifetime.
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	unwatch := context.AfterFunc(c.ctx, stop)
	defer unwatch()
	win, cn, dialErrs := raceDial(rctx, list, c.cfg.DialStagger, c.cfg.DialGrace, func(ctx context.Context, cd candidate, connected func()) (*conn.Conn, error) {
		c.dialStarted(cd)
		defer c.dialEnded(cd.addr)
		cn, err := conn.DialNotify(ctx, c.connCfg, cd.addr, cd.nodeID, connected)
		if ctx.Err() == nil || err == nil {
			c.recordDial(cd.addr, err)
		}
		return cn, err
	})
	if win >= 0 {
		return cands[win].adopt(ClassOther, cn), nil
	}
	if c.ctx.Err() != nil {
		return nil, errs.ErrClientClosed
	}
	ue := &UnreachableError{}
	for i, b := range cands {
		e := dialErrs[i]
		if e == nil {
			if ctx.Err() != nil {
				e = fmt.Errorf("not tried: %w", ctx.Err())
			} else {
				continue
			}
		}
		ue.Addrs = append(ue.Addrs, AddrError{Addr: b.addr, NodeID: b.nodeID, Err: e})
	}
	for addr, e := range skipped {
		ue.Addrs = append(ue.Addrs, AddrError{Addr: addr, NodeID: -1, Err: fmt.Errorf("backing off after: %w", e)})
	}
	if ctx.Err() != nil {
		ue.Ctx = ctx.Err()
	}
	return nil, ue
}

// RequestAny sends req to any broker, retrying retriable failures within
// the retry budget.
func (c *Cluster) RequestAny(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	var resp kmsg.Response
	err := c.Retry(ctx, func(ctx context.Context) error {
		var err error
		resp, err = c.RequestAnyOnce(ctx, req)
		return err
	})
	return resp, err
}

// RequestAnyOnce sends req to any broker once, for callers that retry
// themselves.
func (c *Cluster) RequestAnyOnce(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	cn, err := c.AnyConn(ctx)
	if err != nil {
		return nil, err
	}
	return cn.Request(ctx, req)
}

type inflightDial struct {
	n      int // concurrent dials of the address
	nodeID int32
	since  time.Time
}

func (c *Cluster) dialStarted(cd candidate) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.dialing[cd.addr]
	if d == nil {
		d = &inflightDial{nodeID: cd.nodeID, since: time.Now()}
		c.dialing[cd.addr] = d
	}
	d.n++
}

func (c *Cluster) dialEnded(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := c.dialing[addr]; d != nil {
		if d.n--; d.n == 0 {
			delete(c.dialing, addr)
		}
	}
}

// dialsInFlight reports, for a caller that stopped waiting with ctxErr,
// the "any broker" dials still running and the known addresses backing off
// after a failure, or nil if no dial is running.
func (c *Cluster) dialsInFlight(ctxErr error) *UnreachableError {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.dialing) == 0 {
		return nil
	}
	ue := &UnreachableError{Ctx: ctxErr}
	now := time.Now()
	for addr, d := range c.dialing {
		ue.Addrs = append(ue.Addrs, AddrError{Addr: addr, NodeID: d.nodeID, Err: &conn.DialError{
			Addr: addr, Stage: conn.StageDial,
			Err: fmt.Errorf("no answer after %v: %w", now.Sub(d.since).Round(time.Millisecond), ctxErr),
		}})
	}
	known := append([]*broker(nil), c.seeds...)
	for _, b := range c.brokers {
		known = append(known, b)
	}
	listed := map[string]bool{}
	for _, b := range known {
		if e := c.lastErrs[b.addr]; e != nil && c.dialing[b.addr] == nil && !listed[b.addr] {
			listed[b.addr] = true
			ue.Addrs = append(ue.Addrs, AddrError{Addr: b.addr, NodeID: b.nodeID, Err: fmt.Errorf("backing off after: %w", e)})
		}
	}
	slices.SortFunc(ue.Addrs, func(a, b AddrError) int { return strings.Compare(a.Addr, b.Addr) })
	return ue
}
