package riffle

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
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
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
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
			if d := time.Since(start); d > time.Second {
				t.Fatalf("took %v, want at once", d)
			}
		})
	}
}
