package assign

import (
	"fmt"
	"slices"
	"testing"
)

// benchGroup is 100 members and 100 topics of 100 partitions (10,000
// partitions). With half set, members with an odd index subscribe only the
// first half of the topics.
func benchGroup(half bool) ([]Member, map[string]int32) {
	topics := make(map[string]int32)
	var names []string
	for i := range 100 {
		n := fmt.Sprintf("topic-%03d", i)
		names = append(names, n)
		topics[n] = 100
	}
	members := make([]Member, 100)
	for i := range members {
		members[i] = Member{ID: fmt.Sprintf("member-%03d-%x", i, i*7919), Topics: names, Generation: -1}
		if half && i%2 == 1 {
			members[i].Topics = names[:50]
		}
	}
	return members, topics
}

// BenchmarkAssign measures each assignor on 10,000 partitions and 100
// members: a fresh group, a steady group (everyone owns its previous
// assignment), one member leaving, one joining, and the same with half the
// members subscribing half the topics.
func BenchmarkAssign(b *testing.B) {
	for _, half := range []bool{false, true} {
		members, topics := benchGroup(half)
		kind := "same-subs"
		if half {
			kind = "diff-subs"
		}
		for _, a := range all() {
			steady := withOwned(members, Sticky().Assign(members, topics), 5)
			scenarios := []struct {
				name    string
				members []Member
			}{
				{"fresh", members},
				{"steady", steady},
				{"leave", slices.Delete(slices.Clone(steady), 17, 18)},
				{"join", append(slices.Clone(steady), Member{ID: "member-new", Topics: members[0].Topics, Generation: -1})},
			}
			for _, sc := range scenarios {
				b.Run(fmt.Sprintf("%s/%s/%s", kind, a.Name(), sc.name), func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						a.Assign(sc.members, topics)
					}
				})
			}
		}
	}
}

func BenchmarkCooperativeAdjust(b *testing.B) {
	members, topics := benchGroup(false)
	steady := withOwned(members, Sticky().Assign(members, topics), 5)
	after := slices.Delete(slices.Clone(steady), 17, 18)
	after = append(after, Member{ID: "member-new", Topics: members[0].Topics, Generation: -1})
	plan := Sticky().Assign(after, topics)
	b.ReportAllocs()
	for b.Loop() {
		CooperativeAdjust(plan, after)
	}
}

func BenchmarkSubscriptionCodec(b *testing.B) {
	owned := TopicPartitions{}
	for i := range 100 {
		owned[fmt.Sprintf("topic-%03d", i)] = []int32{int32(i), int32(i + 100)}
	}
	var topics []string
	for t := range owned {
		topics = append(topics, t)
	}
	for _, a := range []Assignor{Sticky(), CooperativeSticky()} {
		enc := EncodeSubscription(a, topics, owned, 7)
		b.Run("encode/"+a.Name(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				EncodeSubscription(a, topics, owned, 7)
			}
		})
		b.Run("decode/"+a.Name(), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(enc)))
			for b.Loop() {
				if _, err := DecodeSubscription(a.Name(), "m", enc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStickyManyTopics: 10,000 single-partition topics, 100 members
// each subscribing a random half (500,000 subscription entries), fresh and
// after one member left.
func BenchmarkStickyManyTopics(b *testing.B) {
	topics := make(map[string]int32)
	var names []string
	for i := range 10000 {
		n := fmt.Sprintf("topic-%05d", i)
		names = append(names, n)
		topics[n] = 1
	}
	members := make([]Member, 100)
	x := uint32(1)
	for i := range members {
		members[i] = Member{ID: fmt.Sprintf("member-%03d", i), Generation: -1}
		for _, n := range names {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			if x%2 == 0 {
				members[i].Topics = append(members[i].Topics, n)
			}
		}
	}
	steady := withOwned(members, Sticky().Assign(members, topics), 3)
	leave := slices.Delete(slices.Clone(steady), 5, 6)
	for _, a := range []Assignor{Sticky(), CooperativeSticky()} {
		for _, sc := range []struct {
			name string
			m    []Member
		}{{"fresh", members}, {"leave", leave}} {
			b.Run(a.Name()+"/"+sc.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					a.Assign(sc.m, topics)
				}
			})
		}
	}
}
