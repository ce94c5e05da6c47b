package conn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/wire"
	"github.com/riffle-go/riffle/rifftest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// versionLog records the ApiVersions versions a fake broker was asked at.
type versionLog struct {
	mu   sync.Mutex
	seen []int16
}

func (l *versionLog) add(v int16) {
	l.mu.Lock()
	l.seen = append(l.seen, v)
	l.mu.Unlock()
}

func (l *versionLog) get() []int16 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

// apiVersionsBroker answers each ApiVersions request with answer(version)
// (a complete frame body after the correlation id), then serves Metadata.
func apiVersionsBroker(t *testing.T, log *versionLog, answer func(v int16) []byte) *fakeBroker {
	return newFakeBroker(t, func(bc *brokerConn) {
		for {
			r, err := bc.read()
			if err != nil {
				return
			}
			if r.key != 18 {
				if r.key != 3 || bc.respond(r, metadataResp("after-fallback")) != nil {
					return
				}
				continue
			}
			log.add(r.version)
			if bc.writeRaw(r.corr, false, answer(r.version)) != nil {
				return
			}
		}
	})
}

// encodeAt encodes resp at version v.
func encodeAt(resp kmsg.Response, v int16) []byte {
	resp.SetVersion(v)
	return resp.AppendTo(nil)
}

// garbage fails to decode as an ApiVersions response at every version.
var garbage = []byte{0, 0, 0x7f}

func TestApiVersionsFallback(t *testing.T) {
	ourMax := kmsg.NewPtrApiVersionsRequest().MaxVersion()
	descending := func(from int16) []int16 {
		var vs []int16
		for v := from; v >= 0; v-- {
			vs = append(vs, v)
		}
		return vs
	}
	for _, tc := range []struct {
		name     string
		answer   func(v int16) []byte
		wantSeen []int16
		wantAV   int16 // negotiated ApiVersions max; -1 when the dial fails
	}{
		{
			// KIP-511: UNSUPPORTED_VERSION in the v0 layout, naming the
			// broker's ApiVersions range: one retry, straight to it.
			name: "unsupported version names v2",
			answer: func(v int16) []byte {
				if v > 2 {
					return encodeAt(apiVersionsResp(35, 2), 0)
				}
				return encodeAt(fakeVersions(), v)
			},
			wantSeen: []int16{ourMax, 2},
			wantAV:   ourMax, // what the v2 answer itself lists
		},
		{
			// UNSUPPORTED_VERSION without a usable range: step down one.
			name: "unsupported version, no range",
			answer: func(v int16) []byte {
				if v > 1 {
					resp := kmsg.NewPtrApiVersionsResponse()
					resp.ErrorCode = 35
					return encodeAt(resp, 0)
				}
				return encodeAt(fakeVersions(), v)
			},
			wantSeen: descending(ourMax)[:ourMax],
			wantAV:   ourMax,
		},
		{
			// A broker that cannot parse newer requests: garbage to
			// flexible versions, the v0 layout regardless of version
			// otherwise (which v1 and v2 cannot decode).
			name: "garbage to v3+, v0 layout below",
			answer: func(v int16) []byte {
				if v >= 3 {
					return garbage
				}
				return encodeAt(fakeVersions(), 0)
			},
			wantSeen: descending(ourMax),
			wantAV:   ourMax,
		},
		{
			name:     "garbage to every version",
			answer:   func(int16) []byte { return garbage },
			wantSeen: descending(ourMax),
			wantAV:   -1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &versionLog{}
			fb := apiVersionsBroker(t, log, tc.answer)
			if tc.wantAV < 0 {
				de := dialErr(t, context.Background(), testConfig(), fb.Addr())
				if de.Cause() != "protocol" || de.Stage != StageAPIVersions {
					t.Errorf("dial error %v: cause %q, stage %q; want protocol, api versions", de, de.Cause(), de.Stage)
				}
				if !errors.Is(de, errs.ErrUnsupported) {
					t.Errorf("dial error %v does not match ErrUnsupported", de)
				}
			} else {
				c := mustDial(t, testConfig(), fb.Addr())
				if v, ok := c.Versions().Max(18, ourMax); !ok || v != tc.wantAV {
					t.Errorf("ApiVersions max = %d (ok %v), want %d", v, ok, tc.wantAV)
				}
				if v, ok := c.Versions().Max(3, 100); !ok || v != 12 {
					t.Errorf("Metadata max = %d (ok %v), want 12 as the broker listed", v, ok)
				}
				resp, err := c.Request(context.Background(), metadataReq())
				if err != nil || clusterID(t, resp) != "after-fallback" {
					t.Fatalf("Metadata after fallback: %v, %v", resp, err)
				}
			}
			if got := log.get(); !slices.Equal(got, tc.wantSeen) {
				t.Errorf("ApiVersions asked at versions %v, want %v", got, tc.wantSeen)
			}
		})
	}
}

