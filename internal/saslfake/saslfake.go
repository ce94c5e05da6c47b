// Package saslfake is a test helper: a SASL front for Kafka brokers on
// loopback. It accepts client connections, authenticates them itself
// (OAUTHBEARER, PLAIN, or any mechanism through a validator), grants
// sessions of a configurable lifetime (KIP-368) and handles
// re-authentication on open connections, and forwards every other request
// frame to a backend broker (kfake, which has neither OAUTHBEARER nor
// session lifetimes), rewriting the broker addresses in Metadata,
// FindCoordinator and DescribeCluster answers so clients stay behind it.
//
// Like a Kafka broker, it answers only ApiVersions and SASL before a
// connection authenticates, and it closes a connection that sends any
// other request after its session ended (counted in Stats.Expired). A
// broker judges by when it gets to a request; the fake judges by when the
// request arrived, so that its own slowness (it forwards one request at a
// time) is not blamed on the client.
package saslfake

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/riffle-go/riffle/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Auth is one authentication the fake was asked to accept.
type Auth struct {
	Mechanism string
	Bytes     []byte // the client's (first) SaslAuthenticate bytes
	Reauth    bool   // an open connection re-authenticating
	Conn      int    // the fake's number for the client connection

	// OAUTHBEARER: the parsed client message.
	Token, Principal string
	Extensions       map[string]string
	// PLAIN: the parsed client message.
	User, Pass string
}

// Config configures a Fake.
type Config struct {
	// Mechanisms are accepted in SaslHandshake (default: OAUTHBEARER).
	Mechanisms []string
	// Validate accepts or rejects an authentication; nil accepts all. Its
	// reply, if any, is the server's final message. A rejection's text is
	// the status of the RFC 7628 error for OAUTHBEARER and the error
	// message of SaslAuthenticate for the other mechanisms.
	Validate func(Auth) (reply []byte, err error)
	// SessionLifetime is the session granted (0: unlimited).
	SessionLifetime time.Duration
}

// Stats counts what the fake saw.
type Stats struct {
	Authentications   int           // successful first authentications
	Reauthentications int           // successful re-authentications
	MaxReauthsPerConn int           // the most re-authentications of one connection
	Rejected          int           // failed authentications
	Expired           int           // connections closed for a request after their session ended
	ExpiredBy         time.Duration // the latest such request came this long after the session's end
	ExpiredKey        int16         // and was of this API key
	ExpiredReauths    int           // on a connection re-authenticated this often
	Forwarded         int           // requests forwarded to the backend
}

// Fake fronts backend brokers; each has a listener of its own.
type Fake struct {
	cfg   Config
	lns   []net.Listener
	front map[string]string // backend host:port -> fake host:port

	mu      sync.Mutex
	stats   Stats
	changed chan struct{} // closed and replaced on every stats change
	conns   map[int]io.Closer
	nconns  int
	closed  bool
	wg      sync.WaitGroup
}

// New starts a fake in front of each backend address.
func New(backends []string, cfg Config) (*Fake, error) {
	if len(cfg.Mechanisms) == 0 {
		cfg.Mechanisms = []string{"OAUTHBEARER"}
	}
	f := &Fake{cfg: cfg, front: map[string]string{}, changed: make(chan struct{}), conns: map[int]io.Closer{}}
	for _, b := range backends {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			f.Close()
			return nil, err
		}
		f.lns = append(f.lns, ln)
		f.front[b] = ln.Addr().String()
	}
	for i, ln := range f.lns {
		f.wg.Add(1)
		go f.accept(ln, backends[i])
	}
	return f, nil
}

// Addrs are the fake's addresses, one per backend, in order.
func (f *Fake) Addrs() []string {
	var a []string
	for _, ln := range f.lns {
		a = append(a, ln.Addr().String())
	}
	return a
}

// Stats returns the counters so far.
func (f *Fake) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// WaitFor waits until cond holds for the stats, or ctx ends.
func (f *Fake) WaitFor(ctx context.Context, cond func(Stats) bool) (Stats, error) {
	for {
		f.mu.Lock()
		s, ch := f.stats, f.changed
		f.mu.Unlock()
		if cond(s) {
			return s, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return s, fmt.Errorf("saslfake: waiting for %+v: %w", s, ctx.Err())
		}
	}
}

