package share

import "testing"

func TestLeaderWait(t *testing.T) {
	type fetch struct {
		unresolved bool
		acquired   int
		want       int
	}
	for _, tc := range []struct {
		name    string
		fetches []fetch
	}{
		{"no leader errors", []fetch{{false, 0, 0}, {false, 0, 0}}},
		{"unresolved errors pause, longer each time", []fetch{{true, 0, 1}, {true, 0, 2}, {true, 0, 3}}},
		{"records acquired: no pause, and the count starts over", []fetch{{true, 0, 1}, {true, 0, 2}, {true, 5, 0}, {true, 0, 1}}},
		{"errors resolved (hints applied): the count starts over", []fetch{{true, 0, 1}, {false, 0, 0}, {true, 0, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w LeaderWait
			for i, f := range tc.fetches {
				if got := w.Fetched(f.unresolved, f.acquired); got != f.want {
					t.Errorf("fetch %d: %d, want %d", i, got, f.want)
				}
			}
		})
	}
}
