package assign

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// SubscriptionVersion is the ConsumerProtocolSubscription version
// EncodeSubscription writes (v1 added owned partitions, v2 the generation,
// v3 the rack), the newest version, as the Java client writes it.
const SubscriptionVersion = 3

// AssignmentVersion is the ConsumerProtocolAssignment version
// EncodeAssignment writes. All versions share one layout; the Java client
// writes the newest.
const AssignmentVersion = 3

// ErrMalformed is returned, wrapped, by the decoders for input that cannot be
// decoded: truncated, negative lengths other than null, or a negative
// version.
var ErrMalformed = errors.New("assign: malformed consumer protocol data")

// EncodeSubscription returns the JoinGroup protocol metadata for assignor a:
// a ConsumerProtocolSubscription v3 (Java's ConsumerMemberMetadata) holding
// the sorted, de-duplicated topics, the generation, a null rack, and the
// assignor's user data as the Java client builds it:
//
//   - "sticky": the StickyAssignor user data v1, the previous assignment
//     (owned) and the generation. Owned partitions are not repeated in the
//     OwnedPartitions field: an eager member has revoked everything before it
//     joins.
//   - "cooperative-sticky": the generation as one int32 (the Java client's
//     CooperativeStickyAssignor user data); owned goes to OwnedPartitions.
//   - other assignors: no user data (null). owned goes to OwnedPartitions
//     only if the assignor is cooperative.
//
// For a cooperative assignor owned must be what the member still owns when
// it joins; a member running the EAGER protocol (because one of its
// assignors is not cooperative) has revoked everything and must pass nil, as
// a leader treats owned partitions as still consumed. For "sticky" owned is
// the member's previous assignment even though it was revoked. generation
// is the generation in which the member got owned, -1 if none. The output
// is deterministic.
func EncodeSubscription(a Assignor, topics []string, owned TopicPartitions, generation int32) []byte {
	return EncodeSubscriptionRack(a, topics, owned, generation, "")
}

// EncodeSubscriptionRack is EncodeSubscription with the member's rack
// (client.rack, KIP-881); an empty rack is encoded as null.
func EncodeSubscriptionRack(a Assignor, topics []string, owned TopicPartitions, generation int32, rack string) []byte {
	var userData []byte
	switch a.Name() {
	case StickyName:
		userData = appendStickyUserData(make([]byte, 0, 64), owned, generation)
	case CooperativeStickyName:
		userData = binary.BigEndian.AppendUint32(make([]byte, 0, 4), uint32(generation))
	}
	var ownedField TopicPartitions
	if a.Cooperative() {
		ownedField = owned
	}
	dst := make([]byte, 0, 64)
	dst = binary.BigEndian.AppendUint16(dst, SubscriptionVersion)
	ts := uniqueSorted(topics)
	dst = appendInt32(dst, int32(len(ts)))
	for _, t := range ts {
		dst = appendString(dst, t)
	}
	dst = appendNullableBytes(dst, userData)
	dst = appendTopicPartitions(dst, ownedField)
	dst = appendInt32(dst, generation)
	if rack == "" {
		dst = appendInt16(dst, -1)
	} else {
		dst = appendString(dst, rack)
	}
	return dst
}

