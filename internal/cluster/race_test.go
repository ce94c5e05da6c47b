package cluster

import "testing"

// Event scripts for the racer: each step is an event and the candidate the
// racer must start in response (-1 for none).
func TestRacer(t *testing.T) {
	type step struct {
		ev    string // "next", "tick", "fail N", "win N", "lose N", "stop"
		i     int
		start int
	}
	tests := []struct {
		name      string
		n         int
		steps     []step
		exhausted bool
	}{
		{"first wins", 3, []step{{"next", 0, 0}, {"win", 0, -1}, {"tick", 0, -1}}, false},
		{"stagger then second wins", 3, []step{{"next", 0, 0}, {"tick", 0, 1}, {"win", 1, -1}, {"lose", 0, -1}, {"tick", 0, -1}}, false},
		{"fail starts next at once", 3, []step{{"next", 0, 0}, {"fail", 0, 1}, {"fail", 1, 2}, {"win", 2, -1}}, false},
		{"all fail", 2, []step{{"next", 0, 0}, {"tick", 0, 1}, {"fail", 0, -1}, {"fail", 1, -1}}, true},
		{"ticks run out", 2, []step{{"next", 0, 0}, {"tick", 0, 1}, {"tick", 0, -1}, {"fail", 1, -1}}, false},
		{"stopped", 3, []step{{"next", 0, 0}, {"stop", 0, -1}, {"tick", 0, -1}, {"fail", 0, -1}, {"lose", 0, -1}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRacer(tt.n)
			for k, s := range tt.steps {
				got := -1
				switch s.ev {
				case "next":
					got = r.next()
				case "tick":
					got = r.tick()
				case "fail":
					got = r.fail(s.i)
				case "win":
					if !r.succeed(s.i) {
						t.Fatalf("step %d: %d should win", k, s.i)
					}
				case "lose":
					if r.succeed(s.i) {
						t.Fatalf("step %d: %d must not win", k, s.i)
					}
				case "stop":
					r.stop()
				}
				if got != s.start {
					t.Fatalf("step %d (%s %d): started %d, want %d", k, s.ev, s.i, got, s.start)
				}
			}
			if r.exhausted() != tt.exhausted {
				t.Fatalf("exhausted = %v", r.exhausted())
			}
		})
	}
}
