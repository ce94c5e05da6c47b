package conn

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/wire"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeBroker is a loopback listener whose connections are answered by a
// per-test serve function, byte for byte. It exists to misbehave in ways a
// real broker (or kfake) never would.
type fakeBroker struct {
	ln    net.Listener
	serve func(*brokerConn)
	done  chan struct{} // closed on cleanup; serve functions that block select on it

	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

func newFakeBroker(t *testing.T, serve func(*brokerConn)) *fakeBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	fb := &fakeBroker{ln: ln, serve: serve, done: make(chan struct{})}
	fb.wg.Add(1)
	go fb.acceptLoop()
	t.Cleanup(fb.close)
	return fb
}

func (fb *fakeBroker) Addr() string { return fb.ln.Addr().String() }

func (fb *fakeBroker) acceptLoop() {
	defer fb.wg.Done()
	for {
		nc, err := fb.ln.Accept()
		if err != nil {
			return
		}
		fb.mu.Lock()
		if fb.closed {
			fb.mu.Unlock()
			nc.Close()
			return
		}
		fb.conns = append(fb.conns, nc)
		fb.wg.Add(1)
		fb.mu.Unlock()
		go func() {
			defer fb.wg.Done()
			defer nc.Close()
			fb.serve(&brokerConn{Conn: nc, done: fb.done})
		}()
	}
}

func (fb *fakeBroker) close() {
	fb.mu.Lock()
	fb.closed = true
	close(fb.done)
	for _, nc := range fb.conns {
		nc.Close()
	}
	fb.mu.Unlock()
	fb.ln.Close()
	fb.wg.Wait()
}

// brokerConn is the broker's side of one connection.
type brokerConn struct {
	net.Conn
	done <-chan struct{}
}

// request is a request as the fake broker saw it.
type request struct {
	key, version int16
	corr         int32
	req          kmsg.Request // decoded body
}

// flexible reports whether the response to r carries a tag buffer.
func (r request) flexible() bool {
	return r.req.IsFlexible() && r.key != 18
}

// read reads and decodes the next request.
func (bc *brokerConn) read() (request, error) {
	body, err := wire.ReadFrame(bc, 0, nil, 0)
	if err != nil {
		return request{}, err
	}
	rd := kbin.Reader{Src: body}
	r := request{key: rd.Int16(), version: rd.Int16(), corr: rd.Int32()}
	rd.NullableString() // client id
	if err := rd.Complete(); err != nil {
		return request{}, fmt.Errorf("request header: %w", err)
	}
	r.req = kmsg.RequestForKey(r.key)
	if r.req == nil {
		return request{}, fmt.Errorf("unknown key %d", r.key)
	}
	r.req.SetVersion(r.version)
	if r.req.IsFlexible() {
		kmsg.SkipTags(&rd)
	}
	if err := r.req.ReadFrom(rd.Src); err != nil {
		return request{}, fmt.Errorf("%s v%d: %w", kmsg.NameForKey(r.key), r.version, err)
	}
	return r, nil
}

// respond answers r with resp encoded at r's version.
func (bc *brokerConn) respond(r request, resp kmsg.Response) error {
	resp.SetVersion(r.version)
	_, err := bc.Write(frameResponse(r.corr, resp))
	return err
}

// writeRaw writes a response frame around body: size, correlation id, and
// an empty tag buffer when flexible.
func (bc *brokerConn) writeRaw(corr int32, flexible bool, body []byte) error {
	_, err := bc.Write(rawFrame(corr, flexible, body))
	return err
}

// wait blocks until ch is closed or the broker shuts down; false means the
// latter.
func (bc *brokerConn) wait(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-bc.done:
		return false
	}
}

// handshake answers the client's ApiVersions requests with fakeVersions,
// leaving the connection ready for the test's own exchange.
func (bc *brokerConn) handshake() error {
	r, err := bc.read()
	if err != nil {
		return err
	}
	if r.key != 18 {
		return fmt.Errorf("first request is %s, not ApiVersions", kmsg.NameForKey(r.key))
	}
	return bc.respond(r, fakeVersions())
}

// serveMetadata answers ApiVersions and Metadata forever, naming the
// cluster clusterID; for other keys it returns.
func (bc *brokerConn) serveMetadata(clusterID string) {
	for {
		r, err := bc.read()
		if err != nil {
			return
		}
		switch r.key {
		case 18:
			err = bc.respond(r, fakeVersions())
		case 3:
			err = bc.respond(r, metadataResp(clusterID))
		default:
			return
		}
		if err != nil {
			return
		}
	}
}

