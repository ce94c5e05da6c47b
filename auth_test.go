package riffle

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
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
