package conn

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/sasl"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestReauthAt: re-authentication is scheduled between 85% and 95% of the
// session's lifetime after its start, u picking the point in between,
// unless that leaves the broker less than reauthDrain to get to the
// requests written before it: then earlier, down to half the lifetime,
// but not below the broker's one-second spacing of re-authentications.
func TestReauthAt(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		lifetime time.Duration
		u        float64
		want     time.Duration // after start
	}{
		{"earliest", time.Second, 0, 850 * time.Millisecond},
		{"middle", time.Second, 0.5, 900 * time.Millisecond},
		{"latest", time.Second, 1, 950 * time.Millisecond},
		{"below 0 clamped", time.Second, -3, 850 * time.Millisecond},
		{"above 1 clamped", time.Second, 7, 950 * time.Millisecond},
		{"NaN is the earliest", time.Second, math.NaN(), 850 * time.Millisecond},
		{"an hour", time.Hour, 0.25, time.Duration(0.875 * float64(time.Hour))},
		{"one millisecond", time.Millisecond, 0, 850 * time.Microsecond},
		{"100 s keeps 85%", 100 * time.Second, 0, 85 * time.Second},
		{"3 s earliest: half", 3 * time.Second, 0, 1500 * time.Millisecond},
		{"3 s latest", 3 * time.Second, 1, 1800 * time.Millisecond},
		{"8 s", 8 * time.Second, 0.5, 4400 * time.Millisecond},
		{"20 s: 5 s before the end", 20 * time.Second, 0.5, 15 * time.Second},
		{"1.2 s: the broker's spacing", 1200 * time.Millisecond, 1, 1100 * time.Millisecond},
		{"1.2 s below the spacing: 85%", 1200 * time.Millisecond, 0, 1020 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := reauthAt(session{lifetime: tc.lifetime, start: start}, tc.u).Sub(start)
			if d := got - tc.want; d < -time.Microsecond || d > time.Microsecond {
				t.Fatalf("reauthAt(%v, %v) = start+%v, want start+%v", tc.lifetime, tc.u, got, tc.want)
			}
		})
	}
}

// FuzzReauthAt: for any lifetime and u, the point is within [50%, 95%] of
// the lifetime after the start, within [85%, 95%] when that leaves
// reauthDrain, and later for larger u.
func FuzzReauthAt(f *testing.F) {
	f.Add(int64(time.Second), 0.0, 0.5)
	f.Add(int64(time.Millisecond), 1.0, 0.0)
	f.Add(int64(24*time.Hour), 0.3, 0.7)
	f.Fuzz(func(t *testing.T, lifetime int64, u1, u2 float64) {
		if lifetime <= 0 || lifetime > int64(365*24*time.Hour) {
			return // a session has a positive lifetime (SessionLifetimeMillis fits)
		}
		start := time.Unix(1_700_000_000, 0)
		s := session{lifetime: time.Duration(lifetime), start: start}
		lo := time.Duration(float64(lifetime) * reauthMinFraction)
		hi := time.Duration(float64(lifetime) * reauthMaxFraction)
		if hi > time.Duration(lifetime)-reauthDrain {
			lo = time.Duration(float64(lifetime) * reauthFloorFraction)
		}
		at1, at2 := reauthAt(s, u1).Sub(start), reauthAt(s, u2).Sub(start)
		for _, at := range []time.Duration{at1, at2} {
			if at < lo || at > hi {
				t.Fatalf("lifetime %v: reauth at +%v, outside [%v, %v]", time.Duration(lifetime), at, lo, hi)
			}
		}
		if u1 < u2 && at1 > at2 {
			t.Fatalf("lifetime %v: u %v gives +%v, later than u %v's +%v", time.Duration(lifetime), u1, at1, u2, at2)
		}
	})
}

// saslVersions is fakeVersions plus SaslHandshake v1 and SaslAuthenticate
// v0-v2 (v1 carries SessionLifetimeMillis).
func saslVersions() *kmsg.ApiVersionsResponse {
	resp := fakeVersions()
	for _, k := range [][3]int16{{17, 0, 1}, {36, 0, 2}} {
		ak := kmsg.NewApiVersionsResponseApiKey()
		ak.ApiKey, ak.MinVersion, ak.MaxVersion = k[0], k[1], k[2]
		resp.ApiKeys = append(resp.ApiKeys, ak)
	}
	return resp
}