// rawFrame frames a response body by hand.
func rawFrame(corr int32, flexible bool, body []byte) []byte {
	b := make([]byte, 8, 9+len(body))
	binary.BigEndian.PutUint32(b[4:], uint32(corr))
	if flexible {
		b = append(b, 0)
	}
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// frameResponse frames resp as a broker does: ApiVersions responses never
// carry a header tag buffer, other flexible responses do.
func frameResponse(corr int32, resp kmsg.Response) []byte {
	return rawFrame(corr, resp.IsFlexible() && resp.Key() != 18, resp.AppendTo(nil))
}

// fakeVersions is what the fake broker supports: Produce, Metadata and
// ApiVersions, with ApiVersions up to kmsg's own max.
func fakeVersions() *kmsg.ApiVersionsResponse {
	return apiVersionsResp(0, kmsg.NewPtrApiVersionsRequest().MaxVersion())
}

func apiVersionsResp(errCode, apiVersionsMax int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ErrorCode = errCode
	add := func(key, lo, hi int16) {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = key, lo, hi
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	add(18, 0, apiVersionsMax)
	if errCode == 0 {
		add(0, 3, 9)
		add(3, 0, 12)
	}
	return resp
}

func metadataResp(clusterID string) *kmsg.MetadataResponse {
	resp := kmsg.NewPtrMetadataResponse()
	resp.ClusterID = kmsg.StringPtr(clusterID)
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = 1, "127.0.0.1", 9092
	resp.Brokers = append(resp.Brokers, b)
	resp.ControllerID = 1
	return resp
}

func metadataReq(topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range topics {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, t)
	}
	return req
}

func clusterID(t *testing.T, resp kmsg.Response) string {
	t.Helper()
	md, ok := resp.(*kmsg.MetadataResponse)
	if !ok {
		t.Fatalf("response is %T, want *kmsg.MetadataResponse", resp)
	}
	if md.ClusterID == nil {
		return "<nil>"
	}
	return *md.ClusterID
}

// testConfig is a config with timeouts short enough that a hang fails the
// test instead of stalling it, and long enough never to fire by accident.
func testConfig() *Config {
	return &Config{
		ClientID:       "riffle-conn-test",
		DialTimeout:    5 * time.Second,
		RequestTimeout: 5 * time.Second,
	}
}

// mustDial dials addr and closes the Conn on cleanup.
func mustDial(t *testing.T, cfg *Config, addr string) *Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, cfg, addr, 1)
	if err != nil {
		t.Fatalf("Dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// dialErr dials addr expecting failure and returns the *DialError.
func dialErr(t *testing.T, ctx context.Context, cfg *Config, addr string) *DialError {
	t.Helper()
	c, err := Dial(ctx, cfg, addr, 1)
	if err == nil {
		c.Close()
		t.Fatalf("Dial %s succeeded, want an error", addr)
	}
	var de *DialError
	if !errors.As(err, &de) {
		t.Fatalf("Dial error %v (%T) is not a *DialError", err, err)
	}
	if de.Addr != addr {
		t.Errorf("DialError.Addr = %q, want %q", de.Addr, addr)
	}
	return de
}

// async runs f in a goroutine and returns a channel with its result.
func async(f func() (kmsg.Response, error)) <-chan asyncResult {
	ch := make(chan asyncResult, 1)
	go func() {
		resp, err := f()
		ch <- asyncResult{resp, err}
	}()
	return ch
}

type asyncResult struct {
	resp kmsg.Response
	err  error
}

// await waits for a result, failing the test if it takes longer than d:
// every wait is bounded so a regression fails instead of hanging.
func await[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("%s: still waiting after %v", what, d)
		panic("unreachable")
	}
}

// awaitClosed fails the test unless c closes within d.
func awaitClosed(t *testing.T, c *Conn, d time.Duration) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(d):
		t.Fatalf("connection still open after %v", d)
	}
}

// selfSigned returns a server certificate for 127.0.0.1 and a pool that
// trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(now.UnixNano()),
		Subject:               pkix.Name{CommonName: "riffle conn test"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// recObserver records every Observer event.
type recObserver struct {
	mu     sync.Mutex
	events []obsEvent
}

type obsEvent struct {
	kind          string // connected, disconnected, request, throttled
	addr          string
	node          int32
	key           int16
	written, read int
	d             time.Duration
	err           error
}

func (o *recObserver) add(e obsEvent) {
	o.mu.Lock()
	o.events = append(o.events, e)
	o.mu.Unlock()
}

func (o *recObserver) Connected(addr string, node int32, d time.Duration, err error) {
	o.add(obsEvent{kind: "connected", addr: addr, node: node, d: d, err: err})
}

func (o *recObserver) Disconnected(addr string, node int32, err error) {
	o.add(obsEvent{kind: "disconnected", addr: addr, node: node, err: err})
}

func (o *recObserver) Request(addr string, node int32, key int16, written, read int, d time.Duration, err error) {
	o.add(obsEvent{kind: "request", addr: addr, node: node, key: key, written: written, read: read, d: d, err: err})
}

func (o *recObserver) Throttled(addr string, node int32, d time.Duration) {
	o.add(obsEvent{kind: "throttled", addr: addr, node: node, d: d})
}

func (o *recObserver) snapshot() []obsEvent {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]obsEvent(nil), o.events...)
}

func (o *recObserver) of(kind string) []obsEvent {
	var out []obsEvent
	for _, e := range o.snapshot() {
		if e.kind == kind {
			out = append(out, e)
		}
	}
	return out
}
