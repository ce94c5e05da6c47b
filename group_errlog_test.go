package riffle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestErrLogOnce(t *testing.T) {
	var o errLogOnce
	a, b := errors.New("a"), fmt.Errorf("wrapped: %w", errors.New("a"))
	for i, tc := range []struct {
		err  error
		want bool
	}{{a, true}, {a, false}, {errors.New("a"), false}, {b, true}, {b, false}} {
		if got := o.first(tc.err); got != tc.want {
			t.Errorf("%d: first(%v) = %v, want %v", i, tc.err, got, tc.want)
		}
	}
	o.reset()
	if !o.first(a) {
		t.Error("after reset, first(a) = false, want true")
	}
}

// A group error the member meets on every retry (classic JoinGroup
// answered INCONSISTENT_GROUP_PROTOCOL; a KIP-848 assignor the broker does
// not know, UNSUPPORTED_ASSIGNOR) is logged at Error once, its repeats at
// Debug; the member keeps retrying, and OnGroupError hears every one.
func TestGroupErrorLoggedOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		code int16
		opts func(fake *kfake.Cluster) []ConsumerOption
	}{
		{"classic inconsistent protocol", kafkaerr.InconsistentGroupProtocol, func(fake *kfake.Cluster) []ConsumerOption {
			fake.ControlKey(int16(kmsg.JoinGroup), func(kr kmsg.Request) (kmsg.Response, error, bool) {
				fake.KeepControl()
				resp := kr.ResponseKind().(*kmsg.JoinGroupResponse)
				resp.ErrorCode = kafkaerr.InconsistentGroupProtocol
				return resp, nil, true
			})
			return nil
		}},
		{"kip-848 unsupported assignor", kafkaerr.UnsupportedAssignor, func(*kfake.Cluster) []ConsumerOption {
			return []ConsumerOption{WithGroupProtocol(GroupProtocolConsumer), GroupRemoteAssignor("nonexistent")}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "el"))
			opts := tc.opts(fake)
			buf := &syncWriter{w: new(bytes.Buffer)}
			cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), RetryBackoff(10*time.Millisecond, 50*time.Millisecond),
				Logger(slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))))
			var reported atomic.Int32
			var wrong atomic.Value
			cs, err := NewConsumer(cl, append(opts,
				ConsumerGroup("g-el"), SubscribeTopics("el"),
				HandleRecord(func(context.Context, *Record) error { return nil }),
				OnGroupError(func(err error) {
					if !errors.Is(err, ErrGroup) || !errors.Is(err, kafkaerr.ForCode(tc.code)) {
						wrong.CompareAndSwap(nil, err)
					}
					reported.Add(1)
				}))...)
			if err != nil {
				t.Fatal(err)
			}
			defer closeMember(t, cs)
			waitFor(t, 20*time.Second, "the error met on three attempts", func() bool { return reported.Load() >= 3 })
			if err := wrong.Load(); err != nil {
				t.Fatalf("OnGroupError got %v, want ErrGroup with error code %d", err, tc.code)
			}
			var errorLines, debugLines int
			for _, line := range strings.Split(buf.String(), "\n") {
				switch {
				case strings.Contains(line, "level=ERROR") && strings.Contains(line, `msg="group error"`):
					errorLines++
				case strings.Contains(line, "level=DEBUG") && strings.Contains(line, `msg="group error again"`):
					debugLines++
				}
			}
			if errorLines != 1 || debugLines < 2 {
				t.Errorf("%d Error and %d Debug lines for %d reports, want 1 Error and the rest at Debug; log:\n%s",
					errorLines, debugLines, reported.Load(), buf.String())
			}
		})
	}
}