// recMech is PLAIN recording whether each exchange is a re-authentication.
type recMech struct {
	SASLMechanism
	mu     sync.Mutex
	reauth []bool
}

func (m *recMech) Start(ctx context.Context, b SASLBroker) (SASLSession, []byte, error) {
	m.mu.Lock()
	m.reauth = append(m.reauth, b.Reauth)
	m.mu.Unlock()
	return m.SASLMechanism.Start(ctx, b)
}

func (m *recMech) starts() []bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]bool(nil), m.reauth...)
}

func newRecMech() *recMech { return &recMech{SASLMechanism: PureSASL(sasl.Plain("u", "p"))} }

// saslBroker serves one connection: ApiVersions, then SaslHandshake and
// SaslAuthenticate (answered with the lifetime the i-th exchange on the
// connection gets from lifetimes, the last one repeating; an exchange
// refuse says to refuse is answered SASL_AUTHENTICATION_FAILED), and
// Metadata. Every request's key goes to seen, in order. A Metadata
// request is held unanswered until the next request arrives when hold
// says so, so it is in flight when that request is written.
type saslBroker struct {
	lifetimes []int64
	refuse    func(exchange int) bool
	hold      func(metadata int) bool
	seen      chan int16
}

func (sb *saslBroker) serve(bc *brokerConn) {
	if r, err := bc.read(); err != nil || r.key != 18 || bc.respond(r, saslVersions()) != nil {
		return
	}
	exchanges, metadatas := 0, 0
	var held []request
	answer := func(r request) error {
		switch r.key {
		case 17:
			resp := kmsg.NewPtrSASLHandshakeResponse()
			resp.SupportedMechanisms = []string{"PLAIN"}
			return bc.respond(r, resp)
		case 36:
			resp := kmsg.NewPtrSASLAuthenticateResponse()
			i := min(exchanges, len(sb.lifetimes)-1)
			if sb.refuse != nil && sb.refuse(exchanges) {
				resp.ErrorCode = 58 // SASL_AUTHENTICATION_FAILED
				resp.ErrorMessage = kmsg.StringPtr("refused by the test")
			} else {
				resp.SessionLifetimeMillis = sb.lifetimes[i]
			}
			exchanges++
			return bc.respond(r, resp)
		case 3:
			return bc.respond(r, metadataResp("c"))
		}
		return errors.New("unexpected request")
	}
	for {
		r, err := bc.read()
		if err != nil {
			return
		}
		select {
		case sb.seen <- r.key:
		case <-bc.done:
			return
		}
		for _, h := range held {
			if answer(h) != nil {
				return
			}
		}
		held = held[:0]
		if r.key == 3 {
			metadatas++
			if sb.hold != nil && sb.hold(metadatas) {
				held = append(held, r)
				continue
			}
		}
		if answer(r) != nil {
			return
		}
	}
}

// dialSASL dials a fake broker serving sb with mechanism m.
func dialSASL(t *testing.T, sb *saslBroker, m SASLMechanism) *Conn {
	t.Helper()
	fb := newFakeBroker(t, sb.serve)
	cfg := testConfig()
	cfg.SASL = m
	return mustDial(t, cfg, fb.Addr())
}

// nextKeys reads n request keys from seen, failing after a generous bound.
func nextKeys(t *testing.T, seen <-chan int16, n int, what string) []int16 {
	t.Helper()
	var out []int16
	for range n {
		out = append(out, await(t, seen, 10*time.Second, what))
	}
	return out
}

func keyNames(keys []int16) string {
	var names []string
	for _, k := range keys {
		names = append(names, kmsg.NameForKey(k))
	}
	return strings.Join(names, " ")
}

