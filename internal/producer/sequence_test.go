package producer

import (
	"fmt"
	"slices"
	"testing"
)

// The table tests below drive one Partition step by step. Batches are
// referred to by the order they were added (0, 1, ...); the harness keeps
// the send epoch of each batch's latest send and hands it back to Done, so
// a Done for a request sent before a rewind is naturally stale.

type harness struct {
	t       *testing.T
	p       *Partition
	bs      []*Batch
	ep      map[*Batch]uint64
	id      *Identity
	bumping bool
	leader  int32
}

type step struct {
	what string
	do   func(h *harness) error
}

var (
	id0 = Identity{ID: 7, Epoch: 0}
	id1 = Identity{ID: 7, Epoch: 1}
)

func runSteps(t *testing.T, p *Partition, steps []step) {
	t.Helper()
	id := id0
	h := &harness{t: t, p: p, ep: map[*Batch]uint64{}, id: &id, leader: 1}
	for i, s := range steps {
		if err := s.do(h); err != nil {
			t.Fatalf("step %d (%s): %v", i, s.what, err)
		}
	}
}

// add appends batches with the given record counts.
func add(records ...int32) step {
	return step{fmt.Sprintf("add %v", records), func(h *harness) error {
		for _, n := range records {
			b := &Batch{Records: n, Payload: len(h.bs)}
			h.p.Add(b)
			h.bs = append(h.bs, b)
		}
		return nil
	}}
}

// leader sets the leader passed to Next.
func leader(l int32) step {
	return step{fmt.Sprintf("leader %d", l), func(h *harness) error { h.leader = l; return nil }}
}

// identity sets the identity passed to Next (nil: no producer id yet).
func identity(id *Identity) step {
	return step{fmt.Sprintf("identity %v", id), func(h *harness) error { h.id = id; return nil }}
}

func bumping(on bool) step {
	return step{fmt.Sprintf("bumping %v", on), func(h *harness) error { h.bumping = on; return nil }}
}

// next expects Next to return batch want (-1: nil).
func next(want int) step {
	return step{fmt.Sprintf("next -> %d", want), func(h *harness) error {
		b, ep := h.p.Next(h.leader, h.id, h.bumping)
		got := -1
		if b != nil {
			got = b.Payload.(int)
			h.ep[b] = ep
		}
		if got != want {
			return fmt.Errorf("Next returned batch %d, want %d", got, want)
		}
		return nil
	}}
}

// sends expects Next to return exactly the batches want, then nil.
func sends(want ...int) step {
	return step{fmt.Sprintf("send %v", want), func(h *harness) error {
		var got []int
		for {
			b, ep := h.p.Next(h.leader, h.id, h.bumping)
			if b == nil {
				break
			}
			h.ep[b] = ep
			got = append(got, b.Payload.(int))
			if len(got) > 10 {
				break
			}
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("sent %v, want %v", got, want)
		}
		return nil
	}}
}

// res is the expected Result of Done: which batch completed or failed
// (-1: none) and the flags.
type res struct {
	completed, failed                  int
	dataLoss, rewound, needBump, stale bool
}

var (
	ok      = res{completed: -2, failed: -1} // completed: the batch passed to Done
	rewound = res{completed: -1, failed: -1, rewound: true}
	stale   = res{completed: -1, failed: -1, stale: true}
	bump    = res{completed: -1, failed: -1, rewound: true, needBump: true}
)

func failed(i int, dataLoss, needBump bool) res {
	return res{completed: -1, failed: i, dataLoss: dataLoss, rewound: true, needBump: needBump}
}

// done reports outcome o for batch i (base and logStart as the broker
// would) and checks the Result.
func done(i int, o Outcome, base, logStart int64, want res) step {
	return step{fmt.Sprintf("done %d %s", i, on(o)), func(h *harness) error {
		b := h.bs[i]
		r := h.p.Done(b, h.ep[b], o, base, logStart)
		idx := func(b *Batch) int {
			if b == nil {
				return -1
			}
			return b.Payload.(int)
		}
		if want.completed == -2 {
			want.completed = i
		}
		got := res{idx(r.Completed), idx(r.Failed), r.DataLoss, r.Rewound, r.NeedBump, r.Stale}
		if got != want {
			return fmt.Errorf("Result %+v, want %+v", got, want)
		}
		return nil
	}}
}

