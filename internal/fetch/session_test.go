package fetch

import (
	"slices"
	"testing"
)

func w(topic string, p int32, off int64) Want {
	return Want{TP: TP{topic, p}, Offset: off, MaxBytes: 1 << 20, LeaderEpoch: -1}
}

func tps(ws []Want) []TP {
	out := make([]TP, len(ws))
	for i, x := range ws {
		out[i] = x.TP
	}
	return out
}

func TestSessionLifecycle(t *testing.T) {
	var s Session
	// First request: full, epoch 0.
	p := s.Plan([]Want{w("t", 0, 0), w("t", 1, 0)})
	if !p.Full || p.SessionID != 0 || p.SessionEpoch != 0 || len(p.Send) != 2 {
		t.Fatalf("first plan %+v", p)
	}
	s.Commit(p, 0, 77)
	if s.ID() != 77 {
		t.Fatal("session not established")
	}
	// Unchanged partitions are not resent; a moved offset is.
	p = s.Plan([]Want{w("t", 0, 10), w("t", 1, 0)})
	if p.Full || p.SessionID != 77 || p.SessionEpoch != 1 {
		t.Fatalf("incremental plan %+v", p)
	}
	if got := tps(p.Send); !slices.Equal(got, []TP{{"t", 0}}) || len(p.Forget) != 0 {
		t.Fatalf("send %v forget %v", got, p.Forget)
	}
	s.Commit(p, 0, 77)
	// A partition left out (paused) is forgotten; a new one is added.
	p = s.Plan([]Want{w("t", 0, 10), w("u", 0, 5)})
	if p.SessionEpoch != 2 || !slices.Equal(tps(p.Send), []TP{{"u", 0}}) || !slices.Equal(p.Forget, []TP{{"t", 1}}) {
		t.Fatalf("plan %+v", p)
	}
	s.Commit(p, 0, 77)
	// Nothing changed: an empty incremental request (long poll).
	p = s.Plan([]Want{w("t", 0, 10), w("u", 0, 5)})
	if len(p.Send) != 0 || len(p.Forget) != 0 || p.SessionEpoch != 3 {
		t.Fatalf("idle plan %+v", p)
	}
}

func TestSessionErrorsResetToFull(t *testing.T) {
	for _, code := range []int16{70, 71, 106, 7} {
		var s Session
		p := s.Plan([]Want{w("t", 0, 0)})
		s.Commit(p, 0, 5)
		p = s.Plan([]Want{w("t", 0, 3)})
		s.Commit(p, code, 5)
		p = s.Plan([]Want{w("t", 0, 3), w("t", 1, 0)})
		if code != 70 {
			// The broker may still hold session 5: it is closed
			// first, by a full fetch without a session.
			if !p.Full || p.SessionID != 5 || p.SessionEpoch != -1 || len(p.Send) != 2 {
				t.Fatalf("code %d: after error plan %+v, want the close of session 5", code, p)
			}
			s.Commit(p, 0, 0)
			p = s.Plan([]Want{w("t", 0, 3), w("t", 1, 0)})
		}
		if !p.Full || p.SessionID != 0 || p.SessionEpoch != 0 || len(p.Send) != 2 {
			t.Fatalf("code %d: plan %+v, want a new session", code, p)
		}
	}
	var s Session
	p := s.Plan([]Want{w("t", 0, 0)})
	s.Commit(p, 0, 5)
	s.Fail()
	if p = s.Plan([]Want{w("t", 0, 0)}); !p.Full || p.SessionID != 5 || p.SessionEpoch != -1 {
		t.Fatalf("after a network failure %+v, want a full fetch closing session 5", p)
	}
	// The close itself failing (connection lost again) does not close
	// twice: the next attempt starts a new session.
	s.Fail()
	if p = s.Plan([]Want{w("t", 0, 0)}); !p.Full || p.SessionID != 5 {
		t.Fatalf("close not retried: %+v", p)
	}
	s.Commit(p, 70, 0) // already gone
	if p = s.Plan([]Want{w("t", 0, 0)}); !p.Full || p.SessionID != 0 || p.SessionEpoch != 0 {
		t.Fatalf("after the close %+v, want a new session", p)
	}
}

