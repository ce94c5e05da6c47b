package conn

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/riffle-go/riffle/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Dial connects to addr and runs the handshake: TLS, ApiVersions, SASL. The
// returned Conn is ready for requests. Every step honours ctx; nothing
// outlives a failed dial.
func Dial(ctx context.Context, cfg *Config, addr string, nodeID int32) (*Conn, error) {
	return DialNotify(ctx, cfg, addr, nodeID, nil)
}

// DialNotify is Dial calling connected (unless nil) once the TCP connection
// is up, before the handshake: a dial race uses it to tell a live host in
// a slow handshake from a dead one.
func DialNotify(ctx context.Context, cfg *Config, addr string, nodeID int32, connected func()) (*Conn, error) {
	start := time.Now()
	c, err := dial(ctx, cfg, addr, nodeID, connected)
	if cfg.Observer != nil {
		cfg.Observer.Connected(addr, nodeID, time.Since(start), err)
	}
	if err != nil {
		cfg.logger().Debug("connect failed", "broker", addr, "node", nodeID, "err", err)
		return nil, err
	}
	cfg.logger().Debug("connected", "broker", addr, "node", nodeID, "took", time.Since(start))
	return c, nil
}

func dial(ctx context.Context, cfg *Config, addr string, nodeID int32, connected func()) (*Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, cfg.dialTimeout())
	defer cancel()
	var nc net.Conn
	var err error
	if cfg.Dial != nil {
		nc, err = cfg.Dial(dctx, "tcp", addr)
	} else {
		d := net.Dialer{KeepAlive: 30 * time.Second}
		nc, err = d.DialContext(dctx, "tcp", addr)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, &DialError{Addr: addr, Stage: StageDial, Err: ctx.Err()}
		}
		return nil, &DialError{Addr: addr, Stage: StageDial, Err: err}
	}
	if connected != nil {
		connected()
	}
	// Bound the whole handshake by the dial context: a broker that accepts
	// and then says nothing must not hold us past it.
	stop := context.AfterFunc(dctx, func() { nc.SetDeadline(time.Now()) })
	fail := func(stage Stage, err error) (*Conn, error) {
		stop()
		nc.Close()
		if ctx.Err() != nil && !errors.Is(err, errs.ErrAuth) {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return nil, &DialError{Addr: addr, Stage: stage, Err: err}
	}
	if d, ok := dctx.Deadline(); ok {
		nc.SetDeadline(d)
	}
	if cfg.TLS != nil {
		tc := cfg.TLS.Clone()
		if tc.ServerName == "" {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				tc.ServerName = host
			}
		}
		tlsConn := tls.Client(nc, tc)
		if err := tlsConn.HandshakeContext(dctx); err != nil {
			return fail(StageTLS, explainTLSFailure(err))
		}
		nc = tlsConn
	}
	h := &handshake{cfg: cfg, nc: nc, addr: addr, tlsOn: cfg.TLS != nil}
	avResp, err := h.apiVersions()
	if err != nil {
		return fail(StageAPIVersions, err)
	}
	vers := newVersions(avResp, cfg.MaxVersions, cfg.IDMaxVersions)
	var sess session
	if cfg.SASL != nil {
		sess, err = authenticate(dctx, cfg.SASL, SASLBroker{Addr: addr, NodeID: nodeID}, &vers, h.roundTrip)
		if err != nil {
			return fail(StageSASL, err)
		}
	}
	if !stop() {
		// The context ended as the handshake finished; the deadline may
		// already be poisoned.
		nc.Close()
		return nil, &DialError{Addr: addr, Stage: StageAPIVersions, Err: dctx.Err()}
	}
	nc.SetDeadline(time.Time{})
	c := &Conn{
		cfg:     cfg,
		addr:    addr,
		nodeID:  nodeID,
		nc:      nc,
		vers:    vers,
		sem:     make(chan struct{}, cfg.maxInflight()),
		pending: make(chan *call, cfg.maxInflight()),
		nextID:  h.nextID,
		closed:  make(chan struct{}),
		wlock:   make(chan struct{}, 1),
		id:      connIDs.Add(1),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.touch()
	c.readerWG.Add(1)
	go c.readLoop()
	if sess.lifetime > 0 {
		c.readerWG.Add(1)
		go c.reauthLoop(sess)
	}
	return c, nil
}

// handshake exchanges requests one at a time before the reader starts.
type handshake struct {
	cfg    *Config
	nc     net.Conn
	addr   string
	nextID int32
	buf    []byte
	tlsOn  bool
}

func (h *handshake) roundTrip(req kmsg.Request) ([]byte, error) {
	h.nextID++
	frame := h.cfg.formatter().Append(nil, req)
	wire.SetCorrelationID(frame, h.nextID)
	if _, err := h.nc.Write(frame); err != nil {
		return nil, err
	}
	var r io.Reader = h.nc
	if h.nextID == 1 {
		// The peer's first answer tells whether it speaks Kafka at all.
		var hdr [4]byte
		n, err := io.ReadFull(h.nc, hdr[:])
		switch {
		case err == nil:
			if nk := sniffFirstFrame(hdr, h.tlsOn); nk != nil {
				return nil, nk
			}
		case !errors.Is(err, io.ErrUnexpectedEOF):
			return nil, err
		}
		// ReadFrame reads the prefix again (and reports a short one).
		r = io.MultiReader(bytes.NewReader(hdr[:n]), h.nc)
	}
	body, err := wire.ReadFrame(r, h.cfg.maxFrame(), h.buf[:0], 0)
	if err != nil {
		return nil, err
	}
	h.buf = body
	id, rest, err := wire.SplitResponse(body, wire.ResponseFlexible(req))
	if err != nil {
		return nil, err
	}
	if id != h.nextID {
		return nil, &wire.FrameError{Reason: fmt.Sprintf("correlation id %d, expected %d", id, h.nextID)}
	}
	return rest, nil
}