// DecodeSubscription decodes the JoinGroup protocol metadata a member sent
// for the assignor named name (the protocol the group chose) into a Member
// with the given member id. Every ConsumerProtocolSubscription version is
// accepted: fields of versions newer than 3 and trailing bytes are ignored
// (as the Java client reads newer versions as its newest), and fields that a
// member announced by version but left out entirely (a known bug of some
// clients claiming v1 without owned partitions) are taken as absent.
//
// Owned and Generation come from where the Java client's assignor of that
// name takes them:
//
//   - "sticky": from the StickyAssignor user data (v1 with generation, or
//     v0 without); user data that is absent or cannot be decoded means
//     nothing owned and generation -1, not an error.
//   - "cooperative-sticky": Owned from OwnedPartitions; Generation from the
//     v2+ generation field if it is not negative, else from the int32 user
//     data, else -1.
//   - any other name: Owned from OwnedPartitions and Generation from the
//     v2+ field, -1 before v2.
//
// Topics are returned sorted and de-duplicated; Owned is normalized
// (partitions sorted, duplicates and negative partitions dropped). The
// caller sets InstanceID from the JoinGroup response. The error wraps
// ErrMalformed. DecodeSubscription never panics and allocates at most a
// small multiple of len(metadata).
func DecodeSubscription(name string, memberID string, metadata []byte) (Member, error) {
	m := Member{ID: memberID, Generation: -1}
	r := reader{b: metadata}
	version := r.int16()
	if r.bad {
		return m, fmt.Errorf("%w: subscription shorter than its version", ErrMalformed)
	}
	if version < 0 {
		return m, fmt.Errorf("%w: subscription version %d", ErrMalformed, version)
	}
	n := r.arrayLen(2)
	topics := make([]string, 0, n)
	for range n {
		topics = append(topics, r.str())
	}
	userData, _ := r.nullableBytes()
	var owned TopicPartitions
	subGen := int32(-1)
	if version >= 1 && len(r.b) > 0 {
		owned = r.topicPartitions()
	}
	if version >= 2 && len(r.b) > 0 {
		subGen = r.int32()
	}
	if version >= 3 && len(r.b) > 0 {
		m.Rack = r.nullableStr()
	}
	if r.bad {
		return Member{ID: memberID, Generation: -1}, fmt.Errorf("%w: truncated subscription v%d", ErrMalformed, version)
	}
	m.Topics = uniqueSorted(topics)

	switch name {
	case StickyName:
		m.Owned, m.Generation = decodeStickyUserData(userData)
	case CooperativeStickyName:
		m.Owned = owned
		switch {
		case subGen >= 0:
			m.Generation = subGen
		case len(userData) >= 4:
			m.Generation = int32(binary.BigEndian.Uint32(userData))
		}
	default:
		m.Owned, m.Generation = owned, subGen
	}
	if m.Owned == nil {
		m.Owned = TopicPartitions{}
	}
	return m, nil
}

// EncodeAssignment returns the SyncGroup member assignment for tp: a
// ConsumerProtocolAssignment (Java's ConsumerMemberAssignment) of version
// AssignmentVersion with topics and partitions sorted and de-duplicated,
// empty topics left out, and userData (nil is encoded as null; the built-in
// assignors use none).
func EncodeAssignment(tp TopicPartitions, userData []byte) []byte {
	dst := make([]byte, 0, 32)
	dst = binary.BigEndian.AppendUint16(dst, AssignmentVersion)
	dst = appendTopicPartitions(dst, tp)
	return appendNullableBytes(dst, userData)
}

// DecodeAssignment decodes a SyncGroup member assignment of any version. An
// empty input is an empty assignment (a coordinator returns one for a
// member the leader did not assign). Missing user data is tolerated and the
// user data is discarded. The result is normalized: partitions sorted,
// duplicates (also across repeated topic entries) and negative partitions
// dropped. The error wraps ErrMalformed. DecodeAssignment never panics and
// allocates at most a small multiple of len(b).
func DecodeAssignment(b []byte) (TopicPartitions, error) {
	if len(b) == 0 {
		return TopicPartitions{}, nil
	}
	r := reader{b: b}
	version := r.int16()
	if !r.bad && version < 0 {
		return nil, fmt.Errorf("%w: assignment version %d", ErrMalformed, version)
	}
	tp := r.topicPartitions()
	if len(r.b) > 0 {
		r.nullableBytes()
	}
	if r.bad {
		return nil, fmt.Errorf("%w: truncated assignment", ErrMalformed)
	}
	return tp, nil
}

// appendStickyUserData appends Java's StickyAssignor user data v1: the
// previous assignment as [topic, [partition]] and the generation.
func appendStickyUserData(dst []byte, owned TopicPartitions, generation int32) []byte {
	dst = appendTopicPartitions(dst, owned)
	return appendInt32(dst, generation)
}

// decodeStickyUserData decodes StickyAssignor user data the way the Java
// client does: v1 (assignment and generation), falling back to v0
// (assignment only, generation -1), and to nothing owned and generation -1
// if even that fails.
func decodeStickyUserData(b []byte) (TopicPartitions, int32) {
	if len(b) == 0 {
		return TopicPartitions{}, -1
	}
	r := reader{b: b}
	owned := r.topicPartitions()
	if r.bad {
		return TopicPartitions{}, -1
	}
	if len(r.b) >= 4 {
		return owned, r.int32()
	}
	return owned, -1
}

