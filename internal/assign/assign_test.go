package assign

import (
	"math/rand/v2"
	"testing"
)

func sub(id string, topics ...string) Member {
	return Member{ID: id, Topics: topics, Generation: -1}
}

func static(id, instance string, topics ...string) Member {
	return Member{ID: id, InstanceID: instance, Topics: topics, Generation: -1}
}

type exactCase struct {
	name    string
	members []Member
	topics  map[string]int32
	want    map[string]TopicPartitions
}

func runExact(t *testing.T, a Assignor, cases []exactCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := a.Assign(tc.members, tc.topics)
			if g, w := planString(got), planString(tc.want); g != w {
				t.Fatalf("%s:\n got  %s\n want %s", a.Name(), g, w)
			}
			validate(t, a.Name(), got, tc.members, tc.topics, true)
		})
	}
}

func TestRangeExact(t *testing.T) {
	runExact(t, Range(), []exactCase{
		{
			// RangeAssignor javadoc: C0 [t0p0, t0p1, t1p0, t1p1], C1 [t0p2, t1p2].
			name:    "java doc example",
			members: []Member{sub("C1", "t0", "t1"), sub("C0", "t0", "t1")},
			topics:  map[string]int32{"t0": 3, "t1": 3},
			want: map[string]TopicPartitions{
				"C0": {"t0": {0, 1}, "t1": {0, 1}},
				"C1": {"t0": {2}, "t1": {2}},
			},
		},
		{
			name:    "first members get the remainder",
			members: []Member{sub("c", "t"), sub("a", "t"), sub("b", "t")},
			topics:  map[string]int32{"t": 8},
			want: map[string]TopicPartitions{
				"a": {"t": {0, 1, 2}}, "b": {"t": {3, 4, 5}}, "c": {"t": {6, 7}},
			},
		},
		{
			// MemberInfo order: instance ids first (y < z), then member ids.
			name:    "static members sort first by instance id",
			members: []Member{sub("a", "t"), static("b", "z", "t"), static("c", "y", "t")},
			topics:  map[string]int32{"t": 3},
			want: map[string]TopicPartitions{
				"c": {"t": {0}}, "b": {"t": {1}}, "a": {"t": {2}},
			},
		},
		{
			name:    "per topic subscribers only",
			members: []Member{sub("a", "t0"), sub("b", "t0", "t1"), sub("c", "t1")},
			topics:  map[string]int32{"t0": 3, "t1": 4},
			want: map[string]TopicPartitions{
				"a": {"t0": {0, 1}}, "b": {"t0": {2}, "t1": {0, 1}}, "c": {"t1": {2, 3}},
			},
		},
		{
			name:    "more members than partitions, unknown and empty topics",
			members: []Member{sub("a", "t", "gone", "empty"), sub("b", "t"), sub("c", "t")},
			topics:  map[string]int32{"t": 2, "empty": 0},
			want: map[string]TopicPartitions{
				"a": {"t": {0}}, "b": {"t": {1}}, "c": {},
			},
		},
		{
			name:    "duplicate member ids and topics: first occurrence",
			members: []Member{sub("a", "t", "t"), sub("b", "t"), sub("a", "u")},
			topics:  map[string]int32{"t": 4, "u": 4},
			want: map[string]TopicPartitions{
				"a": {"t": {0, 1}}, "b": {"t": {2, 3}},
			},
		},
		{
			name:    "no members",
			members: nil,
			topics:  map[string]int32{"t": 4},
			want:    map[string]TopicPartitions{},
		},
	})
}

func TestRoundRobinExact(t *testing.T) {
	runExact(t, RoundRobin(), []exactCase{
		{
			// RoundRobinAssignor javadoc: C0 [t0p0, t0p2, t1p1], C1 [t0p1, t1p0, t1p2].
			name:    "java doc example",
			members: []Member{sub("C1", "t0", "t1"), sub("C0", "t0", "t1")},
			topics:  map[string]int32{"t0": 3, "t1": 3},
			want: map[string]TopicPartitions{
				"C0": {"t0": {0, 2}, "t1": {1}},
				"C1": {"t0": {1}, "t1": {0, 2}},
			},
		},
		{
			// RoundRobinAssignor javadoc, different subscriptions:
			// C0 [t0p0], C1 [t1p0], C2 [t1p1, t2p0, t2p1, t2p2].
			name: "java doc example with different subscriptions",
			members: []Member{
				sub("C0", "t0"), sub("C1", "t0", "t1"), sub("C2", "t0", "t1", "t2"),
			},
			topics: map[string]int32{"t0": 1, "t1": 2, "t2": 3},
			want: map[string]TopicPartitions{
				"C0": {"t0": {0}},
				"C1": {"t1": {0}},
				"C2": {"t1": {1}, "t2": {0, 1, 2}},
			},
		},
		{
			name:    "iterator continues across topics",
			members: []Member{sub("a", "t0", "t1"), sub("b", "t0", "t1"), sub("c", "t0", "t1")},
			topics:  map[string]int32{"t0": 2, "t1": 2},
			want: map[string]TopicPartitions{
				"a": {"t0": {0}, "t1": {1}}, "b": {"t0": {1}}, "c": {"t1": {0}},
			},
		},
		{
			name:    "static members sort first",
			members: []Member{sub("a", "t"), static("z", "i1", "t")},
			topics:  map[string]int32{"t": 3},
			want: map[string]TopicPartitions{
				"z": {"t": {0, 2}}, "a": {"t": {1}},
			},
		},
	})
}

