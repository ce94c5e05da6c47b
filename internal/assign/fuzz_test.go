package assign

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

var fuzzNames = []string{RangeName, RoundRobinName, StickyName, CooperativeStickyName, "custom"}

func FuzzDecodeSubscription(f *testing.F) {
	owned := TopicPartitions{"t0": {0, 2}, "t1": {1}}
	for _, a := range all() {
		f.Add(uint8(0), EncodeSubscriptionRack(a, []string{"t0", "t1"}, owned, 4, "r"))
		f.Add(uint8(2), EncodeSubscription(a, nil, nil, -1))
	}
	for version := int16(0); version <= 3; version++ {
		m := kmsg.NewConsumerMemberMetadata()
		m.Version = version
		m.Topics = []string{"a", "b"}
		m.UserData = kmsgSticky(owned, 3)
		m.OwnedPartitions = kmsgOwned(owned)
		m.Generation = 3
		f.Add(uint8(version), m.AppendTo(nil))
	}
	f.Add(uint8(3), []byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 7})
	f.Fuzz(func(t *testing.T, sel uint8, data []byte) {
		name := fuzzNames[int(sel)%len(fuzzNames)]
		m, err := DecodeSubscription(name, "id", data)
		if err != nil {
			return
		}
		// The result is bounded by the input: every topic and partition
		// takes input bytes.
		n := len(m.Topics)*2 + count(m.Owned)*4
		if n > len(data) {
			t.Fatalf("decoded %d topics and %d partitions from %d bytes", len(m.Topics), count(m.Owned), len(data))
		}
		for _, ps := range m.Owned {
			if len(ps) == 0 || len(normalize(ps)) != len(ps) || &normalize(ps)[0] != &ps[0] {
				t.Fatalf("owned not normalized: %v", m.Owned)
			}
		}
		// Re-encoding what we decoded gives the same member back, for the
		// parts the assignor's encoding carries.
		a, ok := ByName(name)
		if !ok {
			return
		}
		m2, err := DecodeSubscription(name, "id", EncodeSubscriptionRack(a, m.Topics, m.Owned, m.Generation, m.Rack))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if len(m2.Topics) != len(m.Topics) || m2.Rack != m.Rack || m2.Generation != m.Generation {
			t.Fatalf("round trip: %+v became %+v", m, m2)
		}
		for i := range m.Topics {
			if m.Topics[i] != m2.Topics[i] {
				t.Fatalf("round trip topics: %q became %q", m.Topics, m2.Topics)
			}
		}
		if (name == StickyName || a.Cooperative()) && tpString(m.Owned) != tpString(m2.Owned) {
			t.Fatalf("round trip owned: %s became %s", tpString(m.Owned), tpString(m2.Owned))
		}
	})
}

func FuzzDecodeAssignment(f *testing.F) {
	f.Add(EncodeAssignment(TopicPartitions{"t0": {0, 1}, "t1": {4}}, []byte("x")))
	f.Add(EncodeAssignment(nil, nil))
	k := kmsg.NewConsumerMemberAssignment()
	k.Version = 1
	k.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "a", Partitions: []int32{3, 3, -1}}}
	f.Add(k.AppendTo(nil))
	f.Add(binary.BigEndian.AppendUint32([]byte{0, 0}, 0x7fffffff))
	f.Fuzz(func(t *testing.T, data []byte) {
		tp, err := DecodeAssignment(data)
		if err != nil {
			return
		}
		if count(tp)*4 > len(data) || len(tp)*6 > len(data)+6 {
			t.Fatalf("decoded %d topics, %d partitions from %d bytes", len(tp), count(tp), len(data))
		}
		again, err := DecodeAssignment(EncodeAssignment(tp, nil))
		if err != nil || tpString(again) != tpString(tp) {
			t.Fatalf("round trip: %s became %s (%v)", tpString(tp), tpString(again), err)
		}
	})
}
