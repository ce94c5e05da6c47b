package conn

import (
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/errs"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// totalAlloc returns the bytes allocated by the process so far.
func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// checkMalformed checks that err is a typed, retriable ErrMalformed and
// that the connection closed with it.
func checkMalformed(t *testing.T, c *Conn, resp kmsg.Response, err error) {
	t.Helper()
	if resp != nil {
		t.Errorf("got a response %T alongside error %v", resp, err)
	}
	if !errors.Is(err, errs.ErrMalformed) {
		t.Fatalf("error %v does not match ErrMalformed", err)
	}
	if !errs.IsRetriable(err) {
		t.Errorf("error %v is not retriable", err)
	}
	awaitClosed(t, c, 2*time.Second)
	if !errors.Is(c.Err(), errs.ErrMalformed) {
		t.Errorf("Err() = %v, want ErrMalformed", c.Err())
	}
	waitInflight(t, c, 0) // requests queued behind are failed too
	// A dead connection fails fast, with the reason it died.
	if _, err := c.Request(context.Background(), metadataReq()); !errors.Is(err, errs.ErrMalformed) && !errors.Is(err, errs.ErrConnClosed) {
		t.Errorf("request on the dead connection: %v", err)
	}
}

// answerFirstWith returns a serve function that completes the handshake,
// reads one request and answers it with whatever reply writes, then holds
// the connection open so that any close comes from the client.
func answerFirstWith(reply func(bc *brokerConn, r request)) func(*brokerConn) {
	return func(bc *brokerConn) {
		if bc.handshake() != nil {
			return
		}
		r, err := bc.read()
		if err != nil {
			return
		}
		reply(bc, r)
		<-bc.done
	}
}

// TestOversizedFrame checks that a size prefix beyond the limit is refused
// before anything is allocated for it.
func TestOversizedFrame(t *testing.T) {
	for _, tc := range []struct {
		name     string
		size     uint32
		maxFrame int32
	}{
		{"max int32", 0x7fffffff, 0},
		{"negative", 0x80000000, 0},
		{"minus one", 0xffffffff, 0},
		{"just over MaxFrame", 4097, 4096},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb := newFakeBroker(t, answerFirstWith(func(bc *brokerConn, r request) {
				var hdr [8]byte
				binary.BigEndian.PutUint32(hdr[:], tc.size)
				binary.BigEndian.PutUint32(hdr[4:], uint32(r.corr))
				bc.Write(hdr[:])
			}))
			cfg := testConfig()
			cfg.MaxFrame = tc.maxFrame
			c := mustDial(t, cfg, fb.Addr())

			before := totalAlloc()
			resp, err := c.Request(context.Background(), metadataReq())
			if grew := totalAlloc() - before; grew > 4<<20 {
				t.Errorf("a rejected frame of claimed size %d cost %d bytes of allocation", tc.size, grew)
			}
			checkMalformed(t, c, resp, err)
		})
	}
}

// TestTruncatedFrame checks frames that end early: a short size prefix or
// a body cut off by EOF. A large claimed size must not be allocated up
// front either.
func TestTruncatedFrame(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bytes func(corr int32) []byte
	}{
		{"short size prefix", func(int32) []byte { return []byte{0, 0} }},
		{"short body", func(corr int32) []byte {
			b := binary.BigEndian.AppendUint32(nil, 100)
			b = binary.BigEndian.AppendUint32(b, uint32(corr))
			return append(b, 0, 1, 2, 3, 4, 5)
		}},
		{"90 MiB claimed, 10 bytes sent", func(corr int32) []byte {
			b := binary.BigEndian.AppendUint32(nil, 90<<20)
			b = binary.BigEndian.AppendUint32(b, uint32(corr))
			return append(b, 0, 1, 2, 3, 4, 5)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb := newFakeBroker(t, func(bc *brokerConn) {
				if bc.handshake() != nil {
					return
				}
				r, err := bc.read()
				if err != nil {
					return
				}
				bc.Write(tc.bytes(r.corr))
				bc.Close() // EOF mid-frame
			})
			c := mustDial(t, testConfig(), fb.Addr())
			before := totalAlloc()
			resp, err := c.Request(context.Background(), metadataReq())
			if grew := totalAlloc() - before; grew > 8<<20 {
				t.Errorf("a truncated frame cost %d bytes of allocation", grew)
			}
			checkMalformed(t, c, resp, err)
		})
	}
}