// TestReauthKeepsInFlight: with a session lifetime the connection
// re-authenticates on its own (the mechanism told it is a
// re-authentication) and goes on serving; a request in flight when the
// re-authentication starts is answered, in order, before the exchange,
// and requests after it are served on the same connection.
func TestReauthKeepsInFlight(t *testing.T) {
	sb := &saslBroker{lifetimes: []int64{500}, hold: func(n int) bool { return n == 1 }, seen: make(chan int16, 64)}
	m := newRecMech()
	c := dialSASL(t, sb, m)
	if got := keyNames(nextKeys(t, sb.seen, 2, "dial exchange")); got != "SASLHandshake SASLAuthenticate" {
		t.Fatalf("dial: broker saw %s", got)
	}
	first := async(func() (kmsg.Response, error) { return c.Request(context.Background(), metadataReq()) })
	// The broker holds the Metadata request until the next request, the
	// re-authentication's SaslHandshake, arrives.
	if got := keyNames(nextKeys(t, sb.seen, 3, "metadata, then re-authentication")); got != "Metadata SASLHandshake SASLAuthenticate" {
		t.Fatalf("broker saw %s, want Metadata SASLHandshake SASLAuthenticate", got)
	}
	r := await(t, first, 10*time.Second, "in-flight Metadata")
	if r.err != nil {
		t.Fatalf("Metadata in flight during re-authentication: %v", r.err)
	}
	if id := clusterID(t, r.resp); id != "c" {
		t.Fatalf("cluster id %q", id)
	}
	resp, err := c.Request(context.Background(), metadataReq())
	if err != nil {
		t.Fatalf("Metadata after re-authentication: %v", err)
	}
	clusterID(t, resp)
	if err := c.Err(); err != nil {
		t.Fatalf("connection closed: %v", err)
	}
	if got := m.starts(); len(got) < 2 || got[0] || !got[1] {
		t.Fatalf("exchanges (Reauth flags) %v, want [false true ...]", got)
	}
}

// TestReauthRefusedCloses: a refused re-authentication closes the
// connection with ErrConnClosed naming the failure (not ErrAuth: what
// waited is retried elsewhere and the next dial reports the credentials
// problem itself, see reauth.go); the request in flight before it is
// still answered, and later requests fail with ErrConnClosed.
func TestReauthRefusedCloses(t *testing.T) {
	sb := &saslBroker{lifetimes: []int64{500}, refuse: func(i int) bool { return i >= 1 },
		hold: func(n int) bool { return n == 1 }, seen: make(chan int16, 64)}
	c := dialSASL(t, sb, newRecMech())
	nextKeys(t, sb.seen, 2, "dial exchange")
	first := async(func() (kmsg.Response, error) { return c.Request(context.Background(), metadataReq()) })
	if got := keyNames(nextKeys(t, sb.seen, 3, "metadata, then re-authentication")); got != "Metadata SASLHandshake SASLAuthenticate" {
		t.Fatalf("broker saw %s", got)
	}
	if r := await(t, first, 10*time.Second, "in-flight Metadata"); r.err != nil {
		t.Fatalf("Metadata in flight before the refused re-authentication: %v", r.err)
	}
	awaitClosed(t, c, 10*time.Second)
	err := c.Err()
	if !errors.Is(err, errs.ErrConnClosed) || errors.Is(err, errs.ErrAuth) {
		t.Fatalf("close error %v: want ErrConnClosed, not ErrAuth", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "re-authentication failed") || !strings.Contains(msg, "refused by the test") {
		t.Fatalf("close error %q does not say re-authentication was refused", msg)
	}
	if _, err := c.Request(context.Background(), metadataReq()); !errors.Is(err, errs.ErrConnClosed) {
		t.Fatalf("request after refused re-authentication: %v, want ErrConnClosed", err)
	}
}

// TestReauthNoLifetime: a session without a lifetime (0, or negative) is
// never re-authenticated: while a connection with a short lifetime
// re-authenticates twice, one without sends nothing but its requests.
func TestReauthNoLifetime(t *testing.T) {
	for _, lifetime := range []int64{0, -1} {
		control := &saslBroker{lifetimes: []int64{100}, seen: make(chan int16, 64)}
		dialSASL(t, control, newRecMech())
		none := &saslBroker{lifetimes: []int64{lifetime}, seen: make(chan int16, 64)}
		m := newRecMech()
		c := dialSASL(t, none, m)
		nextKeys(t, control.seen, 6, "control: dial and two re-authentications")
		if _, err := c.Request(context.Background(), metadataReq()); err != nil {
			t.Fatalf("lifetime %d: Metadata: %v", lifetime, err)
		}
		got := nextKeys(t, none.seen, 3, "lifetime 0: dial and Metadata")
		select {
		case k := <-none.seen:
			got = append(got, k)
		default:
		}
		if keyNames(got) != "SASLHandshake SASLAuthenticate Metadata" {
			t.Fatalf("lifetime %d: broker saw %s", lifetime, keyNames(got))
		}
		if s := m.starts(); len(s) != 1 {
			t.Fatalf("lifetime %d: %d exchanges", lifetime, len(s))
		}
	}
}