// pinned expects batch i to carry (id, seq).
func pinned(i int, id Identity, seq int32) step {
	return step{fmt.Sprintf("pinned %d %v/%d", i, id, seq), func(h *harness) error {
		b := h.bs[i]
		if !b.Pinned() || b.Seq != seq || b.ID != id {
			return fmt.Errorf("batch %d has %v/%d pinned=%v, want %v/%d", i, b.ID, b.Seq, b.Pinned(), id, seq)
		}
		return nil
	}}
}

func unpinned(is ...int) step {
	return step{fmt.Sprintf("unpinned %v", is), func(h *harness) error {
		for _, i := range is {
			if h.bs[i].Pinned() {
				return fmt.Errorf("batch %d pinned at %d", i, h.bs[i].Seq)
			}
		}
		return nil
	}}
}

func unknown(i int, want bool) step {
	return step{fmt.Sprintf("unknown %d %v", i, want), func(h *harness) error {
		if h.bs[i].Unknown != want {
			return fmt.Errorf("batch %d Unknown=%v", i, h.bs[i].Unknown)
		}
		return nil
	}}
}

func quiesced(want bool) step {
	return step{fmt.Sprintf("quiesced %v", want), func(h *harness) error {
		if got := h.p.Quiesced(); got != want {
			return fmt.Errorf("Quiesced() = %v", got)
		}
		return nil
	}}
}

func needsBump(want bool) step {
	return step{fmt.Sprintf("needsBump %v", want), func(h *harness) error {
		if got := h.p.NeedsBump(); got != want {
			return fmt.Errorf("NeedsBump() = %v", got)
		}
		return nil
	}}
}

func inflight(want int) step {
	return step{fmt.Sprintf("inflight %d", want), func(h *harness) error {
		if got := h.p.Inflight(); got != want {
			return fmt.Errorf("Inflight() = %d", got)
		}
		return nil
	}}
}

// queue expects the unacknowledged batches to be exactly want.
func queue(want ...int) step {
	return step{fmt.Sprintf("queue %v", want), func(h *harness) error {
		var got []int
		for _, b := range h.p.Batches() {
			got = append(got, b.Payload.(int))
		}
		if !slices.Equal(got, want) || h.p.Len() != len(want) {
			return fmt.Errorf("queue %v (Len %d), want %v", got, h.p.Len(), want)
		}
		return nil
	}}
}

// reset bumps: installs id and calls Reset (the caller checked Quiesced).
func reset(id Identity) step {
	return step{fmt.Sprintf("reset %v", id), func(h *harness) error {
		if !h.p.Quiesced() {
			return fmt.Errorf("Reset while not quiesced")
		}
		h.id, h.bumping = &id, false
		h.p.Reset()
		return nil
	}}
}

// expire expires the batches in which, expecting want removed.
func expire(which []int, want []int, wantBump bool) step {
	return step{fmt.Sprintf("expire %v -> %v bump=%v", which, want, wantBump), func(h *harness) error {
		out, nb := h.p.Expire(func(b *Batch) bool { return slices.Contains(which, b.Payload.(int)) })
		var got []int
		for _, b := range out {
			got = append(got, b.Payload.(int))
		}
		if !slices.Equal(got, want) || nb != wantBump {
			return fmt.Errorf("expired %v bump=%v", got, nb)
		}
		return nil
	}}
}

func attempts(i, want int) step {
	return step{fmt.Sprintf("attempts %d = %d", i, want), func(h *harness) error {
		if got := h.bs[i].Attempts; got != want {
			return fmt.Errorf("batch %d Attempts = %d", i, got)
		}
		return nil
	}}
}

// warm sends batch 0 (10 records) and acknowledges it at offset 0, so the
// leader has seen a success (pipelining allowed) and lastAcked is 9.
var warm = []step{add(10), next(0), done(0, OK, 0, 0, ok)}

func steps(parts ...[]step) []step { return slices.Concat(parts...) }

