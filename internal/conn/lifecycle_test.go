package conn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCloseWhenIdle retires a connection with a request in flight: the
// request still gets its response, new requests are refused at once, and
// the connection closes when the last response is in.
func TestCloseWhenIdle(t *testing.T) {
	got1, release := make(chan struct{}), make(chan struct{})
	fb := newFakeBroker(t, func(bc *brokerConn) {
		if bc.handshake() != nil {
			return
		}
		r, err := bc.read()
		if err != nil {
			return
		}
		close(got1)
		if !bc.wait(release) || bc.respond(r, metadataResp("in-flight")) != nil {
			return
		}
		bc.serveMetadata("too late") // must never be asked
	})
	obs := &recObserver{}
	cfg := testConfig()
	cfg.Observer = obs
	c := mustDial(t, cfg, fb.Addr())

	first := async(func() (kmsg.Response, error) { return c.Request(context.Background(), metadataReq()) })
	await(t, got1, 2*time.Second, "broker reading the request")
	c.CloseWhenIdle()

	select {
	case <-c.Done():
		t.Fatal("CloseWhenIdle closed the connection with a request in flight")
	case <-time.After(20 * time.Millisecond):
	}
	for range 5 {
		resp, err := c.Request(context.Background(), metadataReq())
		if !errors.Is(err, errs.ErrConnClosed) || resp != nil {
			t.Fatalf("request after CloseWhenIdle = %v, %v; want ErrConnClosed", resp, err)
		}
	}
	if n := c.Inflight(); n != 1 {
		t.Errorf("Inflight = %d, want 1: refused requests must not count", n)
	}

	close(release)
	r := await(t, first, 2*time.Second, "in-flight request")
	if r.err != nil || clusterID(t, r.resp) != "in-flight" {
		t.Fatalf("in-flight request after CloseWhenIdle = %v, %v; want its response", r.resp, r.err)
	}
	awaitClosed(t, c, 2*time.Second)
	if !errors.Is(c.Err(), errs.ErrConnClosed) {
		t.Errorf("Err() = %v, want ErrConnClosed", c.Err())
	}
	if _, err := c.Request(context.Background(), metadataReq()); !errors.Is(err, errs.ErrConnClosed) {
		t.Errorf("request after close: %v", err)
	}
	if n := len(obs.of("disconnected")); n != 1 {
		t.Errorf("%d Disconnected events, want 1", n)
	}
	c.CloseWhenIdle() // idempotent
	c.Close()
}

func TestCloseWhenIdleIdle(t *testing.T) {
	fb := newFakeBroker(t, func(bc *brokerConn) { bc.serveMetadata("x") })
	c := mustDial(t, testConfig(), fb.Addr())
	if _, err := c.Request(context.Background(), metadataReq()); err != nil {
		t.Fatal(err)
	}
	// Straight after a response the connection is idle: Request returns
	// only once the request is no longer counted.
	c.CloseWhenIdle()
	select {
	case <-c.Done():
	default:
		t.Fatalf("CloseWhenIdle on an idle connection (inflight %d) did not close it", c.Inflight())
	}
	if !errors.Is(c.Err(), errs.ErrConnClosed) {
		t.Errorf("Err() = %v", c.Err())
	}
}

// TestCloseFailsInFlight closes a connection whose broker sits on a
// request: the caller gets ErrConnClosed at once.
func TestCloseFailsInFlight(t *testing.T) {
	got1 := make(chan struct{})
	fb := newFakeBroker(t, func(bc *brokerConn) {
		if bc.handshake() != nil {
			return
		}
		if _, err := bc.read(); err != nil {
			return
		}
		close(got1)
		<-bc.done
	})
	c := mustDial(t, testConfig(), fb.Addr())
	first := async(func() (kmsg.Response, error) { return c.Request(context.Background(), metadataReq()) })
	await(t, got1, 2*time.Second, "broker reading the request")
	c.Close()
	r := await(t, first, 2*time.Second, "in-flight request after Close")
	if !errors.Is(r.err, errs.ErrConnClosed) {
		t.Errorf("in-flight request after Close: %v, want ErrConnClosed", r.err)
	}
	if n := c.Inflight(); n != 0 {
		t.Errorf("Inflight = %d, want 0", n)
	}
}