// appendTopicPartitions appends [topic, [partition]] with topics sorted,
// partitions normalized and empty topics left out.
func appendTopicPartitions(dst []byte, tp TopicPartitions) []byte {
	names := make([]string, 0, len(tp))
	for t, ps := range tp {
		if len(normalize(ps)) > 0 {
			names = append(names, t)
		}
	}
	slices.Sort(names)
	dst = appendInt32(dst, int32(len(names)))
	for _, t := range names {
		ps := normalize(tp[t])
		dst = appendString(dst, t)
		dst = appendInt32(dst, int32(len(ps)))
		for _, p := range ps {
			dst = appendInt32(dst, p)
		}
	}
	return dst
}

func appendInt16(dst []byte, v int16) []byte {
	return binary.BigEndian.AppendUint16(dst, uint16(v))
}

func appendInt32(dst []byte, v int32) []byte {
	return binary.BigEndian.AppendUint32(dst, uint32(v))
}

// appendString appends a Kafka STRING. Strings longer than 32767 bytes
// cannot be encoded; they are truncated (no Kafka name is that long).
func appendString(dst []byte, s string) []byte {
	if len(s) > 0x7fff {
		s = s[:0x7fff]
	}
	dst = appendInt16(dst, int16(len(s)))
	return append(dst, s...)
}

func appendNullableBytes(dst []byte, b []byte) []byte {
	if b == nil {
		return appendInt32(dst, -1)
	}
	dst = appendInt32(dst, int32(len(b)))
	return append(dst, b...)
}

// reader decodes classic (non-flexible) Kafka protocol fields. After the
// first failure it is bad, returns zero values and consumes nothing.
// Lengths are checked against the remaining input before anything is
// allocated, so hostile length prefixes cannot cause large allocations.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) span(n int) []byte {
	if r.bad || n < 0 || len(r.b) < n {
		r.bad, r.b = true, nil
		return nil
	}
	s := r.b[:n:n]
	r.b = r.b[n:]
	return s
}

func (r *reader) int16() int16 {
	s := r.span(2)
	if s == nil {
		return 0
	}
	return int16(binary.BigEndian.Uint16(s))
}

func (r *reader) int32() int32 {
	s := r.span(4)
	if s == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(s))
}

// str reads a non-nullable STRING; null is an error.
func (r *reader) str() string {
	n := r.int16()
	if n < 0 {
		r.bad, r.b = true, nil
		return ""
	}
	return string(r.span(int(n)))
}

// nullableStr reads a NULLABLE_STRING; null is returned as "".
func (r *reader) nullableStr() string {
	n := r.int16()
	if n == -1 {
		return ""
	}
	return string(r.span(int(n)))
}

// nullableBytes reads NULLABLE_BYTES, returning a copy (nil for null) and
// whether it was present.
func (r *reader) nullableBytes() ([]byte, bool) {
	n := r.int32()
	if r.bad || n == -1 {
		return nil, false
	}
	s := r.span(int(n))
	if s == nil {
		return nil, false
	}
	return slices.Clone(s), true
}

// arrayLen reads an ARRAY length whose elements take at least minSize bytes
// each. Null (-1) is read as empty; other negative lengths, and lengths the
// remaining input cannot hold, are errors.
func (r *reader) arrayLen(minSize int) int {
	n := r.int32()
	if r.bad || n == -1 {
		return 0
	}
	if n < 0 || int64(n)*int64(minSize) > int64(len(r.b)) {
		r.bad, r.b = true, nil
		return 0
	}
	return int(n)
}

// topicPartitions reads [topic STRING, [partition INT32]], merging repeated
// topics, and normalizes the result.
func (r *reader) topicPartitions() TopicPartitions {
	n := r.arrayLen(2 + 4)
	tp := make(TopicPartitions, n)
	for range n {
		t := r.str()
		np := r.arrayLen(4)
		if r.bad {
			return TopicPartitions{}
		}
		ps := tp[t]
		for range np {
			ps = append(ps, r.int32())
		}
		tp[t] = ps
	}
	for t, ps := range tp {
		if ps = normalize(ps); len(ps) > 0 {
			tp[t] = ps
		} else {
			delete(tp, t)
		}
	}
	return tp
}