func TestPartitionRules(t *testing.T) {
	tests := []struct {
		name       string
		max        int
		idempotent bool
		steps      []step
	}{
		{"pinned on first Next, identical numbers on resend", 5, true, []step{
			add(10, 5, 3),
			unpinned(0, 1, 2),
			next(0), pinned(0, id0, 0), unpinned(1, 2),
			done(0, OK, 0, 0, ok),
			next(1), pinned(1, id0, 10),
			done(1, Retry, -1, 0, rewound),
			pinned(1, id0, 10),
			next(1), pinned(1, id0, 10), attempts(1, 2),
			done(1, Unknown, -1, -1, rewound),
			// A new identity without Reset does not touch pinned numbers.
			identity(&id1),
			next(1), pinned(1, id0, 10), attempts(1, 3),
			done(1, OK, 10, 0, ok),
		}},
		{"no producer id yet: nothing is pinned", 5, true, []step{
			add(1), identity(nil), next(-1), unpinned(0),
			identity(&id0), next(0), pinned(0, id0, 0),
		}},
		{"at most Max (5) in flight", 5, true, steps(warm, []step{
			add(1, 1, 1, 1, 1, 1),
			sends(1, 2, 3, 4, 5), inflight(5),
			done(1, OK, 10, 0, ok), inflight(4),
			sends(6), inflight(5),
		})},
		{"at most Max (2) in flight", 2, true, steps(warm, []step{
			add(1, 1, 1),
			sends(1, 2), done(1, OK, 10, 0, ok), sends(3),
		})},
		{"one in flight until the first success on a leader, then pipelining", 5, true, []step{
			add(1, 1, 1, 1, 1),
			sends(0), inflight(1),
			done(0, OK, 0, 0, ok),
			sends(1, 2, 3, 4), inflight(4),
			done(1, OK, 1, 0, ok), done(2, OK, 2, 0, ok), done(3, OK, 3, 0, ok), done(4, OK, 4, 0, ok),
			// A new leader (nothing outstanding) starts over with one.
			add(1, 1), leader(2),
			sends(5), done(5, OK, 5, 0, ok), sends(6),
		}},
		{"after a rewind, one in flight until a success", 5, true, steps(warm, []step{
			add(1, 1, 1),
			sends(1, 2, 3),
			done(1, Retry, -1, 0, rewound),
			done(2, OutOfOrder, -1, 0, stale), done(3, OutOfOrder, -1, 0, stale),
			sends(1), done(1, OK, 10, 0, ok), sends(2, 3),
		})},
		{"a leader change waits until outstanding requests drain", 5, true, steps(warm, []step{
			add(1, 1),
			sends(1, 2),
			add(1, 1),
			leader(2), next(-1),
			done(1, OK, 10, 0, ok), next(-1), // 2 still out on leader 1
			done(2, OK, 11, 0, ok),
			sends(3), // one at a time on the new leader
			done(3, OK, 12, 0, ok), sends(4),
		})},
		{"NOT_LEADER: resend to the new leader only once old requests drained", 5, true, steps(warm, []step{
			add(1, 1, 1),
			sends(1, 2, 3),
			leader(2),
			done(1, Retry, -1, 0, rewound), next(-1),
			done(2, Retry, -1, 0, stale), next(-1),
			done(3, Retry, -1, 0, stale),
			sends(1), pinned(1, id0, 10),
			done(1, OK, 10, 0, ok), sends(2, 3),
		})},
		{"Retry on the head rewinds, later results are stale, numbers kept", 5, true, steps(warm, []step{
			add(2, 2, 2),
			sends(1, 2, 3),
			done(1, Retry, -1, 0, rewound),
			next(-1), // requests from before the rewind are still out
			done(2, OutOfOrder, -1, 0, stale),
			done(3, Retry, -1, 0, stale),
			queue(1, 2, 3), pinned(1, id0, 10), pinned(2, id0, 12), pinned(3, id0, 14),
			unknown(1, false), unknown(2, false), unknown(3, false),
			quiesced(true), needsBump(false),
			sends(1), done(1, OK, 10, 0, ok),
			sends(2, 3), pinned(2, id0, 12), pinned(3, id0, 14),
		})},
		{"Unknown keeps the batch pinned and marks it Unknown", 5, true, steps(warm, []step{
			add(4, 4),
			sends(1, 2),
			done(1, Unknown, -1, -1, rewound),
			pinned(1, id0, 10), unknown(1, true),
			done(2, Retry, -1, 0, stale),
			quiesced(false),
			sends(1), pinned(1, id0, 10),
			done(1, Retry, -1, 0, rewound), unknown(1, true), quiesced(false),
			sends(1), done(1, OK, 10, 0, ok), // a duplicate: written the first time
			quiesced(true),
			sends(2), pinned(2, id0, 14),
		})},
		{"a stale OK or Unknown marks the batch, and those before it, maybe written", 5, true, steps(warm, []step{
			// 1 and 2 were written; 1's response was lost, 2's (OK)
			// arrives after the rewind and is dropped: 2 must not be
			// renumbered (bump, Expire) until a resend resolves it.
			add(1, 1, 1),
			sends(1, 2, 3),
			done(1, Unknown, -1, -1, rewound),
			done(2, OK, 11, 0, stale),
			done(3, Retry, -1, 0, stale),
			unknown(1, true), unknown(2, true), unknown(3, false),
			sends(1), done(1, OK, 10, 0, ok),
			quiesced(false), expire([]int{2}, nil, false),
			bumping(true), sends(2), // allowed while bumping: unknown
			done(2, Retry, -1, 0, rewound), quiesced(false),
			sends(2), done(2, OK, 11, 0, ok),
			quiesced(true), next(-1), // 3 is certainly unwritten: waits for the bump
			reset(id1), sends(3), pinned(3, id1, 0),
		})},
		{"a stale Unknown behind a certain failure still blocks renumbering", 5, true, steps(warm, []step{
			add(1, 1),
			sends(1, 2),
			done(1, Retry, -1, 0, rewound),
			done(2, Unknown, -1, -1, stale),
			// 2 may be written only if 1 is: both count as unknown, and
			// both may be resent while bumping.
			unknown(1, true), unknown(2, true), quiesced(false),
			bumping(true), sends(1), done(1, OK, 10, 0, ok), sends(2), done(2, OK, 11, 0, ok),
			quiesced(true),
		})},
		{"KIP-360: OUT_OF_ORDER after the log start passed the last ack", 5, true, steps(warm, []step{
			add(1, 1),
			sends(1, 2),
			done(1, OutOfOrder, -1, 10, bump), // logStart 10 > lastAcked 9
			queue(1, 2), unpinned(1, 2), needsBump(true),
			next(-1), // nothing is pinned before the bump
			quiesced(false),
			done(2, OutOfOrder, -1, 10, stale),
			quiesced(true),
			reset(id1), needsBump(false),
			sends(1), pinned(1, id1, 0),
			done(1, OK, 20, 20, ok), sends(2), pinned(2, id1, 1),
		})},
		{"KIP-360: UNKNOWN_PRODUCER_ID after the log start passed the last ack", 5, true, steps(warm, []step{
			add(1),
			sends(1),
			done(1, UnknownProducer, -1, 50, bump),
			unpinned(1), needsBump(true), quiesced(true),
			reset(id1), sends(1), pinned(1, id1, 0),
		})},
		{"OUT_OF_ORDER without truncation fails the head as data loss", 5, true, steps(warm, []step{
			add(1, 1, 1),
			sends(1, 2, 3),
			done(1, OutOfOrder, -1, 0, failed(1, true, true)), // logStart 0 <= lastAcked 9
			queue(2, 3), unpinned(2, 3), needsBump(true),
			done(2, OutOfOrder, -1, 0, stale), done(3, OutOfOrder, -1, 0, stale),
			next(-1), quiesced(true),
			reset(id1), sends(2), pinned(2, id1, 0),
		})},
		{"UNKNOWN_PRODUCER_ID without truncation fails the head as data loss", 5, true, steps(warm, []step{
			add(1),
			sends(1),
			done(1, UnknownProducer, -1, 9, failed(1, true, true)), // logStart 9 == lastAcked
			queue(),
		})},
		{"OUT_OF_ORDER with an unknown log start is data loss", 5, true, steps(warm, []step{
			add(1),
			sends(1),
			done(1, OutOfOrder, -1, -1, failed(1, true, true)),
		})},
		{"INVALID_PRODUCER_EPOCH: bump, no failure", 5, true, steps(warm, []step{
			add(1, 1),
			sends(1, 2),
			done(1, InvalidEpoch, -1, 0, bump),
			queue(1, 2), unpinned(1, 2), needsBump(true),
			next(-1),
			done(2, InvalidEpoch, -1, 0, stale),
			reset(id1), sends(1), pinned(1, id1, 0),
		})},
		{"Fatal fails the head; pinned followers are renumbered after a bump", 5, true, steps(warm, []step{
			add(1, 1, 1),
			sends(1, 2, 3),
			done(1, Fatal, -1, 0, failed(1, false, true)),
			queue(2, 3), unpinned(2, 3),
			done(2, OutOfOrder, -1, 0, stale), done(3, OutOfOrder, -1, 0, stale),
			reset(id1), sends(2), pinned(2, id1, 0),
		})},
		{"Fatal on the only pinned batch still needs a bump (its numbers are a hole)", 5, true, steps(warm, []step{
			add(5),
			sends(1), pinned(1, id0, 10),
			done(1, Fatal, -1, 0, failed(1, false, true)),
			needsBump(true),
			// Without the bump the next batch would be pinned at 15
			// and the broker, expecting 10, would answer OUT_OF_ORDER.
			add(1), next(-1), unpinned(2),
			reset(id1), sends(2), pinned(2, id1, 0),
		})},
		{"Quiesced: false while requests are out or an outcome is unknown", 5, true, []step{
			quiesced(true),
			add(1, 1),
			quiesced(true), // queued batches don't matter
			sends(0), quiesced(false),
			done(0, Unknown, -1, -1, rewound), quiesced(false),
			sends(0), quiesced(false),
			done(0, Retry, -1, 0, rewound), quiesced(false), // still unknown
			sends(0), done(0, OK, 0, 0, ok),
			quiesced(true),
			sends(1), quiesced(false), done(1, Retry, -1, 0, rewound), quiesced(true),
		}},
		{"Reset renumbers from 0 under the new identity", 5, true, steps(warm, []step{
			add(3, 4),
			sends(1, 2), pinned(1, id0, 10), pinned(2, id0, 13),
			done(1, Retry, -1, 0, rewound), done(2, Retry, -1, 0, stale),
			add(5),
			quiesced(true),
			reset(id1),
			unpinned(1, 2, 3), needsBump(false), queue(1, 2, 3),
			sends(1), pinned(1, id1, 0),
			done(1, OK, 20, 0, ok),
			sends(2, 3), pinned(2, id1, 3), pinned(3, id1, 7),
		})},
		{"Reset clears a pending bump", 5, true, steps(warm, []step{
			add(1),
			sends(1), done(1, OutOfOrder, -1, 0, failed(1, true, true)),
			add(1), next(-1),
			needsBump(true), quiesced(true),
			reset(id1), needsBump(false), sends(2), pinned(2, id1, 0),
		})},
		{"Expire: unpinned batches always, in-flight ones never", 5, true, []step{
			add(1, 1, 1),
			sends(0), // one until the first success
			expire([]int{0, 1, 2}, []int{1, 2}, false),
			queue(0), needsBump(false),
			done(0, OK, 0, 0, ok), queue(),
		}},
		{"Expire: a pinned, certainly unwritten batch only when nothing is out, then bump", 5, true, steps(warm, []step{
			add(1, 1, 1),
			sends(1, 2, 3),
			done(1, Retry, -1, 0, rewound),
			done(2, Retry, -1, 0, stale),
			expire([]int{2}, nil, false), // 3 still out
			done(3, Retry, -1, 0, stale),
			expire([]int{2}, []int{2}, true),
			queue(1, 3), unpinned(1, 3), needsBump(true),
			next(-1), quiesced(true),
			reset(id1), sends(1), pinned(1, id1, 0),
		})},
		{"Expire: never a batch with an unknown outcome, nor any pinned one while one exists", 5, true, steps(warm, []step{
			add(1, 1),
			sends(1, 2),
			add(1, 1),
			done(1, Unknown, -1, -1, rewound),
			done(2, Retry, -1, 0, stale),
			expire([]int{1, 2, 3, 4}, []int{3, 4}, false), // unpinned ones go
			queue(1, 2), pinned(1, id0, 10), pinned(2, id0, 11), needsBump(false),
			sends(1), done(1, OK, 10, 0, ok),
			expire([]int{2}, []int{2}, true),
		})},
		{"bumping: only pinned batches with unknown outcomes are sent", 5, true, steps(warm, []step{
			add(1, 1),
			sends(1, 2),
			add(1, 1),
			done(1, Unknown, -1, -1, rewound),
			done(2, OutOfOrder, -1, 0, stale), // 1 not written: 2 rejected
			unknown(2, false),
			bumping(true),
			sends(1), pinned(1, id0, 10), // unknown: resent with its numbers
			done(1, OK, 10, 0, ok),
			next(-1), // 2 pinned but certainly unwritten; 3 unpinned
			quiesced(true),
			reset(id1), sends(2), done(2, OK, 11, 0, ok), sends(3, 4),
			pinned(2, id1, 0), pinned(3, id1, 1), pinned(4, id1, 2),
		})},
		{"bumping: nothing new is pinned", 5, true, []step{
			add(1), bumping(true), next(-1), unpinned(0),
			bumping(false), next(0),
		}},
		{"non-idempotent: no numbers, still in order", 5, false, []step{
			add(1, 1, 1, 1),
			sends(0), unpinned(0), // one until a success
			done(0, OK, 0, 0, ok),
			sends(1, 2, 3), unpinned(1, 2, 3),
			done(1, Retry, -1, 0, rewound),
			done(2, OK, 2, 0, stale), done(3, OK, 3, 0, stale),
			sends(1), done(1, Unknown, -1, -1, rewound),
			sends(1), done(1, OK, 1, 0, ok),
			sends(2, 3),
			done(2, Fatal, -1, 0, failed(2, false, false)),
			needsBump(false),
			done(3, OK, 4, 0, stale), quiesced(true),
			sends(3), done(3, OK, 4, 0, ok), queue(),
		}},
		{"non-idempotent: bumping and identity do not matter", 5, false, []step{
			add(1, 1), identity(nil), bumping(true),
			sends(0), done(0, OK, 0, 0, ok), sends(1),
		}},
		{"TakeAll empties the partition; late results are stale", 5, true, steps(warm, []step{
			add(1, 1),
			sends(1, 2),
			step{"TakeAll", func(h *harness) error {
				if got := len(h.p.TakeAll()); got != 2 {
					return fmt.Errorf("TakeAll returned %d batches", got)
				}
				return nil
			}},
			queue(), inflight(2),
			done(1, OK, 10, 0, stale), done(2, OK, 11, 0, stale),
			inflight(0), quiesced(true),
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runSteps(t, NewPartition(tt.max, tt.idempotent), tt.steps)
		})
	}
}

func TestNewPartitionClampsMax(t *testing.T) {
	p := NewPartition(0, true)
	if p.Max != 1 {
		t.Fatalf("Max = %d, want 1", p.Max)
	}
}

// A batch carried by an unanswered request is never expired (its bytes are
// in use), and Reset refuses while requests are outstanding.
func TestExpireAndResetRespectOutstanding(t *testing.T) {
	p := NewPartition(5, true)
	id := &Identity{ID: 1, Epoch: 0}
	b1 := &Batch{Records: 1}
	b2 := &Batch{Records: 1}
	p.Add(b1)
	p.Add(b2)
	got, ep := p.Next(1, id, false)
	if got != b1 {
		t.Fatal("first Next")
	}
	if p.Reset() {
		t.Fatal("Reset must refuse with a request outstanding")
	}
	// b1 fails fatally: b2 is unpinned (never sent) and expirable, b1
	// was answered.
	p.Done(b1, ep, Fatal, -1, -1)
	out, _ := p.Expire(func(*Batch) bool { return true })
	if len(out) != 1 || out[0] != b2 {
		t.Fatalf("expired %v", out)
	}
	b3 := &Batch{Records: 1}
	p.Add(b3)
	if !p.Reset() {
		t.Fatal("Reset must succeed when quiesced")
	}
	got, _ = p.Next(1, id, false)
	if got != b3 || got.Seq != 0 {
		t.Fatalf("after reset: %+v", got)
	}
	if !got.MaybeWritten() {
		t.Fatal("a batch on the wire may be written")
	}
	out, _ = p.Expire(func(*Batch) bool { return true })
	if len(out) != 0 {
		t.Fatal("a batch on the wire must not expire")
	}
}