// Java's sticky assignors on a fresh group: the result must be balanced and
// is dealt round-robin, as both the Java client and this package do.
func TestStickyExactFresh(t *testing.T) {
	for _, a := range []Assignor{Sticky(), CooperativeSticky()} {
		runExact(t, a, []exactCase{
			{
				name:    "fresh group",
				members: []Member{sub("C1", "t0", "t1"), sub("C0", "t0", "t1")},
				topics:  map[string]int32{"t0": 3, "t1": 3},
				want: map[string]TopicPartitions{
					"C0": {"t0": {0, 2}, "t1": {1}},
					"C1": {"t0": {1}, "t1": {0, 2}},
				},
			},
			{
				// StickyAssignor javadoc: C0 subscribes t0, C1 t0,t1, C2
				// t0,t1,t2 with 1, 2 and 3 partitions: the only balanced
				// plan is C0 [t0p0], C1 [t1p0, t1p1], C2 [t2p0, t2p1, t2p2].
				name: "java doc example with different subscriptions",
				members: []Member{
					sub("C0", "t0"), sub("C1", "t0", "t1"), sub("C2", "t0", "t1", "t2"),
				},
				topics: map[string]int32{"t0": 1, "t1": 2, "t2": 3},
				want: map[string]TopicPartitions{
					"C0": {"t0": {0}},
					"C1": {"t1": {0, 1}},
					"C2": {"t2": {0, 1, 2}},
				},
			},
		})
	}
}

func TestJavaCompare(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"a", "b", -1},
		{"b", "a", 1},
		{"a", "a", 0},
		{"a", "ab", -1},
		{"", "a", -1},
		{"Z", "a", -1},
		{"é", "z", 1},
		// U+1F600 is the surrogate pair D83D DE00 in UTF-16, which sorts
		// before U+FFFD (and every BMP char from U+E000), unlike in UTF-8.
		{"\U0001F600", "\uFFFD", -1},
		{"\uFFFD", "\U0001F600", 1},
		{"\uE000", "\U00010000", 1},
		{"\uD7FF", "\U00010000", -1},
		{"\U00010000", "\U00010001", -1},
		{"x\U0001F600", "x\uFFFD", -1},
		{"\xff", "\xfe", 1}, // both invalid: byte order keeps it total
	} {
		if got := javaCompare(tc.a, tc.b); got != tc.want {
			t.Errorf("javaCompare(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestByName(t *testing.T) {
	for _, a := range all() {
		b, ok := ByName(a.Name())
		if !ok || b.Name() != a.Name() || b.Cooperative() != a.Cooperative() {
			t.Fatalf("ByName(%q) = %v, %v", a.Name(), b, ok)
		}
	}
	if _, ok := ByName("fancy"); ok {
		t.Fatal("ByName of an unknown name succeeded")
	}
	want := map[string]bool{RangeName: false, RoundRobinName: false, StickyName: false, CooperativeStickyName: true}
	for _, a := range all() {
		if a.Cooperative() != want[a.Name()] {
			t.Errorf("%s: Cooperative() = %v", a.Name(), a.Cooperative())
		}
	}
}

// The same input in any order gives the same plan.
func TestDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 50 {
		same := iter%2 == 0
		members, topics := randomGroup(rng, 1+rng.IntN(12), 1+rng.IntN(5), 20, same)
		prev := Sticky().Assign(members, topics)
		members = withOwned(members, prev, 3)
		// Take some partitions away and add conflicting claims so every
		// code path runs.
		for i := range members {
			if rng.IntN(3) == 0 {
				members[i].Owned = nil
			}
			members[i].Generation = rng.Int32N(3) + 2
		}
		for _, a := range all() {
			want := planString(a.Assign(members, topics))
			for range 5 {
				if got := planString(a.Assign(shuffled(rng, members), topics)); got != want {
					t.Fatalf("%s: iteration %d: shuffled input changed the plan:\n%s\n%s", a.Name(), iter, got, want)
				}
			}
		}
	}
}

// Assign must not modify its inputs.
func TestAssignDoesNotModifyInput(t *testing.T) {
	members := []Member{
		{ID: "b", Topics: []string{"t1", "t0"}, Owned: TopicPartitions{"t0": {3, 1, 1}}, Generation: 2},
		{ID: "a", Topics: []string{"t0"}, Owned: TopicPartitions{"t0": {0, 2}}, Generation: 2},
	}
	topics := map[string]int32{"t0": 4, "t1": 2}
	before := []string{planString(map[string]TopicPartitions{"a": members[1].Owned, "b": members[0].Owned}), members[0].Topics[0], members[1].ID}
	for _, a := range all() {
		a.Assign(members, topics)
		after := []string{planString(map[string]TopicPartitions{"a": members[1].Owned, "b": members[0].Owned}), members[0].Topics[0], members[1].ID}
		for i := range before {
			if before[i] != after[i] {
				t.Fatalf("%s modified its input: %q became %q", a.Name(), before[i], after[i])
			}
		}
		if len(topics) != 2 {
			t.Fatalf("%s modified topics", a.Name())
		}
	}
}
