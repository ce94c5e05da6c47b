package riffle

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/riffle-go/riffle/rifftest"
)

func TestTLS(t *testing.T) {
	c := rifftest.New(t, rifftest.Brokers(2), rifftest.SelfSignedTLS(), rifftest.RequireClientCert())
	cert, err := c.ClientCert("riffle-test")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	good := c.ClientTLS()
	good.Certificates = []tls.Certificate{cert}
	cl := newTestClient(t, SeedBrokers(c.Addrs()...), DialTLS(good))
	brokers, err := cl.Brokers(ctx)
	if err != nil || len(brokers) != 2 {
		t.Fatalf("brokers %v, err %v", brokers, err)
	}

	// Not trusting the broker's CA: a tls failure, named as such.
	untrusting := newTestClient(t, SeedBrokers(c.Addrs()...), DialTLS(&tls.Config{Certificates: []tls.Certificate{cert}}), RetryTimeout(300*time.Millisecond))
	err = untrusting.Ping(ctx)
	var ue *UnreachableError
	if !errors.As(err, &ue) || ue.Addrs[0].Cause() != "tls" {
		t.Fatalf("want an unreachable error with cause tls, got %v", err)
	}

	// No client certificate: the broker refuses the handshake.
	noCert := newTestClient(t, SeedBrokers(c.Addrs()...), DialTLS(c.ClientTLS()), RetryTimeout(300*time.Millisecond))
	if err := noCert.Ping(ctx); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("want ErrUnreachable without a client certificate, got %v", err)
	}
}

// Bootstrap through real blackholed addresses (full accept backlog: SYNs are
// dropped, connect hangs) listed before the live seed.
func TestBootstrapThroughBlackholes(t *testing.T) {
	live := rifftest.New(t)
	var seeds []string
	for i := 0; i < 2; i++ {
		bh, err := rifftest.NewBlackhole()
		if err != nil {
			t.Skip("blackhole addresses unsupported here:", err)
		}
		t.Cleanup(func() { bh.Close() })
		seeds = append(seeds, bh.Addr())
	}
	seeds = append(seeds, live.Addrs()...)
	h := &recordingHooks{}
	cl := newTestClient(t, SeedBrokers(seeds...), WithHooks(h), DialStagger(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cl.Brokers(ctx); err != nil {
		t.Fatal(err)
	}
	// Seeds are tried in random order: every blackhole dialed before the
	// live seed was cancelled once it won, and the live one succeeded.
	n := int(h.connects.Load())
	var cancelled int
	for _, e := range h.errs() {
		if strings.Contains(e, "context canceled") {
			cancelled++
		}
	}
	if n < 1 || n > 3 || cancelled != n-1 || len(h.errs()) != n-1 {
		t.Fatalf("%d attempts, %d cancelled, errors %v", n, cancelled, h.errs())
	}
}