func TestSessionClose(t *testing.T) {
	var s Session
	if _, ok := s.Close(); ok {
		t.Fatal("nothing to close without a session")
	}
	p := s.Plan([]Want{w("t", 0, 0)})
	s.Commit(p, 0, 9)
	c, ok := s.Close()
	if !ok || c.SessionID != 9 || c.SessionEpoch != -1 || len(c.Send) != 0 {
		t.Fatalf("close plan %+v", c)
	}
	if p = s.Plan([]Want{w("t", 0, 0)}); p.SessionID != 0 || p.SessionEpoch != 0 {
		t.Fatalf("after close %+v", p)
	}
}

func TestSessionDeclined(t *testing.T) {
	var s Session
	p := s.Plan([]Want{w("t", 0, 0)})
	s.Commit(p, 0, 0) // broker gave no session
	for i := 0; i < 3; i++ {
		p = s.Plan([]Want{w("t", 0, int64(i)), w("t", 1, 0)})
		if !p.Full || p.SessionEpoch != -1 || len(p.Send) != 2 {
			t.Fatalf("sessionless plan %+v", p)
		}
		s.Commit(p, 0, 0)
	}
}

func TestEpochWraps(t *testing.T) {
	if nextEpoch(1<<31-1) != 1 || nextEpoch(5) != 6 {
		t.Fatal("epoch arithmetic")
	}
}

func FuzzSession(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6})
	f.Fuzz(func(t *testing.T, ops []byte) {
		// The broker model: the session's partitions as the broker
		// would hold them after applying each request.
		var s Session
		broker := map[TP]Want{}
		brokerID := int32(0)
		offsets := map[TP]int64{}
		for i, op := range ops {
			var wants []Want
			for p := int32(0); p < 4; p++ {
				if op&(1<<p) != 0 {
					tp := TP{"t", p}
					wants = append(wants, Want{TP: tp, Offset: offsets[tp], MaxBytes: 100, LeaderEpoch: -1})
				}
			}
			plan := s.Plan(wants)
			// Apply to the broker model.
			switch {
			case plan.Full:
				broker = map[TP]Want{}
				for _, x := range plan.Send {
					broker[x.TP] = x
				}
				brokerID = int32(i + 1)
				if plan.SessionEpoch == -1 {
					brokerID = 0
				}
			case plan.SessionID == brokerID:
				for _, x := range plan.Send {
					broker[x.TP] = x
				}
				for _, tp := range plan.Forget {
					delete(broker, tp)
				}
			default:
				t.Fatalf("incremental request for unknown session %d", plan.SessionID)
			}
			// What the broker fetches must be exactly what we want.
			if len(broker) != len(wants) {
				t.Fatalf("op %d: broker holds %d partitions, wanted %d", i, len(broker), len(wants))
			}
			for _, x := range wants {
				if broker[x.TP] != x {
					t.Fatalf("op %d: broker has %+v for %v, want %+v", i, broker[x.TP], x.TP, x)
				}
			}
			if op&0x80 != 0 {
				s.Fail()
				continue
			}
			s.Commit(plan, 0, brokerID)
			for _, x := range wants {
				if op&0x10 != 0 {
					offsets[x.TP] = x.Offset + 1
				}
			}
		}
	})
}

// TestSessionAddressing: switching between topic names and ids while a
// session is open starts a new one (the next request closes the old
// session and fetches in full); without a session, or keeping the
// addressing, nothing changes.
func TestSessionAddressing(t *testing.T) {
	for _, tc := range []struct {
		name       string
		open       bool // a session is open when the addressing is set
		from, to   bool
		wantClosed bool // the next plan closes the session and is full
	}{
		{"names to ids, session open", true, false, true, true},
		{"ids to names, session open", true, true, false, true},
		{"ids kept, session open", true, true, true, false},
		{"names to ids, no session", false, false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Session
			s.Addressing(tc.from)
			p := s.Plan([]Want{w("t", 0, 0)})
			if tc.open {
				s.Commit(p, 0, 9)
			}
			s.Addressing(tc.to)
			p = s.Plan([]Want{w("t", 0, 0)})
			closes := p.closes && p.SessionID == 9 && p.SessionEpoch == -1
			if closes != tc.wantClosed {
				t.Fatalf("plan %+v: closes the session %v, want %v", p, closes, tc.wantClosed)
			}
			switch {
			case tc.wantClosed || !tc.open:
				if !p.Full || len(p.Send) != 1 {
					t.Errorf("plan %+v, want a full fetch", p)
				}
			default:
				if p.Full || p.SessionID != 9 || p.SessionEpoch != 1 {
					t.Errorf("plan %+v, want the session's next incremental fetch", p)
				}
			}
		})
	}
}