// TestProduceAcks0NoWait checks an acks=0 produce returns as soon as it is
// written, from a broker that never answers produce requests.
func TestProduceAcks0NoWait(t *testing.T) {
	produced := make(chan int16, 10)
	fb := newFakeBroker(t, func(bc *brokerConn) {
		for {
			r, err := bc.read()
			if err != nil {
				return
			}
			switch r.key {
			case 18:
				err = bc.respond(r, fakeVersions())
			case 3:
				err = bc.respond(r, metadataResp("after-produce"))
			case 0:
				produced <- r.req.(*kmsg.ProduceRequest).Acks // and no answer
			}
			if err != nil {
				return
			}
		}
	})
	cfg := testConfig()
	cfg.RequestTimeout = 10 * time.Second
	c := mustDial(t, cfg, fb.Addr())

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for range 3 {
		resp, err := c.Request(ctx, produceReq(0, "t", [16]byte{}, 0, oneRecordBatch("v")))
		if resp != nil || err != nil {
			t.Fatalf("acks=0 produce = %v, %v; want nil, nil without waiting", resp, err)
		}
		if got := await(t, produced, 2*time.Second, "produce at the broker"); got != 0 {
			t.Errorf("broker got acks=%d", got)
		}
	}
	if n := c.Inflight(); n != 0 {
		t.Errorf("Inflight after acks=0 produces = %d, want 0", n)
	}
	resp, err := c.Request(ctx, metadataReq())
	if err != nil || clusterID(t, resp) != "after-produce" {
		t.Fatalf("Metadata after acks=0 produces: %v, %v", resp, err)
	}
}

