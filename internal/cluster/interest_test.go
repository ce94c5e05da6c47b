package cluster

import (
	"reflect"
	"testing"
)

// TestInterest drives the refresh-set core through sequences of owner
// calls, lookups and refreshes, checking what each refresh asks about.
func TestInterest(t *testing.T) {
	type step struct {
		track, untrack []string
		used           []string // lookups served from the snapshot
		extra          []string // one-off lookups waiting for the refresh
		want           []string // what the refresh asks about
		failed         bool     // the refresh fails
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"nothing tracked: brokers only", []step{{want: []string{}}}},
		{"tracked until the last release", []step{
			{track: []string{"a", "a", "b"}, want: []string{"a", "b"}},
			{untrack: []string{"a"}, want: []string{"a", "b"}},
			{untrack: []string{"a", "b"}, want: []string{}},
			{want: []string{}},
		}},
		{"over-release is ignored", []step{
			{untrack: []string{"a"}, want: []string{}},
			{track: []string{"a"}, want: []string{"a"}},
		}},
		{"one-off looked up once is not refreshed again", []step{
			{extra: []string{"o"}, want: []string{"o"}},
			{want: []string{}},
			{used: []string{"o"}, want: []string{}}, // gone from the snapshot: no effect
		}},
		{"one-off in use stays fresh, then goes", []step{
			{extra: []string{"o"}, want: []string{"o"}},
			{used: []string{"o"}, want: []string{"o"}},
			{used: []string{"o"}, want: []string{"o"}},
			{want: []string{}},
			{want: []string{}},
		}},
		{"failed refresh keeps the uses", []step{
			{extra: []string{"o"}, want: []string{"o"}},
			{used: []string{"o"}, want: []string{"o"}, failed: true},
			{want: []string{"o"}},
			{want: []string{}},
		}},
		{"tracking a cached one-off keeps it; releasing it caches it again", []step{
			{extra: []string{"o"}, want: []string{"o"}},
			{track: []string{"o"}, want: []string{"o"}},
			{want: []string{"o"}},
			{untrack: []string{"o"}, used: []string{"o"}, want: []string{"o"}},
			{want: []string{}},
		}},
		{"extras deduplicated with tracked", []step{
			{track: []string{"b"}, extra: []string{"b", "a", "a"}, want: []string{"a", "b"}},
			{want: []string{"b"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := newInterest()
			for i, s := range tt.steps {
				in.track(s.track...)
				in.untrack(s.untrack...)
				for _, u := range s.used {
					in.used(u)
				}
				got := in.plan(s.extra)
				if !reflect.DeepEqual(got, s.want) {
					t.Fatalf("step %d: refresh asks %v, want %v", i, got, s.want)
				}
				if !s.failed {
					in.refreshed(got)
				}
			}
		})
	}
}