// TestGarbageResponse checks responses that frame correctly but whose
// header or body is not a valid response.
func TestGarbageResponse(t *testing.T) {
	bigTag := func(n int) []byte { // one tagged field of n bytes, empty body
		b := []byte{1, 0} // one tag, tag id 0
		b = binary.AppendUvarint(b, uint64(n))
		return append(b, make([]byte, n)...)
	}
	for _, tc := range []struct {
		name  string
		frame func(r request) []byte
	}{
		{"shorter than the header", func(request) []byte { return []byte{0, 0, 0, 2, 0, 1} }},
		{"empty frame", func(request) []byte { return []byte{0, 0, 0, 0} }},
		{"bad tag varint", func(r request) []byte {
			return rawFrame(r.corr, false, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
		}},
		{"tag longer than the frame", func(r request) []byte {
			return rawFrame(r.corr, false, []byte{1, 0, 0x7f, 1, 2})
		}},
		{"undecodable body", func(r request) []byte {
			return rawFrame(r.corr, r.flexible(), []byte{0, 0, 0})
		}},
		{"empty body", func(r request) []byte { return rawFrame(r.corr, r.flexible(), nil) }},
		{"random body", func(r request) []byte {
			return rawFrame(r.corr, r.flexible(), []byte{0xde, 0xad, 0xbe, 0xef, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x01})
		}},
		// The header is all tag: the body handed to the decoder is
		// empty, after the reader's copy of a small body out of a
		// large buffer.
		{"big header tag, empty body", func(r request) []byte { return rawFrame(r.corr, false, bigTag(80<<10)) }},
		{"big header tag, short body", func(r request) []byte {
			return rawFrame(r.corr, false, append(bigTag(80<<10), 0, 0, 0))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb := newFakeBroker(t, answerFirstWith(func(bc *brokerConn, r request) {
				if !r.flexible() {
					panic("the tests below assume a flexible Metadata version")
				}
				bc.Write(tc.frame(r))
			}))
			c := mustDial(t, testConfig(), fb.Addr())
			resp, err := c.Request(context.Background(), metadataReq())
			checkMalformed(t, c, resp, err)
		})
	}
}

// TestWrongCorrelationID checks that an answer out of order poisons the
// connection: the request and the one queued behind it both fail.
func TestWrongCorrelationID(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delta int32
	}{{"next id", 1}, {"previous id", -1}, {"far off", 1 << 20}} {
		t.Run(tc.name, func(t *testing.T) {
			got2 := make(chan struct{})
			fb := newFakeBroker(t, func(bc *brokerConn) {
				if bc.handshake() != nil {
					return
				}
				r1, err := bc.read()
				if err != nil {
					return
				}
				if _, err := bc.read(); err != nil {
					return
				}
				close(got2)
				// Otherwise a perfect answer, at the right version.
				md := metadataResp("wrong")
				md.SetVersion(r1.version)
				bc.Write(frameResponse(r1.corr+tc.delta, md))
				<-bc.done
			})
			c := mustDial(t, testConfig(), fb.Addr())
			ctx := context.Background()
			first := async(func() (kmsg.Response, error) { return c.Request(ctx, metadataReq()) })
			// Only issue the second once the first has been written,
			// so their order on the wire is known.
			waitInflight(t, c, 1)
			second := async(func() (kmsg.Response, error) { return c.Request(ctx, metadataReq()) })
			await(t, got2, 2*time.Second, "broker reading both requests")

			r1 := await(t, first, 2*time.Second, "first request")
			checkMalformed(t, c, r1.resp, r1.err)
			if !strings.Contains(r1.err.Error(), "correlation id") {
				t.Errorf("error %q does not name the correlation id", r1.err)
			}
			r2 := await(t, second, 2*time.Second, "second request")
			if r2.err == nil || !errs.IsRetriable(r2.err) {
				t.Errorf("request queued behind the bad answer: %v, %v; want a retriable error", r2.resp, r2.err)
			}
		})
	}
}

