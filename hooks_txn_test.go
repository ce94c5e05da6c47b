package riffle

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// commitEvents returns a copy of the commit events h recorded.
func (h *recHooks) commitEvents() []CommitEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]CommitEvent(nil), h.commits...)
}

// Offsets sent to a transaction reach the CommitHooks (the client's and
// the producer's) once, when the transaction commits, one event per group
// with the offsets the coordinator accepted (a later offset of a partition
// replacing an earlier one); an aborted transaction and one without
// offsets report nothing.
func TestCommitHookTransactional(t *testing.T) {
	forModes(t, func(t *testing.T, mode txnMode) {
		fake, _, _ := txnCluster(t, mode, "in", "out")
		ctx := txnCtx(t)
		h, ph := &recHooks{}, &recHooks{}
		cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), WithHooks(h))
		p := startTxn(t, cl, "txn-hooks", WithProducerHooks(ph))
		in0, in1, in2 := TopicPartition{"in", 0}, TopicPartition{"in", 1}, TopicPartition{"in", 2}
		noGen := func(g string) GroupMetadata { return GroupMetadata{GroupID: g, GenerationID: -1} }
		none := func(when string) {
			t.Helper()
			if got := h.commitEvents(); len(got) != 0 {
				t.Fatalf("%s: commit events %+v", when, got)
			}
			if got := ph.commitEvents(); len(got) != 0 {
				t.Fatalf("%s: producer hook commit events %+v", when, got)
			}
		}

		// Aborted: nothing, neither when the offsets are sent nor after.
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p.ProduceSync(ctx, recs("out", "aborted", 2)...); err != nil {
			t.Fatal(err)
		}
		if err := p.SendOffsetsToTransaction(ctx, map[TopicPartition]OffsetAndMetadata{in0: {Offset: 5, LeaderEpoch: -1}, in1: {Offset: 6, LeaderEpoch: -1}}, noGen("g")); err != nil {
			t.Fatal(err)
		}
		none("offsets sent")
		if err := p.AbortTransaction(ctx); err != nil {
			t.Fatal(err)
		}
		none("aborted")

		// Committed: two groups, in0 sent twice.
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p.SendOffsetsToTransaction(ctx, map[TopicPartition]OffsetAndMetadata{in0: {Offset: 7, LeaderEpoch: -1, Metadata: "m"}, in2: {Offset: 3, LeaderEpoch: 2}}, noGen("g")); err != nil {
			t.Fatal(err)
		}
		if err := p.ProduceSync(ctx, recs("out", "committed", 2)...); err != nil {
			t.Fatal(err)
		}
		if err := p.SendOffsetsToTransaction(ctx, map[TopicPartition]OffsetAndMetadata{in0: {Offset: 8, LeaderEpoch: -1}}, noGen("g")); err != nil {
			t.Fatal(err)
		}
		if err := p.SendOffsetsToTransaction(ctx, map[TopicPartition]OffsetAndMetadata{in1: {Offset: 4, LeaderEpoch: -1}}, noGen("g2")); err != nil {
			t.Fatal(err)
		}
		none("before the commit")
		if err := p.CommitTransaction(ctx); err != nil {
			t.Fatal(err)
		}
		want := []CommitEvent{
			{Group: "g", Partitions: 2, Transactional: true, Offsets: map[TopicPartition]OffsetAndMetadata{
				in0: {Offset: 8, LeaderEpoch: -1}, in2: {Offset: 3, LeaderEpoch: 2},
			}},
			{Group: "g2", Partitions: 1, Transactional: true, Offsets: map[TopicPartition]OffsetAndMetadata{
				in1: {Offset: 4, LeaderEpoch: -1},
			}},
		}
		check := func(who string, got []CommitEvent) {
			t.Helper()
			if len(got) != len(want) {
				t.Fatalf("%s: %d commit events, want %d: %+v", who, len(got), len(want), got)
			}
			for i, e := range got {
				if e.Latency <= 0 {
					t.Errorf("%s: event %d latency %v", who, i, e.Latency)
				}
				e.Latency = 0
				if fmt.Sprint(e) != fmt.Sprint(want[i]) {
					t.Errorf("%s: event %d\n got %+v\nwant %+v", who, i, e, want[i])
				}
			}
		}
		check("client hook", h.commitEvents())
		check("producer hook", ph.commitEvents())
		// The events say what the groups now have.
		for _, w := range want {
			offs, err := cl.Admin().FetchOffsets(ctx, w.Group)
			if err != nil {
				t.Fatal(err)
			}
			for tp, om := range w.Offsets {
				if offs[tp].Offset != om.Offset {
					t.Errorf("group %s %s: committed %d, event says %d", w.Group, tp, offs[tp].Offset, om.Offset)
				}
			}
		}

		// A transaction without offsets reports nothing new.
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p.ProduceSync(ctx, recs("out", "plain", 2)...); err != nil {
			t.Fatal(err)
		}
		if err := p.CommitTransaction(ctx); err != nil {
			t.Fatal(err)
		}
		check("client hook after a transaction without offsets", h.commitEvents())
	})
}

// A consumer under ExactlyOnce commits nothing itself: every commit event
// of its group is transactional, and the last offsets they report are the
// group's committed offsets.
func TestCommitHookExactlyOnce(t *testing.T) {
	r := newEOSRig(t, txnModes[1], 3, 200)
	h := &recHooks{}
	cl := newTestClient(t, SeedBrokers(r.fake.ListenAddrs()...), WithHooks(h))
	p := startTxn(t, cl, "eos-hooks")
	cs, err := NewConsumer(cl, ConsumerGroup(r.group), SubscribeTopics("in"), OffsetReset(ResetEarliest),
		FetchMaxWait(100*time.Millisecond), MaxBatchRecords(20),
		ExactlyOnce(p, CommitEvery{Interval: 20 * time.Millisecond}),
		HandleRecord(func(ctx context.Context, rec *Record) error {
			transform(ctx, p, rec)
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	r.awaitCommitted(30*time.Second, func() string { return fmt.Sprintf("%d commit events", len(h.commitEvents())) })
	if _, err := cs.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	events := h.commitEvents()
	if len(events) == 0 {
		t.Fatal("no commit events")
	}
	last := map[TopicPartition]int64{}
	for _, e := range events {
		if !e.Transactional || e.Group != r.group || e.Err != nil || e.Partitions == 0 || e.Partitions != len(e.Offsets) {
			t.Fatalf("commit event %+v", e)
		}
		for tp, om := range e.Offsets {
			if om.Offset < last[tp] {
				t.Errorf("%s: event offset %d after %d", tp, om.Offset, last[tp])
			}
			last[tp] = om.Offset
		}
	}
	offs, err := r.cl.Admin().FetchOffsets(context.Background(), r.group)
	if err != nil {
		t.Fatal(err)
	}
	for tp, om := range offs {
		if last[tp] != om.Offset {
			t.Errorf("%s: committed %d, last commit event %d", tp, om.Offset, last[tp])
		}
	}
	if len(offs) != int(r.parts) {
		t.Errorf("committed offsets of %d partitions: %v", len(offs), offs)
	}
}