// apiVersions negotiates from our highest ApiVersions version down to v0.
// A broker that does not know our version answers UNSUPPORTED_VERSION in
// the v0 layout, ideally listing the ApiVersions range it does support
// (KIP-511); other brokers send replies we cannot parse. Either way we step
// down rather than give up on the broker.
func (h *handshake) apiVersions() (*kmsg.ApiVersionsResponse, error) {
	v := kmsg.NewPtrApiVersionsRequest().MaxVersion()
	var lastErr error
	for v >= 0 {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(v)
		req.ClientSoftwareName = orDefault(h.cfg.SoftwareName, "riffle")
		req.ClientSoftwareVersion = orDefault(h.cfg.SoftwareVersion, "dev")
		body, err := h.roundTrip(req)
		if err != nil {
			return nil, err
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.SetVersion(v)
		perr := parse(resp, body)
		if perr == nil && resp.ErrorCode == 0 {
			return resp, nil
		}
		if perr == nil && resp.ErrorCode != kafkaerr.UnsupportedVersion {
			return nil, kafkaerr.ForCode(resp.ErrorCode)
		}
		lastErr = perr
		if perr == nil {
			lastErr = kafkaerr.ForCode(resp.ErrorCode)
		}
		next := v - 1
		r0 := kmsg.NewPtrApiVersionsResponse()
		r0.SetVersion(0)
		if parse(r0, body) == nil && r0.ErrorCode == kafkaerr.UnsupportedVersion {
			for _, k := range r0.ApiKeys {
				if k.ApiKey == 18 && k.MaxVersion < v && k.MaxVersion >= 0 {
					next = k.MaxVersion
				}
			}
		}
		v = next
	}
	return nil, fmt.Errorf("no ApiVersions version accepted: %w: %v", errs.ErrUnsupported, lastErr)
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// Stage names the handshake step a dial failed in.
type Stage string

// Handshake stages.
const (
	StageDial        Stage = "dial"
	StageTLS         Stage = "tls"
	StageAPIVersions Stage = "api versions"
	StageSASL        Stage = "sasl"
)

// DialError is a failed connection attempt to one address.
type DialError struct {
	Addr  string
	Stage Stage
	Err   error
}

func (e *DialError) Error() string {
	return fmt.Sprintf("%s: %s (%s)", e.Addr, e.Cause(), e.Err)
}

func (e *DialError) Unwrap() error { return e.Err }

// Cause classifies the failure in a word or two for "unreachable" reports:
// dial refused, timeout, dns, tls, auth, protocol, cancelled.
func (e *DialError) Cause() string {
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var ne net.Error
	switch {
	case errors.Is(e.Err, errs.ErrAuth):
		return "auth"
	case errors.Is(e.Err, context.Canceled):
		return "cancelled"
	case errors.As(e.Err, &dnsErr):
		return "dns"
	case e.Stage == StageTLS:
		return "tls"
	case errors.Is(e.Err, context.DeadlineExceeded), errors.As(e.Err, &ne) && ne.Timeout():
		return "timeout"
	case e.Stage == StageDial && errors.As(e.Err, &opErr) && isRefused(opErr):
		return "dial refused"
	case e.Stage == StageDial:
		return "dial failed"
	case errors.Is(e.Err, errs.ErrMalformed), errors.Is(e.Err, errs.ErrUnsupported):
		return "protocol"
	}
	return "handshake failed"
}

// Retriable reports whether dialing again may succeed. A certificate the
// client does not trust, a TLS alert from the broker (it rejected our
// certificate or protocol version), bad credentials and a peer that does
// not speak the Kafka protocol (a malformed frame in answer to ApiVersions)
// fail the same way every time. A connection cut mid-frame is a broker
// going away, which can pass.
func (e *DialError) Retriable() bool {
	switch {
	case errors.Is(e.Err, errs.ErrAuth), errors.Is(e.Err, errs.ErrUnsupported):
		return false
	case errors.Is(e.Err, context.Canceled), errors.Is(e.Err, context.DeadlineExceeded):
		return true
	case tlsRejected(e.Err):
		return false
	case e.Stage == StageAPIVersions && errors.Is(e.Err, errs.ErrMalformed) && !truncated(e.Err):
		return false
	}
	return true
}

// tlsRejected reports a TLS failure that repeats on every attempt: our side
// does not trust the broker's certificate, the peer does not speak TLS, or
// the broker sent an alert (it rejected our certificate or parameters).
func tlsRejected(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		header   tls.RecordHeaderError
		op       *net.OpError
	)
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &header) || (errors.As(err, &op) && op.Op == "remote error")
}

// truncated reports a frame cut short by the connection closing.
func truncated(err error) bool {
	var fe *wire.FrameError
	return errors.As(err, &fe) && strings.HasPrefix(fe.Reason, "truncated")
}
