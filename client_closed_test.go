package riffle

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every constructor taking a Client, and the Admin, fail at once with
// ErrClosed on a closed Client.
func TestConstructorsOnClosedClient(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	cl.Close()
	noop := HandleRecord(func(context.Context, *Record) error { return nil })
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"NewProducer", func() error { _, err := NewProducer(cl); return err }},
		{"NewConsumer", func() error { _, err := NewConsumer(cl, noop); return err }},
		{"NewConsumer group", func() error {
			_, err := NewConsumer(cl, noop, ConsumerGroup("g"), SubscribeTopics("t"))
			return err
		}},
		{"NewShareConsumer", func() error { _, err := NewShareConsumer(cl, noop, ShareGroup("s"), SubscribeTopics("t")); return err }},
		{"Admin", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := cl.Admin().ListTopics(ctx)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			err := tc.call()
			if !errors.Is(err, ErrClosed) || !errors.Is(err, ErrClientClosed) {
				t.Fatalf("err %v, want ErrClientClosed (ErrClosed)", err)
			}
			// At once: a loaded machine may stall a goroutine for a
			// second, but not for the 30 s of a wait that should not
			// have started.
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("took %v, want at once", d)
			}
		})
	}
}

// A client closed while a metadata refresh is in flight does not warn
// that the refresh failed: Close ended it, nothing failed (defect D3 of
// docs/real-kafka.md; nearly every real-broker test logged it at its end).
// A refresh that does fail still warns.
func TestCloseDuringRefreshNotWarned(t *testing.T) {
	for _, tc := range []struct {
		name  string
		close bool // close the client during the refresh, else fail it
	}{{"closed", true}, {"failed", false}} {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFake(t, kfake.NumBrokers(1))
			inflight := make(chan struct{})
			release := make(chan struct{})
			var seen atomic.Int32
			fake.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
				fake.KeepControl()
				if seen.Add(1) != 1 {
					return nil, nil, false
				}
				close(inflight)
				if !tc.close {
					return nil, errors.New("refused"), true // kfake drops the connection
				}
				fake.SleepControl(func() { <-release })
				return nil, nil, false
			})
			defer close(release) // before the fake closes (a Cleanup)
			buf := &syncWriter{w: new(bytes.Buffer)}
			cl, err := NewClient(SeedBrokers(fake.ListenAddrs()...), RetryTimeout(time.Second),
				Logger(slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelWarn}))))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			done := make(chan error, 1)
			go func() { done <- cl.cl.RefreshMetadata(context.Background()) }()
			select {
			case <-inflight:
			case <-time.After(20 * time.Second):
				t.Fatal("no Metadata request reached the broker")
			}
			if tc.close {
				cl.Close()
			}
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("the refresh did not end")
			}
			warned := strings.Contains(buf.String(), "metadata refresh failed")
			if tc.close {
				if !errors.Is(err, ErrClientClosed) {
					t.Fatalf("refresh ended by Close: %v, want ErrClientClosed", err)
				}
				if warned {
					t.Fatalf("a refresh ended by Close was warned about:\n%s", buf.String())
				}
				return
			}
			if !warned {
				t.Fatalf("a failed refresh (then %v) was not warned about: %q", err, buf.String())
			}
		})
	}
}