func (f *Fake) update(fn func(*Stats)) {
	f.mu.Lock()
	fn(&f.stats)
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

// Close stops the listeners, closes every connection and waits.
func (f *Fake) Close() {
	f.mu.Lock()
	f.closed = true
	for _, c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	for _, ln := range f.lns {
		ln.Close()
	}
	f.wg.Wait()
}

func (f *Fake) accept(ln net.Listener, backend string) {
	defer f.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			nc.Close()
			return
		}
		f.nconns++
		id := f.nconns
		f.conns[id] = nc
		f.wg.Add(1)
		f.mu.Unlock()
		go func() {
			defer f.wg.Done()
			c := &fconn{f: f, id: id, client: nc, backendAddr: backend}
			c.serve()
			nc.Close()
			if c.backend != nil {
				c.backend.Close()
			}
			f.mu.Lock()
			delete(f.conns, id)
			delete(f.conns, -id)
			f.mu.Unlock()
		}()
	}
}

// fconn is one client connection, served one request at a time.
type fconn struct {
	f           *Fake
	id          int
	client      net.Conn
	backendAddr string
	backend     net.Conn

	mech        string // from the last SaslHandshake
	handshaken  bool   // a SaslHandshake awaits its SaslAuthenticate
	authed      bool   // a session was granted once
	reauth      bool   // the exchange in progress is a re-authentication
	failedOAuth bool   // an OAUTHBEARER error was sent; 0x01 expected
	oauthError  string // that error, the final error message
	expiry      time.Time
	reauths     int
}

// header is a parsed request header.
type header struct {
	key, version int16
	corrID       int32
	flexible     bool
	body         []byte
}

// arrival is a request frame and when it arrived.
type arrival struct {
	frame []byte
	at    time.Time
}

// read reads frames as they arrive, so that a session's end is judged by
// when the client sent a request, not by how long the fake took to get to
// it (forwarding is one request at a time).
func (c *fconn) read(out chan<- arrival, done <-chan struct{}) {
	defer close(out)
	for {
		frame, err := wire.ReadFrame(c.client, 100<<20, nil, 0)
		if err != nil {
			return
		}
		select {
		case out <- arrival{frame, time.Now()}:
		case <-done:
			return
		}
	}
}

func (c *fconn) serve() {
	frames := make(chan arrival, 64)
	done := make(chan struct{})
	var reader sync.WaitGroup
	reader.Add(1)
	go func() { defer reader.Done(); c.read(frames, done) }()
	defer func() {
		close(done)
		c.client.Close()
		reader.Wait()
	}()
	for a := range frames {
		frame := a.frame
		h, err := parseHeader(frame)
		if err != nil {
			return
		}
		switch h.key {
		case 17: // SaslHandshake
			if !c.handshake(h) {
				return
			}
		case 36: // SaslAuthenticate
			if !c.authenticate(h) {
				return
			}
		default:
			if h.key != 18 && !c.authed {
				return // a broker closes unauthenticated connections asking for more
			}
			if h.key != 18 && c.f.cfg.SessionLifetime > 0 && a.at.After(c.expiry) {
				c.f.update(func(s *Stats) {
					s.Expired++
					s.ExpiredBy, s.ExpiredKey, s.ExpiredReauths = a.at.Sub(c.expiry), h.key, c.reauths
				})
				return
			}
			if !c.forward(h, frame) {
				return
			}
		}
	}
}

func parseHeader(frame []byte) (header, error) {
	if len(frame) < 10 {
		return header{}, errors.New("short header")
	}
	h := header{
		key:     int16(binary.BigEndian.Uint16(frame)),
		version: int16(binary.BigEndian.Uint16(frame[2:])),
		corrID:  int32(binary.BigEndian.Uint32(frame[4:])),
	}
	rest := frame[8:]
	if n := int16(binary.BigEndian.Uint16(rest)); n > 0 {
		if len(rest) < 2+int(n) {
			return header{}, errors.New("short client id")
		}
		rest = rest[2+int(n):]
	} else {
		rest = rest[2:]
	}
	req := kmsg.RequestForKey(h.key)
	if req == nil {
		return header{}, fmt.Errorf("unknown key %d", h.key)
	}
	req.SetVersion(h.version)
	h.flexible = req.IsFlexible()
	if h.flexible {
		var err error
		if rest, err = skipTags(rest); err != nil {
			return header{}, err
		}
	}
	h.body = rest
	return h, nil
}