// TestObserverCounts checks the byte counts the Observer reports against
// the exact frames on the wire, and that a throttled response is reported
// and delays the next request.
func TestObserverCounts(t *testing.T) {
	var respFrame []byte
	frames := make(chan time.Time, 4) // when the broker read each Metadata request
	fb := newFakeBroker(t, func(bc *brokerConn) {
		n := 0
		for {
			r, err := bc.read()
			if err != nil {
				return
			}
			if r.key == 18 {
				if bc.respond(r, fakeVersions()) != nil {
					return
				}
				continue
			}
			frames <- time.Now()
			md := metadataResp("observed")
			if n == 0 {
				md.ThrottleMillis = 150
			}
			n++
			md.SetVersion(r.version)
			f := frameResponse(r.corr, md)
			if n == 1 {
				respFrame = f
			}
			if _, err := bc.Write(f); err != nil {
				return
			}
		}
	})
	obs := &recObserver{}
	cfg := testConfig()
	cfg.Observer = obs
	c := mustDial(t, cfg, fb.Addr())

	req := metadataReq("a", "b")
	if _, err := c.Request(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	// KIP-219: the broker asked us to hold off for 150ms.
	if _, err := c.Request(context.Background(), metadataReq()); err != nil {
		t.Fatal(err)
	}
	t1, t2 := <-frames, <-frames
	if gap := t2.Sub(t1); gap < 100*time.Millisecond {
		t.Errorf("second request reached the broker %v after the first, despite a 150ms throttle", gap)
	}
	c.Close()

	reqs := obs.of("request")
	if len(reqs) != 2 {
		t.Fatalf("Request events %+v, want 2", reqs)
	}
	e := reqs[0]
	wantWritten := len(wire.NewFormatter(cfg.ClientID).Append(nil, req))
	if e.key != 3 || e.written != wantWritten || e.read != len(respFrame) || e.err != nil {
		t.Errorf("Request event %+v; want key 3, written %d, read %d", e, wantWritten, len(respFrame))
	}
	th := obs.of("throttled")
	if len(th) != 1 || th[0].d != 150*time.Millisecond || th[0].addr != fb.Addr() {
		t.Errorf("Throttled events %+v, want one of 150ms", th)
	}
	kinds := []string{}
	for _, e := range obs.snapshot() {
		kinds = append(kinds, e.kind)
	}
	want := []string{"connected", "request", "throttled", "request", "disconnected"}
	if len(kinds) != len(want) {
		t.Fatalf("events %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("events %v, want %v", kinds, want)
		}
	}
}

// TestThrottleRespectsContext checks a request held back by a throttle
// gives up with its context and leaves the connection usable.
func TestThrottleRespectsContext(t *testing.T) {
	fb := newFakeBroker(t, func(bc *brokerConn) {
		first := true
		for {
			r, err := bc.read()
			if err != nil {
				return
			}
			var resp kmsg.Response = fakeVersions()
			if r.key == 3 {
				md := metadataResp("ok")
				if first {
					md.ThrottleMillis = 200
					first = false
				}
				resp = md
			}
			if bc.respond(r, resp) != nil {
				return
			}
		}
	})
	c := mustDial(t, testConfig(), fb.Addr())
	if _, err := c.Request(context.Background(), metadataReq()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := c.Request(ctx, metadataReq()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("throttled request with a 30ms context: %v", err)
	}
	if n := c.Inflight(); n != 0 {
		t.Errorf("Inflight = %d after a throttled request gave up, want 0", n)
	}
	resp, err := c.Request(context.Background(), metadataReq())
	if err != nil || clusterID(t, resp) != "ok" {
		t.Fatalf("request after the throttle: %v, %v", resp, err)
	}
}

// TestUnsupportedRequest checks a request the broker never listed fails
// without touching the connection.
func TestUnsupportedRequest(t *testing.T) {
	fb := newFakeBroker(t, func(bc *brokerConn) { bc.serveMetadata("x") })
	c := mustDial(t, testConfig(), fb.Addr())
	_, err := c.Request(context.Background(), kmsg.NewPtrFindCoordinatorRequest())
	if !errors.Is(err, errs.ErrUnsupported) {
		t.Fatalf("unlisted request: %v, want ErrUnsupported", err)
	}
	if c.Err() != nil || c.Inflight() != 0 {
		t.Errorf("unsupported request affected the connection: err %v, inflight %d", c.Err(), c.Inflight())
	}
	if _, err := c.Request(context.Background(), metadataReq()); err != nil {
		t.Errorf("request after the unsupported one: %v", err)
	}
}

// slowObserver takes its time over Request events, as a metrics hook
// that contends on a lock might.
type slowObserver struct {
	recObserver
	delay time.Duration
}

func (o *slowObserver) Request(addr string, node int32, key int16, written, read int, d time.Duration, err error) {
	time.Sleep(o.delay)
	o.recObserver.Request(addr, node, key, written, read, d, err)
}

// TestRequestReturnsSettled checks that when Request returns, the request
// is no longer counted in flight and has been observed: a pool that looks
// at Inflight, or retires the connection, right after a response must see
// it idle.
func TestRequestReturnsSettled(t *testing.T) {
	fb := newFakeBroker(t, func(bc *brokerConn) { bc.serveMetadata("x") })
	obs := &slowObserver{delay: 30 * time.Millisecond}
	cfg := testConfig()
	cfg.Observer = obs
	c := mustDial(t, cfg, fb.Addr())
	for i := range 3 {
		if _, err := c.Request(context.Background(), metadataReq()); err != nil {
			t.Fatal(err)
		}
		if n := c.Inflight(); n != 0 {
			t.Fatalf("Inflight = %d straight after Request returned", n)
		}
		if n := len(obs.of("request")); n != i+1 {
			t.Fatalf("%d Request events after %d requests", n, i+1)
		}
	}
	c.CloseWhenIdle()
	select {
	case <-c.Done():
	default:
		t.Fatal("CloseWhenIdle straight after a response did not close the connection")
	}
}

// TestExpiredContextKeepsConn issues requests whose context has already
// expired: each fails with the context's error, and the connection, shared
// with other callers, must survive. (A caller's deadline used as the
// socket's write deadline used to fail the write and close the connection.)
func TestExpiredContextKeepsConn(t *testing.T) {
	fb := newFakeBroker(t, func(bc *brokerConn) { bc.serveMetadata("alive") })
	c := mustDial(t, testConfig(), fb.Addr())
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	for range 50 {
		if _, err := c.Request(expired, metadataReq()); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("request with an expired context: %v, want context.DeadlineExceeded", err)
		}
		if err := c.Err(); err != nil {
			t.Fatalf("a caller's expired context closed the connection: %v", err)
		}
	}
	resp, err := c.Request(context.Background(), metadataReq())
	if err != nil || clusterID(t, resp) != "alive" {
		t.Fatalf("request after the expired ones: %v, %v", resp, err)
	}
}
