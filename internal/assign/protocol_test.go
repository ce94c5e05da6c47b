package assign

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestSubscriptionRoundTrip(t *testing.T) {
	owned := TopicPartitions{"b": {3, 1}, "a": {0}, "empty": {}}
	norm := "{a[0] b[1 3]}"
	for _, a := range all() {
		for _, rack := range []string{"", "rack-1"} {
			for _, gen := range []int32{-1, 0, 7} {
				b := EncodeSubscriptionRack(a, []string{"z", "a", "z"}, owned, gen, rack)
				m, err := DecodeSubscription(a.Name(), "member-1", b)
				if err != nil {
					t.Fatalf("%s: %v", a.Name(), err)
				}
				if m.ID != "member-1" || !slices.Equal(m.Topics, []string{"a", "z"}) || m.Rack != rack {
					t.Fatalf("%s: decoded %+v", a.Name(), m)
				}
				wantOwned, wantGen := "{}", gen
				switch {
				case a.Name() == StickyName || a.Cooperative():
					wantOwned = norm
				default:
					// range and roundrobin are eager: nothing owned is
					// sent; the generation is.
				}
				if got := tpString(m.Owned); got != wantOwned || m.Generation != wantGen {
					t.Fatalf("%s gen %d: owned %s gen %d, want %s %d", a.Name(), gen, got, m.Generation, wantOwned, wantGen)
				}
			}
		}
	}
	// Deterministic output whatever the map and slice order.
	for _, a := range all() {
		x := EncodeSubscription(a, []string{"b", "a"}, TopicPartitions{"t": {2, 1}, "u": {0}}, 3)
		y := EncodeSubscription(a, []string{"a", "b", "a"}, TopicPartitions{"u": {0}, "t": {1, 2, 2}}, 3)
		if !bytes.Equal(x, y) {
			t.Fatalf("%s: encoding not deterministic", a.Name())
		}
	}
}

// TestSubscriptionGolden pins the exact bytes against the Java client's
// layout (ConsumerProtocolSubscription v3; StickyAssignor user data v1;
// CooperativeStickyAssignor user data = int32 generation).
func TestSubscriptionGolden(t *testing.T) {
	var w []byte
	i16 := func(v int16) { w = binary.BigEndian.AppendUint16(w, uint16(v)) }
	i32 := func(v int32) { w = binary.BigEndian.AppendUint32(w, uint32(v)) }
	str := func(s string) { i16(int16(len(s))); w = append(w, s...) }

	// cooperative-sticky, topics [t0 t1], owned t0 [0 2], generation 5,
	// rack "r".
	w = nil
	i16(3)
	i32(2)
	str("t0")
	str("t1")
	i32(4) // user data: 4 bytes
	i32(5) //   generation
	i32(1) // owned partitions
	str("t0")
	i32(2)
	i32(0)
	i32(2)
	i32(5) // generation
	str("r")
	coop := slices.Clone(w)
	if got := EncodeSubscriptionRack(CooperativeSticky(), []string{"t1", "t0"}, TopicPartitions{"t0": {2, 0}}, 5, "r"); !bytes.Equal(got, coop) {
		t.Fatalf("cooperative-sticky:\n got  %x\n want %x", got, coop)
	}

	// sticky, topics [t0], previous assignment t0 [1], generation 9, no
	// rack: user data carries the assignment, OwnedPartitions is empty.
	w = nil
	i16(3)
	i32(1)
	str("t0")
	i32(4 + 2 + 2 + 4 + 4 + 4) // user data length
	i32(1)                     //   one topic
	str("t0")                  //
	i32(1)                     //   one partition
	i32(1)                     //
	i32(9)                     //   generation
	i32(0)                     // owned partitions: none
	i32(9)                     // generation
	i16(-1)                    // rack: null
	sticky := slices.Clone(w)
	if got := EncodeSubscription(Sticky(), []string{"t0"}, TopicPartitions{"t0": {1}}, 9); !bytes.Equal(got, sticky) {
		t.Fatalf("sticky:\n got  %x\n want %x", got, sticky)
	}

	// range: null user data.
	w = nil
	i16(3)
	i32(1)
	str("t0")
	i32(-1)
	i32(0)
	i32(-1)
	i16(-1)
	if got := EncodeSubscription(Range(), []string{"t0"}, TopicPartitions{"t0": {1}}, -1); !bytes.Equal(got, w) {
		t.Fatalf("range:\n got  %x\n want %x", got, w)
	}

	// Assignment v3: t0 [0 1], null user data.
	w = nil
	i16(3)
	i32(1)
	str("t0")
	i32(2)
	i32(0)
	i32(1)
	i32(-1)
	if got := EncodeAssignment(TopicPartitions{"t0": {1, 0}}, nil); !bytes.Equal(got, w) {
		t.Fatalf("assignment:\n got  %x\n want %x", got, w)
	}
}