func skipTags(b []byte) ([]byte, error) {
	n, l := binary.Uvarint(b)
	if l <= 0 {
		return nil, errors.New("bad tags")
	}
	b = b[l:]
	for range n {
		if _, l = binary.Uvarint(b); l <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[l:]
		size, l := binary.Uvarint(b)
		if l <= 0 || uint64(len(b)-l) < size {
			return nil, errors.New("bad tag size")
		}
		b = b[l+int(size):]
	}
	return b, nil
}

// reply writes resp as the answer to h.
func (c *fconn) reply(h header, resp kmsg.Response) bool {
	resp.SetVersion(h.version)
	out := make([]byte, 8, 64)
	binary.BigEndian.PutUint32(out[4:], uint32(h.corrID))
	if h.flexible && h.key != 18 {
		out = append(out, 0)
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	_, err := c.client.Write(out)
	return err == nil
}

func (c *fconn) handshake(h header) bool {
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.SetVersion(h.version)
	if req.ReadFrom(h.body) != nil {
		return false
	}
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.SupportedMechanisms = c.f.cfg.Mechanisms
	ok := false
	for _, m := range c.f.cfg.Mechanisms {
		ok = ok || m == req.Mechanism
	}
	if !ok {
		resp.ErrorCode = 33 // UNSUPPORTED_SASL_MECHANISM
		c.reply(h, resp)
		return false
	}
	c.mech, c.handshaken, c.reauth = req.Mechanism, true, c.authed
	return c.reply(h, resp)
}

func (c *fconn) authenticate(h header) bool {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SetVersion(h.version)
	if req.ReadFrom(h.body) != nil || !c.handshaken {
		return false
	}
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	fail := func(msg string) bool {
		c.f.update(func(s *Stats) { s.Rejected++ })
		resp.ErrorCode = 58 // SASL_AUTHENTICATION_FAILED
		resp.ErrorMessage = &msg
		c.reply(h, resp)
		return false // a broker closes the connection after a failure
	}
	if c.failedOAuth {
		if string(req.SASLAuthBytes) != "\x01" {
			return fail("expected 0x01 after the error message")
		}
		return fail(c.oauthError)
	}
	a := Auth{Mechanism: c.mech, Bytes: req.SASLAuthBytes, Reauth: c.reauth, Conn: c.id}
	switch c.mech {
	case "OAUTHBEARER":
		if err := parseOAuthBearer(req.SASLAuthBytes, &a); err != nil {
			return fail(err.Error())
		}
	case "PLAIN":
		parts := strings.Split(string(req.SASLAuthBytes), "\x00")
		if len(parts) != 3 {
			return fail("malformed PLAIN message")
		}
		a.User, a.Pass = parts[1], parts[2]
	}
	var reply []byte
	var err error
	if c.f.cfg.Validate != nil {
		reply, err = c.f.cfg.Validate(a)
	}
	if err != nil {
		if c.mech == "OAUTHBEARER" {
			js, _ := json.Marshal(map[string]string{"status": err.Error()})
			c.failedOAuth, c.oauthError = true, string(js)
			resp.SASLAuthBytes = js
			return c.reply(h, resp)
		}
		return fail(err.Error())
	}
	c.handshaken = false
	if lt := c.f.cfg.SessionLifetime; lt > 0 {
		c.expiry = time.Now().Add(lt)
		resp.SessionLifetimeMillis = lt.Milliseconds()
	}
	resp.SASLAuthBytes = reply
	if c.reauth {
		c.reauths++
		n := c.reauths
		c.f.update(func(s *Stats) { s.Reauthentications++; s.MaxReauthsPerConn = max(s.MaxReauthsPerConn, n) })
	} else {
		c.f.update(func(s *Stats) { s.Authentications++ })
	}
	c.authed = true
	return c.reply(h, resp)
}

// parseOAuthBearer reads "n,[a=authzid],^Aauth=Bearer tok[^Ak=v]...^A^A".
func parseOAuthBearer(b []byte, a *Auth) error {
	s := string(b)
	gs2, rest, ok := strings.Cut(s, ",\x01")
	if !ok || !strings.HasPrefix(gs2, "n,") || !strings.HasSuffix(rest, "\x01\x01") {
		return errors.New("malformed OAUTHBEARER message")
	}
	a.Principal = strings.TrimPrefix(strings.TrimPrefix(gs2, "n,"), "a=")
	a.Extensions = map[string]string{}
	for _, kv := range strings.Split(strings.TrimSuffix(rest, "\x01\x01"), "\x01") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return errors.New("malformed OAUTHBEARER key/value")
		}
		if k == "auth" {
			tok, ok := strings.CutPrefix(v, "Bearer ")
			if !ok {
				return errors.New("OAUTHBEARER auth is not Bearer")
			}
			a.Token = tok
			continue
		}
		a.Extensions[k] = v
	}
	if a.Token == "" {
		return errors.New("OAUTHBEARER message without a token")
	}
	return nil
}

