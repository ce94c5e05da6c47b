package riffle

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// DisableCommits: the member commits nothing by itself, on Close either
// (offsets are a transactional producer's to commit); DisableAutoCommit
// still commits the finished work on Close.
func TestDisableCommits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opt    ConsumerOption
		commit bool
	}{
		{"DisableCommits", DisableCommits(), false},
		{"DisableAutoCommit", DisableAutoCommit(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
			cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
			produceRecords(t, cl, recs("t", "r", 10))
			var handled atomic.Int32
			cs, err := NewConsumer(cl, ConsumerGroup("g"), SubscribeTopics("t"), OffsetReset(ResetEarliest), tc.opt,
				HandleRecord(func(context.Context, *Record) error { handled.Add(1); return nil }))
			if err != nil {
				t.Fatal(err)
			}
			waitUntil(t, 30*time.Second, func() bool { return handled.Load() == 10 }, func() string { return statsString(cs) })
			ctx := txnCtx(t)
			if _, err := cs.Close(ctx); err != nil {
				t.Fatal(err)
			}
			offs, err := cl.Admin().FetchOffsets(ctx, "g")
			if err != nil {
				t.Fatal(err)
			}
			if got := len(offs) > 0; got != tc.commit {
				t.Fatalf("committed %v, want commits %v", offs, tc.commit)
			}
		})
	}
}