// waitInflight waits until c has n requests in flight.
func waitInflight(t *testing.T, c *Conn, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for c.Inflight() != n {
		if time.Now().After(deadline) {
			t.Fatalf("Inflight = %d, want %d", c.Inflight(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestBrokerClosesMidRequest checks that a plain EOF where a response
// should be is a connection error, not a protocol error.
func TestBrokerClosesMidRequest(t *testing.T) {
	fb := newFakeBroker(t, func(bc *brokerConn) {
		if bc.handshake() != nil {
			return
		}
		bc.read()
		bc.Close()
	})
	c := mustDial(t, testConfig(), fb.Addr())
	_, err := c.Request(context.Background(), metadataReq())
	if !errors.Is(err, errs.ErrConnClosed) || errors.Is(err, errs.ErrMalformed) {
		t.Errorf("EOF instead of a response: %v; want ErrConnClosed", err)
	}
	if !errs.IsRetriable(err) {
		t.Errorf("%v is not retriable", err)
	}
	awaitClosed(t, c, 2*time.Second)
}

// TestRequestTimeout checks that a broker that never answers fails the
// request with ErrRequestTimeout and closes the connection, failing the
// request queued behind it too.
func TestRequestTimeout(t *testing.T) {
	fb := newFakeBroker(t, func(bc *brokerConn) {
		if bc.handshake() != nil {
			return
		}
		for { // read everything, answer nothing
			if _, err := bc.read(); err != nil {
				return
			}
		}
	})
	cfg := testConfig()
	cfg.RequestTimeout = 200 * time.Millisecond
	c := mustDial(t, cfg, fb.Addr())
	ctx := context.Background()
	first := async(func() (kmsg.Response, error) { return c.Request(ctx, metadataReq()) })
	waitInflight(t, c, 1)
	second := async(func() (kmsg.Response, error) { return c.Request(ctx, metadataReq()) })

	start := time.Now()
	r1 := await(t, first, 5*time.Second, "request to a silent broker")
	if !errors.Is(r1.err, errs.ErrRequestTimeout) || r1.resp != nil {
		t.Fatalf("silent broker: %v, %v; want ErrRequestTimeout", r1.resp, r1.err)
	}
	if !errs.IsRetriable(r1.err) {
		t.Errorf("%v is not retriable", r1.err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("timeout of 200ms took %v", d)
	}
	awaitClosed(t, c, time.Second)
	if !errors.Is(c.Err(), errs.ErrRequestTimeout) {
		t.Errorf("Err() = %v, want ErrRequestTimeout", c.Err())
	}
	r2 := await(t, second, 2*time.Second, "request queued behind the timeout")
	if r2.err == nil || !errs.IsRetriable(r2.err) {
		t.Errorf("queued request: %v, %v; want a retriable error", r2.resp, r2.err)
	}
	if n := c.Inflight(); n != 0 {
		t.Errorf("Inflight = %d, want 0", n)
	}
}

// TestCancelKeepsConnInStep cancels a request whose response is late: the
// caller returns at once, and the next request on the connection gets its
// own response, not the cancelled one's.
func TestCancelKeepsConnInStep(t *testing.T) {
	got1 := make(chan struct{})
	fb := newFakeBroker(t, func(bc *brokerConn) {
		if bc.handshake() != nil {
			return
		}
		r1, err := bc.read()
		if err != nil {
			return
		}
		close(got1)
		r2, err := bc.read() // only sent after the first was cancelled
		if err != nil {
			return
		}
		if bc.respond(r1, metadataResp("first")) != nil || bc.respond(r2, metadataResp("second")) != nil {
			return
		}
		bc.serveMetadata("third")
	})
	c := mustDial(t, testConfig(), fb.Addr())

	ctx1, cancel := context.WithCancel(context.Background())
	first := async(func() (kmsg.Response, error) { return c.Request(ctx1, metadataReq()) })
	await(t, got1, 2*time.Second, "broker reading the first request")
	cancel()
	r1 := await(t, first, time.Second, "cancelled request")
	if !errors.Is(r1.err, context.Canceled) || r1.resp != nil {
		t.Fatalf("cancelled request = %v, %v; want context.Canceled", r1.resp, r1.err)
	}
	if c.Err() != nil {
		t.Fatalf("cancelling a request closed the connection: %v", c.Err())
	}

	ctx := context.Background()
	resp, err := c.Request(ctx, metadataReq())
	if err != nil {
		t.Fatalf("request after the cancelled one: %v", err)
	}
	if got := clusterID(t, resp); got != "second" {
		t.Fatalf("request after the cancelled one got cluster %q, want %q", got, "second")
	}
	resp, err = c.Request(ctx, metadataReq())
	if err != nil || clusterID(t, resp) != "third" {
		t.Fatalf("third request: %v, %v", resp, err)
	}
	if n := c.Inflight(); n != 0 {
		t.Errorf("Inflight = %d, want 0", n)
	}
}

// TestContextDeadlineWhileQueued checks a request that never gets a
// pipeline slot: it gives up with its context and is never sent.
func TestContextDeadlineWhileQueued(t *testing.T) {
	got1, release := make(chan struct{}), make(chan struct{})
	reqs := make(chan int, 10) // request count seen by the broker, after each read
	fb := newFakeBroker(t, func(bc *brokerConn) {
		if bc.handshake() != nil {
			return
		}
		r1, err := bc.read()
		if err != nil {
			return
		}
		close(got1)
		if !bc.wait(release) || bc.respond(r1, metadataResp("first")) != nil {
			return
		}
		n := 1
		for {
			r, err := bc.read()
			if err != nil {
				return
			}
			n++
			reqs <- n
			if bc.respond(r, metadataResp("later")) != nil {
				return
			}
		}
	})
	cfg := testConfig()
	cfg.MaxInflight = 1
	c := mustDial(t, cfg, fb.Addr())

	first := async(func() (kmsg.Response, error) { return c.Request(context.Background(), metadataReq()) })
	await(t, got1, 2*time.Second, "broker reading the first request")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.Request(ctx, metadataReq())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("request waiting for a slot: %v, want context.DeadlineExceeded", err)
	}
	if n := c.Inflight(); n != 1 {
		t.Errorf("Inflight = %d, want 1 (the queued request gave up its place)", n)
	}
	close(release)
	if r := await(t, first, 2*time.Second, "first request"); r.err != nil || clusterID(t, r.resp) != "first" {
		t.Fatalf("first request = %v, %v", r.resp, r.err)
	}
	resp, err := c.Request(context.Background(), metadataReq())
	if err != nil || clusterID(t, resp) != "later" {
		t.Fatalf("request after the timed-out one = %v, %v", resp, err)
	}
	if n := <-reqs; n != 2 {
		t.Errorf("broker saw %d requests, want 2: the timed-out one must never be sent", n)
	}
}