// forward sends frame to the backend and its answer back, rewriting broker
// addresses.
func (c *fconn) forward(h header, frame []byte) bool {
	if c.backend == nil {
		nc, err := net.Dial("tcp", c.backendAddr)
		if err != nil {
			return false
		}
		c.f.mu.Lock()
		if c.f.closed {
			c.f.mu.Unlock()
			nc.Close()
			return false
		}
		c.f.conns[-c.id] = nc
		c.f.mu.Unlock()
		c.backend = nc
	}
	out := make([]byte, 4+len(frame))
	binary.BigEndian.PutUint32(out, uint32(len(frame)))
	copy(out[4:], frame)
	if _, err := c.backend.Write(out); err != nil {
		return false
	}
	body, err := wire.ReadFrame(c.backend, 100<<20, nil, 0)
	if err != nil {
		return false
	}
	c.f.update(func(s *Stats) { s.Forwarded++ })
	if body, err = c.rewrite(h, body); err != nil {
		return false
	}
	out = make([]byte, 4, 4+len(body))
	binary.BigEndian.PutUint32(out, uint32(len(body)))
	_, err = c.client.Write(append(out, body...))
	return err == nil
}

// rewrite points the broker addresses of a response at the fake.
func (c *fconn) rewrite(h header, frame []byte) ([]byte, error) {
	if h.key != 3 && h.key != 10 && h.key != 60 {
		return frame, nil
	}
	hdrLen := 4
	body := frame[4:]
	if h.flexible {
		rest, err := skipTags(body)
		if err != nil {
			return nil, err
		}
		hdrLen += len(body) - len(rest)
		body = rest
	}
	req := kmsg.RequestForKey(h.key)
	req.SetVersion(h.version)
	resp := req.ResponseKind()
	resp.SetVersion(h.version)
	if err := resp.ReadFrom(body); err != nil {
		return nil, err
	}
	fix := func(host *string, port *int32) {
		if fa, ok := c.f.front[net.JoinHostPort(*host, strconv.Itoa(int(*port)))]; ok {
			fh, fp, _ := net.SplitHostPort(fa)
			p, _ := strconv.Atoi(fp)
			*host, *port = fh, int32(p)
		}
	}
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		for i := range r.Brokers {
			fix(&r.Brokers[i].Host, &r.Brokers[i].Port)
		}
	case *kmsg.FindCoordinatorResponse:
		fix(&r.Host, &r.Port)
		for i := range r.Coordinators {
			fix(&r.Coordinators[i].Host, &r.Coordinators[i].Port)
		}
	case *kmsg.DescribeClusterResponse:
		for i := range r.Brokers {
			fix(&r.Brokers[i].Host, &r.Brokers[i].Port)
		}
	}
	return resp.AppendTo(append([]byte(nil), frame[:hdrLen]...)), nil
}
