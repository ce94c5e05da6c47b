package riffle

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestSASL(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(2), kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "plainuser", "plain-secret"),
		kfake.Superuser("SCRAM-SHA-256", "scram256", "scram256-secret"),
		kfake.Superuser("SCRAM-SHA-512", "scram512", "scram512-secret"),
	)
	tests := []struct {
		name   string
		mech   SASLMechanism
		secret string
		ok     bool
	}{
		{"plain", SASLPlain("plainuser", "plain-secret"), "plain-secret", true},
		{"scram256", SASLScramSHA256("scram256", "scram256-secret"), "scram256-secret", true},
		{"scram512", SASLScramSHA512("scram512", "scram512-secret"), "scram512-secret", true},
		{"plain wrong", SASLPlain("plainuser", "WRONG-plain"), "WRONG-plain", false},
		{"scram256 wrong", SASLScramSHA256("scram256", "WRONG-256"), "WRONG-256", false},
		{"scram512 wrong", SASLScramSHA512("scram512", "WRONG-512"), "WRONG-512", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &recordingHooks{}
			cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), SASL(tt.mech), WithHooks(h))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := cl.Admin().ListTopics(ctx)
			if tt.ok {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrAuth) {
				t.Fatalf("want ErrAuth, got %v", err)
			}
			if IsRetriable(err) {
				t.Fatal("auth failure must not be retriable")
			}
			if strings.Contains(err.Error(), tt.secret) {
				t.Fatalf("error leaks the password: %v", err)
			}
			if !strings.Contains(err.Error(), fake.ListenAddrs()[0]) {
				t.Fatalf("error does not name the broker: %v", err)
			}
			// Not a retry storm: one pass over the two seeds at most.
			if n := h.connects.Load(); n > 2 {
				t.Fatalf("%d connection attempts for bad credentials", n)
			}
		})
	}
}

// TestSASLMechanismNeverPrintsPassword checks every fmt verb and slog: the
// mechanism's unexported fields hold the password.
func TestSASLMechanismNeverPrintsPassword(t *testing.T) {
	for _, m := range []SASLMechanism{
		SASLPlain("user", "hunter2"), SASLScramSHA256("user", "hunter2"), SASLScramSHA512("user", "hunter2"), nil,
	} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d", "%T %[1]v"} {
			if out := fmt.Sprintf(verb, m); strings.Contains(out, "hunter2") || strings.Contains(out, hex.EncodeToString([]byte("hunter2"))) {
				t.Errorf("%s of %s prints the password: %s", verb, m, out)
			}
		}
		// fmt cannot call methods through unexported fields: a user's
		// config struct printed with %+v must not leak either.
		type userConfig struct {
			Mech SASLMechanism
			mech SASLMechanism
		}
		for _, verb := range []string{"%v", "%+v", "%#v"} {
			if out := fmt.Sprintf(verb, userConfig{m, m}); strings.Contains(out, "hunter2") {
				t.Errorf("%s of a struct holding %s prints the password: %s", verb, m, out)
			}
		}
		var buf bytes.Buffer
		slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "mech", m)
		if strings.Contains(buf.String(), "hunter2") {
			t.Errorf("slog prints the password: %s", buf.String())
		}
	}
}

// countingHandler counts log records at or above a level whose message
// contains a substring.
type countingHandler struct {
	level slog.Level
	sub   string
	n     atomic.Int32
}

func (h *countingHandler) Enabled(_ context.Context, l slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= h.level && strings.Contains(r.Message, h.sub) {
		h.n.Add(1)
	}
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

// TestSASLPlainWithoutTLSWarnsOnce checks that PLAIN over plaintext is
// logged as a warning once per client, however many connections it makes,
// and not at all with TLS or SCRAM.
func TestSASLPlainWithoutTLSWarnsOnce(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(2), kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "plainuser", "plain-secret"))
	h := &countingHandler{level: slog.LevelWarn, sub: "PLAIN"}
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), SASL(SASLPlain("plainuser", "plain-secret")), Logger(slog.New(h)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	brokers, err := cl.Brokers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range brokers { // a connection to each broker
		if _, err := cl.cl.Request(ctx, b.NodeID, cluster.ClassOther, kmsg.NewPtrApiVersionsRequest()); err != nil {
			t.Fatal(err)
		}
	}
	if n := h.n.Load(); n != 1 {
		t.Fatalf("%d PLAIN-over-plaintext warnings, want 1", n)
	}
	for name, opts := range map[string][]Option{
		"plain over tls": {SASL(SASLPlain("u", "p")), DialTLS(&tls.Config{})},
		"scram":          {SASL(SASLScramSHA256("u", "p"))},
	} {
		h := &countingHandler{level: slog.LevelWarn, sub: "PLAIN"}
		newTestClient(t, append(opts, SeedBrokers("127.0.0.1:1"), Logger(slog.New(h)))...)
		if n := h.n.Load(); n != 0 {
			t.Errorf("%s: %d PLAIN warnings, want none", name, n)
		}
	}
}