// TestApiVersionsError checks that an error other than UNSUPPORTED_VERSION
// fails the dial instead of stepping down.
func TestApiVersionsError(t *testing.T) {
	log := &versionLog{}
	fb := apiVersionsBroker(t, log, func(v int16) []byte {
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.ErrorCode = 42 // INVALID_REQUEST
		return encodeAt(resp, v)
	})
	de := dialErr(t, context.Background(), testConfig(), fb.Addr())
	if de.Stage != StageAPIVersions {
		t.Errorf("stage %q, want api versions", de.Stage)
	}
	if got := log.get(); len(got) != 1 {
		t.Errorf("asked at versions %v, want one attempt", got)
	}
}

// TestApiVersionsWrongCorrelationID checks the handshake validates
// correlation ids too.
func TestApiVersionsWrongCorrelationID(t *testing.T) {
	fb := newFakeBroker(t, func(bc *brokerConn) {
		r, err := bc.read()
		if err != nil {
			return
		}
		av := fakeVersions()
		av.SetVersion(r.version)
		bc.Write(frameResponse(r.corr+7, av))
		<-bc.done
	})
	de := dialErr(t, context.Background(), testConfig(), fb.Addr())
	if !errors.Is(de, errs.ErrMalformed) || de.Cause() != "protocol" {
		t.Errorf("dial error %v (cause %q): want ErrMalformed, protocol", de, de.Cause())
	}
}

// TestApiVersionsOversizedFrame checks the handshake applies the frame cap.
func TestApiVersionsOversizedFrame(t *testing.T) {
	fb := newFakeBroker(t, func(bc *brokerConn) {
		if _, err := bc.read(); err != nil {
			return
		}
		bc.Write([]byte{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1})
		<-bc.done
	})
	before := totalAlloc()
	de := dialErr(t, context.Background(), testConfig(), fb.Addr())
	if grew := totalAlloc() - before; grew > 4<<20 {
		t.Errorf("rejected handshake frame cost %d bytes", grew)
	}
	if !errors.Is(de, errs.ErrMalformed) || de.Cause() != "protocol" {
		t.Errorf("dial error %v (cause %q): want ErrMalformed, protocol", de, de.Cause())
	}
}

func TestDialRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	obs := &recObserver{}
	cfg := testConfig()
	cfg.Observer = obs
	de := dialErr(t, context.Background(), cfg, addr)
	if de.Cause() != "dial refused" || de.Stage != StageDial {
		t.Errorf("refused: %v (cause %q, stage %q); want dial refused", de, de.Cause(), de.Stage)
	}
	if !errs.IsRetriable(de) {
		t.Errorf("refused dial %v is not retriable", de)
	}
	ev := obs.of("connected")
	if len(ev) != 1 || ev[0].err == nil || ev[0].addr != addr {
		t.Errorf("Connected events %+v, want one carrying the error", ev)
	}
	if n := len(obs.snapshot()); n != 1 {
		t.Errorf("%d observer events for a failed dial, want 1", n)
	}
}

// TestDialHook checks Config.Dial is used and that a hook that blocks is
// bounded by the caller's context.
func TestDialHook(t *testing.T) {
	blocking := func(ctx context.Context, _, _ string) (net.Conn, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	t.Run("deadline", func(t *testing.T) {
		cfg := testConfig()
		cfg.Dial = blocking
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		de := dialErr(t, ctx, cfg, "hook.invalid:9092")
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("dial took %v with a 100ms context", d)
		}
		if de.Cause() != "timeout" || !errors.Is(de, context.DeadlineExceeded) {
			t.Errorf("blocking hook: %v (cause %q); want timeout", de, de.Cause())
		}
	})
	t.Run("cancel", func(t *testing.T) {
		cfg := testConfig()
		cfg.Dial = blocking
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		de := dialErr(t, ctx, cfg, "hook.invalid:9092")
		if de.Cause() != "cancelled" || !errors.Is(de, context.Canceled) {
			t.Errorf("cancelled hook: %v (cause %q); want cancelled", de, de.Cause())
		}
		if errs.IsRetriable(de) {
			t.Errorf("a cancelled dial %v is retriable", de)
		}
	})
	t.Run("dial timeout", func(t *testing.T) {
		cfg := testConfig()
		cfg.Dial = blocking
		cfg.DialTimeout = 100 * time.Millisecond
		de := dialErr(t, context.Background(), cfg, "hook.invalid:9092")
		if de.Cause() != "timeout" {
			t.Errorf("DialTimeout: %v (cause %q); want timeout", de, de.Cause())
		}
	})
	t.Run("error", func(t *testing.T) {
		boom := errors.New("boom")
		cfg := testConfig()
		cfg.Dial = func(context.Context, string, string) (net.Conn, error) { return nil, boom }
		de := dialErr(t, context.Background(), cfg, "hook.invalid:9092")
		if !errors.Is(de, boom) || de.Cause() != "dial failed" {
			t.Errorf("hook error: %v (cause %q); want boom, dial failed", de, de.Cause())
		}
	})
	t.Run("used", func(t *testing.T) {
		fb := newFakeBroker(t, func(bc *brokerConn) { bc.serveMetadata("via-hook") })
		var calls []string
		cfg := testConfig()
		cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			calls = append(calls, network+" "+addr)
			var d net.Dialer
			return d.DialContext(ctx, network, fb.Addr())
		}
		c := mustDial(t, cfg, "broker.invalid:9092")
		if c.Addr() != "broker.invalid:9092" {
			t.Errorf("Addr() = %q", c.Addr())
		}
		if !slices.Equal(calls, []string{"tcp broker.invalid:9092"}) {
			t.Errorf("hook calls %v", calls)
		}
		resp, err := c.Request(context.Background(), metadataReq())
		if err != nil || clusterID(t, resp) != "via-hook" {
			t.Errorf("request through hooked conn: %v, %v", resp, err)
		}
	})
}

