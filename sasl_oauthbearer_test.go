package riffle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/saslfake"
	"github.com/twmb/franz-go/pkg/kfake"
)

func newSASLFake(t *testing.T, kf *kfake.Cluster, cfg saslfake.Config) *saslfake.Fake {
	t.Helper()
	f, err := saslfake.New(kf.ListenAddrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

func staticToken(tok OAuthBearerToken) func(context.Context) (OAuthBearerToken, error) {
	return func(context.Context) (OAuthBearerToken, error) { return tok, nil }
}

func TestSASLOAuthBearer(t *testing.T) {
	kf := newFake(t, kfake.NumBrokers(2), kfake.SeedTopics(2, "t"))
	var mu sync.Mutex
	var seen []saslfake.Auth
	fake := newSASLFake(t, kf, saslfake.Config{Validate: func(a saslfake.Auth) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, a)
		return nil, nil
	}})
	ext := map[string]string{"logicalCluster": "lkc-123", "traceId": "a b"}
	var calls atomic.Int32
	mech := SASLOAuthBearer(func(ctx context.Context) (OAuthBearerToken, error) {
		calls.Add(1)
		return OAuthBearerToken{Token: "eyJhbGciOi.eyJzdWIi.sig-_", Expiry: time.Now().Add(time.Hour), Principal: "svc", Extensions: ext}, nil
	})
	cl := newTestClient(t, SeedBrokers(fake.Addrs()...), SASL(mech))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	for i := range 2 {
		if err := p.ProduceSync(ctx, &Record{Topic: "t", Partition: int32(i), Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 2 {
		t.Fatalf("%d authentications, want one per connection (at least 2)", len(seen))
	}
	for _, a := range seen {
		if a.Mechanism != "OAUTHBEARER" || a.Token != "eyJhbGciOi.eyJzdWIi.sig-_" || a.Principal != "svc" || !maps.Equal(a.Extensions, ext) {
			t.Errorf("fake saw %s token %q principal %q extensions %v", a.Mechanism, a.Token, a.Principal, a.Extensions)
		}
	}
	// The token lives an hour: every connection reused the first one.
	if n := calls.Load(); n != 1 {
		t.Errorf("token source called %d times, want 1 (cached)", n)
	}
}

func TestSASLOAuthBearerRejected(t *testing.T) {
	kf := newFake(t, kfake.NumBrokers(2))
	fake := newSASLFake(t, kf, saslfake.Config{Validate: func(a saslfake.Auth) ([]byte, error) {
		return nil, errors.New("invalid_token")
	}})
	const token = "the.secret.token"
	h := &recordingHooks{}
	cl := newTestClient(t, SeedBrokers(fake.Addrs()...), WithHooks(h),
		SASL(SASLOAuthBearer(staticToken(OAuthBearerToken{Token: token}))))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := cl.Admin().ListTopics(ctx)
	if err == nil {
		t.Fatal("a rejected token authenticated")
	}
	if ctx.Err() != nil {
		t.Fatalf("the call waited out its context: %v", err)
	}
	if !errors.Is(err, ErrAuth) || !errors.Is(err, ErrSASLAuthentication) || IsRetriable(err) {
		t.Fatalf("want a non-retriable ErrAuth and ErrSASLAuthentication, got %v", err)
	}
	var oe *OAuthBearerError
	if !errors.As(err, &oe) || oe.Status != "invalid_token" {
		t.Fatalf("want an *OAuthBearerError with status invalid_token, got %v", err)
	}
	for _, s := range []string{"OAUTHBEARER", "invalid_token", "broker 127.0.0.1:"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error does not say %q: %v", s, err)
		}
	}
	if strings.Contains(err.Error(), token) {
		t.Errorf("error shows the token: %v", err)
	}
	if n := h.connects.Load(); n > 2 {
		t.Errorf("%d connection attempts for a rejected token", n)
	}
	if s := fake.Stats(); s.Rejected == 0 || s.Authentications != 0 {
		t.Errorf("fake stats %+v", s)
	}
}

func TestSASLOAuthBearerSourceError(t *testing.T) {
	kf := newFake(t)
	var validated atomic.Int32
	fake := newSASLFake(t, kf, saslfake.Config{Validate: func(saslfake.Auth) ([]byte, error) {
		validated.Add(1)
		return nil, nil
	}})
	errIdP := errors.New("identity provider says no")
	for name, src := range map[string]func(context.Context) (OAuthBearerToken, error){
		"error":         func(context.Context) (OAuthBearerToken, error) { return OAuthBearerToken{}, errIdP },
		"expired":       staticToken(OAuthBearerToken{Token: "tok", Expiry: time.Now().Add(-time.Minute)}),
		"bad token":     staticToken(OAuthBearerToken{Token: "tok\x01en"}),
		"bad extension": staticToken(OAuthBearerToken{Token: "tok", Extensions: map[string]string{"auth": "x"}}),
	} {
		t.Run(name, func(t *testing.T) {
			cl := newTestClient(t, SeedBrokers(fake.Addrs()...), SASL(SASLOAuthBearer(src)))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := cl.Admin().ListTopics(ctx)
			if !errors.Is(err, ErrAuth) || ctx.Err() != nil {
				t.Fatalf("want ErrAuth before the deadline, got %v", err)
			}
			if name == "error" && !errors.Is(err, errIdP) {
				t.Errorf("the source's error is not wrapped: %v", err)
			}
			if !strings.Contains(err.Error(), "OAUTHBEARER") {
				t.Errorf("error does not name the mechanism: %v", err)
			}
		})
	}
	if n := validated.Load(); n != 0 {
		t.Errorf("the fake validated %d messages; nothing should have been sent", n)
	}
}

func TestSASLOAuthBearerTokenCache(t *testing.T) {
	var calls atomic.Int32
	var expiry atomic.Pointer[time.Time]
	mech := SASLOAuthBearer(func(context.Context) (OAuthBearerToken, error) {
		calls.Add(1)
		return OAuthBearerToken{Token: fmt.Sprint("t", calls.Load()), Expiry: *expiry.Load()}, nil
	})
	ctx := context.Background()
	// No expiry: fetched for every authentication.
	var zero time.Time
	expiry.Store(&zero)
	for range 3 {
		if _, _, err := mech.Authenticate(ctx, SASLBroker{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("%d calls without expiry, want 3", n)
	}
	// A token already past 80% of its life (it is fetched as it expires
	// almost at once) is fetched again: the cache never hands out a token
	// about to expire.
	soon := time.Now().Add(time.Millisecond)
	expiry.Store(&soon)
	mech.Authenticate(ctx, SASLBroker{})
	<-time.After(2 * time.Millisecond)
	later := time.Now().Add(time.Hour)
	expiry.Store(&later)
	mech.Authenticate(ctx, SASLBroker{})
	mech.Authenticate(ctx, SASLBroker{})
	if n := calls.Load(); n != 5 {
		t.Fatalf("%d calls, want 5 (3 uncached, 1 short-lived, 1 cached for the next two)", n)
	}
}

func TestOAuthBearerTokenNeverPrintsToken(t *testing.T) {
	tok := OAuthBearerToken{Token: "hunter2", Principal: "p", Extensions: map[string]string{"k": "v"}, Expiry: time.Now()}
	mech := SASLOAuthBearer(staticToken(tok))
	mech.Authenticate(context.Background(), SASLBroker{}) // caches nothing (expired), but try
	for _, v := range []any{tok, &tok, mech, struct{ T OAuthBearerToken }{tok}} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
			if out := fmt.Sprintf(verb, v); strings.Contains(out, "hunter2") {
				t.Errorf("%s prints the token: %s", verb, out)
			}
		}
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "tok", tok, "mech", mech)
	if strings.Contains(buf.String(), "hunter2") {
		t.Errorf("slog prints the token: %s", buf.String())
	}
}

// TestSASLReauthentication runs a producer and a consumer through a broker
// that grants short sessions (KIP-368) and closes any connection that sends
// a request after its session ended: every connection must re-authenticate
// in time, again and again, without failing, losing or reordering a record.
// Then the broker refuses re-authentications: those connections close,
// and their requests go through new connections, still without loss.
func TestSASLReauthentication(t *testing.T) {
	kf := newFake(t, kfake.NumBrokers(2), kfake.SeedTopics(4, "t"))
	var rejectReauth atomic.Bool
	var tokens atomic.Int32
	fake := newSASLFake(t, kf, saslfake.Config{
		SessionLifetime: 3 * time.Second,
		Validate: func(a saslfake.Auth) ([]byte, error) {
			if a.Reauth && rejectReauth.Load() {
				return nil, errors.New("invalid_token")
			}
			return nil, nil
		},
	})
	mech := SASLOAuthBearer(func(context.Context) (OAuthBearerToken, error) {
		return OAuthBearerToken{Token: fmt.Sprint("tok", tokens.Add(1))}, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	pcl := newTestClient(t, SeedBrokers(fake.Addrs()...), SASL(mech))
	ccl := newTestClient(t, SeedBrokers(fake.Addrs()...), SASL(mech))
	p, err := NewProducer(pcl, Linger(time.Millisecond), WithPartitioner(ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	var cmu sync.Mutex
	consumed := map[int32][]int{} // partition -> sequence numbers in consumed order
	ncons := 0
	cs, err := NewConsumer(ccl, FetchMaxWait(100*time.Millisecond), OnPartitionError(func(pe *PartitionError) { t.Logf("partition error: %v", pe) }), HandleRecord(func(_ context.Context, r *Record) error {
		var seq int
		fmt.Sscan(string(r.Value), &seq)
		cmu.Lock()
		consumed[r.Partition] = append(consumed[r.Partition], seq)
		ncons++
		cmu.Unlock()
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	for i := range int32(4) {
		if err := cs.Assign(Assignment{TopicPartition{"t", i}, AtEarliest()}); err != nil {
			t.Fatal(err)
		}
	}

	// produce writes records round-robin over the partitions, each value
	// its sequence number, until stop; it returns how many it produced.
	var failed atomic.Int32
	var firstErr atomic.Value
	produce := func(from int, stop <-chan struct{}) int {
		n := from
		for {
			select {
			case <-stop:
				return n
			default:
			}
			p.Produce(ctx, &Record{Topic: "t", Partition: int32(n % 4), Value: []byte(fmt.Sprint(n))}, func(_ *Record, err error) {
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			})
			n++
			if n%50 == 0 {
				// Continuous, not flat out: the test is about
				// sessions, and a starved scheduler would only
				// measure the machine.
				<-time.After(time.Millisecond)
			}
		}
	}
	run := func(from int, until func(saslfake.Stats) bool) int {
		stop := make(chan struct{})
		res := make(chan int)
		go func() { res <- produce(from, stop) }()
		_, werr := fake.WaitFor(ctx, until)
		close(stop)
		n := <-res
		if werr != nil {
			t.Fatal(werr)
		}
		return n
	}

	n := run(0, func(s saslfake.Stats) bool { return s.MaxReauthsPerConn >= 2 })
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	s := fake.Stats()
	t.Logf("after %d records: %+v", n, s)
	if s.Expired != 0 {
		t.Fatalf("%d connections sent a request after their session ended: %+v", s.Expired, s)
	}
	if f := failed.Load(); f != 0 {
		t.Fatalf("%d records failed across re-authentications, first: %v", f, firstErr.Load())
	}

	// Re-authentications now fail: the connections close as they come
	// due, new ones authenticate, and the records keep going through.
	rejectReauth.Store(true)
	before := s
	n = run(n, func(s saslfake.Stats) bool {
		return s.Rejected >= before.Rejected+4 && s.Authentications >= before.Authentications+4
	})
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if f := failed.Load(); f != 0 {
		t.Fatalf("%d records failed when re-authentication failed, first: %v", f, firstErr.Load())
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// The consumer, re-authenticating too, reads every record once, in
	// order per partition.
	for {
		cmu.Lock()
		got := ncons
		cmu.Unlock()
		if got >= n {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("consumed %d of %d records", got, n)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if _, err := cs.Close(ctx); err != nil {
		t.Fatal(err)
	}
	cmu.Lock()
	defer cmu.Unlock()
	for part, seqs := range consumed {
		for i, seq := range seqs {
			if want := i*4 + int(part); seq != want {
				t.Fatalf("partition %d: record %d is %d, want %d (lost, duplicated or reordered)", part, i, seq, want)
			}
		}
	}
	if ncons != n {
		t.Fatalf("consumed %d records, produced %d", ncons, n)
	}
	t.Logf("final: %+v", fake.Stats())
}