func kmsgOwned(tp TopicPartitions) []kmsg.ConsumerMemberMetadataOwnedPartition {
	var out []kmsg.ConsumerMemberMetadataOwnedPartition
	for _, t := range sortedKeys(tp) {
		o := kmsg.NewConsumerMemberMetadataOwnedPartition()
		o.Topic, o.Partitions = t, tp[t]
		out = append(out, o)
	}
	return out
}

func kmsgSticky(tp TopicPartitions, gen int32) []byte {
	s := kmsg.NewStickyMemberMetadata()
	s.Generation = gen
	for _, t := range sortedKeys(tp) {
		a := kmsg.NewStickyMemberMetadataCurrentAssignment()
		a.Topic, a.Partitions = t, tp[t]
		s.CurrentAssignment = append(s.CurrentAssignment, a)
	}
	return s.AppendTo(nil)
}

func sortedKeys(tp TopicPartitions) []string {
	ks := make([]string, 0, len(tp))
	for k := range tp {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// TestSubscriptionKmsgToOurs decodes what kmsg (franz-go) encodes, at every
// version kmsg supports and at a future version.
func TestSubscriptionKmsgToOurs(t *testing.T) {
	owned := TopicPartitions{"t0": {0, 2}, "t1": {1}}
	for version := int16(0); version <= 4; version++ {
		for _, name := range []string{RangeName, RoundRobinName, StickyName, CooperativeStickyName} {
			for _, gen := range []int32{-1, 0, 12} {
				t.Run(fmt.Sprintf("v%d/%s/gen%d", version, name, gen), func(t *testing.T) {
					meta := kmsg.NewConsumerMemberMetadata()
					meta.Version = version
					meta.Topics = []string{"t1", "t0"}
					meta.OwnedPartitions = kmsgOwned(owned)
					meta.Generation = gen
					meta.Rack = kmsg.StringPtr("rk")
					switch name {
					case StickyName:
						meta.UserData = kmsgSticky(owned, gen)
					case CooperativeStickyName:
						meta.UserData = binary.BigEndian.AppendUint32(nil, uint32(gen))
					}
					b := meta.AppendTo(nil)
					m, err := DecodeSubscription(name, "id", b)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(m.Topics, []string{"t0", "t1"}) {
						t.Fatalf("topics %v", m.Topics)
					}
					wantOwned, wantGen, wantRack := tpString(owned), gen, "rk"
					if version < 3 {
						wantRack = ""
					}
					switch name {
					case StickyName: // from user data, whatever the version
					case CooperativeStickyName:
						if version < 1 {
							wantOwned = "{}"
						}
						// v2+ field if >= 0, else user data: the same gen here.
					default:
						if version < 1 {
							wantOwned = "{}"
						}
						if version < 2 {
							wantGen = -1
						}
					}
					if got := tpString(m.Owned); got != wantOwned || m.Generation != wantGen || m.Rack != wantRack {
						t.Fatalf("got owned %s gen %d rack %q, want %s %d %q", got, m.Generation, m.Rack, wantOwned, wantGen, wantRack)
					}
				})
			}
		}
	}
}

// TestSubscriptionOursToKmsg decodes what we encode with kmsg.
func TestSubscriptionOursToKmsg(t *testing.T) {
	owned := TopicPartitions{"t1": {4, 3}, "t0": {0}}
	for _, a := range all() {
		for _, gen := range []int32{-1, 3} {
			b := EncodeSubscriptionRack(a, []string{"t1", "t0"}, owned, gen, "r1")
			var meta kmsg.ConsumerMemberMetadata
			if err := meta.ReadFrom(b); err != nil {
				t.Fatalf("%s: kmsg: %v", a.Name(), err)
			}
			if meta.Version != 3 || !slices.Equal(meta.Topics, []string{"t0", "t1"}) ||
				meta.Generation != gen || meta.Rack == nil || *meta.Rack != "r1" {
				t.Fatalf("%s: kmsg decoded %+v", a.Name(), meta)
			}
			gotOwned := TopicPartitions{}
			for _, o := range meta.OwnedPartitions {
				gotOwned[o.Topic] = o.Partitions
			}
			switch a.Name() {
			case StickyName:
				if len(meta.OwnedPartitions) != 0 {
					t.Fatalf("sticky sent owned partitions")
				}
				var s kmsg.StickyMemberMetadata
				if err := s.ReadFrom(meta.UserData); err != nil {
					t.Fatal(err)
				}
				ud := TopicPartitions{}
				for _, c := range s.CurrentAssignment {
					ud[c.Topic] = c.Partitions
				}
				if tpString(ud) != "{t0[0] t1[3 4]}" || s.Generation != gen {
					t.Fatalf("sticky user data %s gen %d", tpString(ud), s.Generation)
				}
			case CooperativeStickyName:
				if tpString(gotOwned) != "{t0[0] t1[3 4]}" {
					t.Fatalf("owned %s", tpString(gotOwned))
				}
				if len(meta.UserData) != 4 || int32(binary.BigEndian.Uint32(meta.UserData)) != gen {
					t.Fatalf("user data %x", meta.UserData)
				}
			default:
				if len(meta.OwnedPartitions) != 0 || meta.UserData != nil {
					t.Fatalf("%s: owned %v user data %x", a.Name(), meta.OwnedPartitions, meta.UserData)
				}
			}
		}
	}
}

// TestSubscriptionTolerance covers inputs other clients produce.
func TestSubscriptionTolerance(t *testing.T) {
	base := kmsg.NewConsumerMemberMetadata()
	base.Topics = []string{"t"}

	// Claims v1 but stops after the user data (Sarama, old kgo: #493).
	buggy := base
	buggy.Version = 0
	b := buggy.AppendTo(nil)
	b[1] = 1
	m, err := DecodeSubscription(CooperativeStickyName, "x", b)
	if err != nil || !slices.Equal(m.Topics, []string{"t"}) || m.Generation != -1 || len(m.Owned) != 0 {
		t.Fatalf("buggy v1: %+v %v", m, err)
	}

	// Trailing bytes and a future version are ignored.
	v9 := base
	v9.Version = 3
	v9.Generation = 4
	b = append(v9.AppendTo(nil), 1, 2, 3)
	b[1] = 9
	m, err = DecodeSubscription(RangeName, "x", b)
	if err != nil || m.Generation != 4 {
		t.Fatalf("v9: %+v %v", m, err)
	}

	// Sticky user data: v0 (no generation), garbage (Java ignores it),
	// absent.
	s := base
	s.Version = 1
	for _, tc := range []struct {
		name     string
		userData []byte
		owned    string
		gen      int32
	}{
		{"v0", kmsgSticky(TopicPartitions{"t": {1}}, -1), "{t[1]}", -1},
		{"v1", kmsgSticky(TopicPartitions{"t": {1}}, 8), "{t[1]}", 8},
		{"v0 plus 2 stray bytes", append(kmsgSticky(TopicPartitions{"t": {1}}, -1), 0, 0), "{t[1]}", -1},
		{"garbage", []byte{0xff, 0xff, 0xff, 0x00, 0x01}, "{}", -1},
		{"empty", []byte{}, "{}", -1},
		{"null", nil, "{}", -1},
	} {
		s.UserData = tc.userData
		s.OwnedPartitions = kmsgOwned(TopicPartitions{"other": {0}})
		m, err := DecodeSubscription(StickyName, "x", s.AppendTo(nil))
		if err != nil || tpString(m.Owned) != tc.owned || m.Generation != tc.gen {
			t.Fatalf("sticky %s: owned %s gen %d err %v", tc.name, tpString(m.Owned), m.Generation, err)
		}
	}

	// Cooperative-sticky generation: v2 field, else user data, else -1.
	c := base
	for _, tc := range []struct {
		name     string
		version  int16
		field    int32
		userData []byte
		gen      int32
	}{
		{"v2 field", 2, 6, []byte{0, 0, 0, 9}, 6},
		{"v1 user data", 1, 0, []byte{0, 0, 0, 9}, 9},
		{"v2 field unset", 2, -1, []byte{0, 0, 0, 9}, 9},
		{"short user data", 1, 0, []byte{0, 9}, -1},
		{"no user data", 1, 0, nil, -1},
	} {
		c.Version, c.Generation, c.UserData = tc.version, tc.field, tc.userData
		m, err := DecodeSubscription(CooperativeStickyName, "x", c.AppendTo(nil))
		if err != nil || m.Generation != tc.gen {
			t.Fatalf("coop %s: gen %d err %v", tc.name, m.Generation, err)
		}
	}
}

func TestAssignmentRoundTripAndKmsg(t *testing.T) {
	tp := TopicPartitions{"b": {2, 0, 2}, "a": {5}, "none": {}}
	want := "{a[5] b[0 2]}"
	for _, ud := range [][]byte{nil, {}, {1, 2, 3}} {
		b := EncodeAssignment(tp, ud)
		got, err := DecodeAssignment(b)
		if err != nil || tpString(got) != want {
			t.Fatalf("round trip: %s %v", tpString(got), err)
		}
		var k kmsg.ConsumerMemberAssignment
		if err := k.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		if k.Version != AssignmentVersion || !bytes.Equal(k.UserData, ud) || (ud == nil) != (k.UserData == nil) {
			t.Fatalf("kmsg: version %d user data %x", k.Version, k.UserData)
		}
		kt := TopicPartitions{}
		for _, x := range k.Topics {
			kt[x.Topic] = x.Partitions
		}
		if tpString(kt) != want {
			t.Fatalf("kmsg topics %s", tpString(kt))
		}
	}
	for version := int16(0); version <= 4; version++ {
		k := kmsg.NewConsumerMemberAssignment()
		k.Version = version
		for _, t := range []string{"b", "a", "b"} { // repeated topic: merged
			x := kmsg.NewConsumerMemberAssignmentTopic()
			x.Topic, x.Partitions = t, []int32{2, 0}
			k.Topics = append(k.Topics, x)
		}
		k.UserData = []byte("ud")
		got, err := DecodeAssignment(k.AppendTo(nil))
		if err != nil || tpString(got) != "{a[0 2] b[0 2]}" {
			t.Fatalf("v%d: %s %v", version, tpString(got), err)
		}
	}
	// Empty input is an empty assignment; missing user data is tolerated.
	if got, err := DecodeAssignment(nil); err != nil || len(got) != 0 || got == nil {
		t.Fatalf("empty: %v %v", got, err)
	}
	short := EncodeAssignment(TopicPartitions{"t": {1}}, nil)
	if got, err := DecodeAssignment(short[:len(short)-4]); err != nil || tpString(got) != "{t[1]}" {
		t.Fatalf("no user data: %v %v", got, err)
	}
}

func TestDecodeMalformed(t *testing.T) {
	huge := func(prefix ...byte) []byte { return append(prefix, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0) }
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"one byte", []byte{0}},
		{"negative version", []byte{0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}},
		{"huge topic count", huge(0, 0)},
		{"negative topic count", []byte{0, 0, 0xff, 0xff, 0xff, 0xfe}},
		{"truncated topic", []byte{0, 0, 0, 0, 0, 1, 0, 5, 'a'}},
		{"null topic", []byte{0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{"huge user data", append([]byte{0, 0, 0, 0, 0, 0}, 0x7f, 0xff, 0xff, 0xff, 1)},
		{"huge owned count", huge(0, 1, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff)},
		{"partial generation", []byte{0, 2, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, name := range []string{RangeName, StickyName, CooperativeStickyName} {
				m, err := DecodeSubscription(name, "id", tc.b)
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("%s: err %v, member %+v", name, err, m)
				}
				if m.ID != "id" || m.Generation != -1 || len(m.Topics) != 0 {
					t.Fatalf("%s: partial member returned: %+v", name, m)
				}
			}
		})
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"one byte", []byte{0}},
		{"negative version", []byte{0x80, 0, 0, 0, 0, 0}},
		{"no topics", []byte{0, 0}},
		{"huge topic count", huge(0, 0)},
		{"huge partition count", append([]byte{0, 0, 0, 0, 0, 1, 0, 1, 't'}, 0x7f, 0xff, 0xff, 0xff)},
		{"truncated partitions", []byte{0, 0, 0, 0, 0, 1, 0, 1, 't', 0, 0, 0, 2, 0, 0, 0, 1}},
		{"truncated user data", []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 1}},
	} {
		t.Run("assignment "+tc.name, func(t *testing.T) {
			if _, err := DecodeAssignment(tc.b); !errors.Is(err, ErrMalformed) {
				t.Fatalf("err %v", err)
			}
		})
	}
}

// TestDecodeHostileAllocation: length prefixes claiming 2^31 elements
// must not make the decoders allocate for them.
func TestDecodeHostileAllocation(t *testing.T) {
	inputs := [][]byte{
		{0, 3, 0x7f, 0xff, 0xff, 0xff},                                     // topics
		{0, 3, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff},                         // user data
		{0, 3, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff}, // owned
		{0, 3, 0, 0, 0, 1, 0, 1, 't', 0x7f, 0xff, 0xff, 0xff},              // assignment partitions
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 100 {
		for _, b := range inputs {
			DecodeSubscription(StickyName, "id", b)
			DecodeSubscription(CooperativeStickyName, "id", b)
			DecodeAssignment(b)
		}
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Fatalf("hostile inputs allocated %d bytes", n)
	}
}