// TestDialSilentBroker checks a broker that accepts the connection and
// never speaks: the handshake is bounded by DialTimeout, or by the
// caller's context.
func TestDialSilentBroker(t *testing.T) {
	fb := newFakeBroker(t, func(bc *brokerConn) { <-bc.done })
	t.Run("dial timeout", func(t *testing.T) {
		cfg := testConfig()
		cfg.DialTimeout = 200 * time.Millisecond
		de := await(t, dialAsync(context.Background(), cfg, fb.Addr()), 5*time.Second, "dial to a silent broker")
		if de == nil {
			t.Fatal("dial to a silent broker succeeded")
		}
		if de.Cause() != "timeout" || de.Stage != StageAPIVersions {
			t.Errorf("silent broker: %v (cause %q, stage %q); want timeout in api versions", de, de.Cause(), de.Stage)
		}
		if !errs.IsRetriable(de) {
			t.Errorf("%v is not retriable", de)
		}
	})
	t.Run("context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		de := await(t, dialAsync(ctx, testConfig(), fb.Addr()), 5*time.Second, "dial to a silent broker")
		if de == nil {
			t.Fatal("dial to a silent broker succeeded")
		}
		if de.Cause() != "cancelled" || !errors.Is(de, context.Canceled) {
			t.Errorf("cancelled handshake: %v (cause %q); want cancelled", de, de.Cause())
		}
	})
}

// dialAsync dials in a goroutine so that a hang fails the test instead of
// stalling it; the result is the *DialError, or nil if the dial succeeded.
func dialAsync(ctx context.Context, cfg *Config, addr string) <-chan *DialError {
	ch := make(chan *DialError, 1)
	go func() {
		c, err := Dial(ctx, cfg, addr, 1)
		if err == nil {
			c.Close()
			ch <- nil
			return
		}
		var de *DialError
		if !errors.As(err, &de) {
			de = &DialError{Addr: addr, Err: err, Stage: "not a DialError"}
		}
		ch <- de
	}()
	return ch
}

// TestDialBlackhole dials an address whose TCP handshake never completes.
func TestDialBlackhole(t *testing.T) {
	bh, err := rifftest.NewBlackhole()
	if err != nil {
		t.Skipf("no blackhole on this machine: %v", err)
	}
	defer bh.Close()
	cfg := testConfig()
	cfg.DialTimeout = 200 * time.Millisecond
	de := await(t, dialAsync(context.Background(), cfg, bh.Addr()), 5*time.Second, "dial to a blackhole")
	if de == nil {
		t.Fatal("dial to a blackhole succeeded")
	}
	if de.Cause() != "timeout" || de.Stage != StageDial {
		t.Errorf("blackhole: %v (cause %q, stage %q); want timeout in dial", de, de.Cause(), de.Stage)
	}
}

// TestDialErrorRetriable checks which dial failures are worth another
// attempt: the ones that fail the same way every time are not.
func TestDialErrorRetriable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		name  string
		stage Stage
		err   error
		want  bool
	}{
		{"refused", StageDial, refused, true},
		{"timeout", StageDial, &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}, true},
		{"reset during tls", StageTLS, &net.OpError{Op: "read", Err: syscall.ECONNRESET}, true},
		{"eof during tls", StageTLS, io.EOF, true},
		{"unknown authority", StageTLS, &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, false},
		{"wrong host", StageTLS, x509.HostnameError{Host: "x"}, false},
		{"expired", StageTLS, x509.CertificateInvalidError{Reason: x509.Expired}, false},
		{"not tls", StageTLS, tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, false},
		{"alert from broker", StageAPIVersions, &net.OpError{Op: "remote error", Err: errors.New("tls: certificate required")}, false},
		{"oversized handshake frame", StageAPIVersions, &wire.FrameError{Reason: "size prefix above the limit", Size: 1 << 30}, false},
		{"wrong correlation id", StageAPIVersions, fmt.Errorf("x: %w", &wire.FrameError{Reason: "correlation id 8, expected 1"}), false},
		{"truncated handshake frame", StageAPIVersions, &wire.FrameError{Reason: "truncated body", Size: 10}, true},
		{"unsupported", StageAPIVersions, fmt.Errorf("no version: %w", errs.ErrUnsupported), false},
		{"auth", StageSASL, fmt.Errorf("%w: rejected", errs.ErrAuth), false},
	} {
		de := &DialError{Addr: "a:1", Stage: tc.stage, Err: tc.err}
		if got := errs.IsRetriable(de); got != tc.want {
			t.Errorf("%s (%v): retriable %v, want %v", tc.name, de, got, tc.want)
		}
	}
}
