package riffle

import (
	"math/rand/v2"
	"sync/atomic"
)

// Partitioner chooses partitions for records without an explicit
// partition. The producer asks it for a TopicPartitioner once per topic.
type Partitioner interface {
	ForTopic(topic string) TopicPartitioner
}

// TopicPartitioner picks a partition in [0, n) for each record of one
// topic. The producer calls it under that topic's lock, so an
// implementation needs no locking of its own; it must be fast.
type TopicPartitioner interface {
	Partition(r *Record, n int) int
}

// DefaultPartitioner is the Java client's default: records with a key go to
// murmur2(key) % partitions, the same partition the Java client, franz-go
// and librdkafka's murmur2 partitioner choose; records without a key stick
// to one partition until a batch's worth of bytes went there, then move on
// (KIP-480, KIP-794 "uniform sticky").
func DefaultPartitioner() Partitioner { return defaultPartitioner{} }

type defaultPartitioner struct{}

func (defaultPartitioner) ForTopic(string) TopicPartitioner { return &keyOrSticky{} }

// concurrentSafe marks the built-in TopicPartitioners, which are safe for
// concurrent use: the producer calls them without the topic's lock, which
// every record of the topic would otherwise take.
type concurrentSafe interface{ concurrentSafe() }

type keyOrSticky struct {
	sticky stickyState
}

func (*keyOrSticky) concurrentSafe() {}
func (*stickyOnly) concurrentSafe()  {}
func (*rrTopic) concurrentSafe()     {}
func (keyTopic) concurrentSafe()     {}
func (manualTopic) concurrentSafe()  {}

func (p *keyOrSticky) Partition(r *Record, n int) int {
	if r.Key != nil {
		return murmurPartition(r.Key, n)
	}
	return p.sticky.next(r, n)
}

// StickyPartitioner ignores keys: every record sticks to one partition
// until about a batch's worth of bytes went there, then a new partition is
// picked at random (KIP-794).
func StickyPartitioner() Partitioner { return stickyPartitioner{} }

type stickyPartitioner struct{}

func (stickyPartitioner) ForTopic(string) TopicPartitioner {
	return &stickyOnly{}
}

type stickyOnly struct{ s stickyState }

func (p *stickyOnly) Partition(r *Record, n int) int { return p.s.next(r, n) }

// stickySwitchBytes is how many bytes go to a sticky partition before the
// next is chosen: the default batch size (KIP-794 uses batch.size).
const stickySwitchBytes = 16 << 10

// stickyState is the current sticky partition and the bytes sent to it,
// in one word so that concurrent producers update both with one
// compare-and-swap: the partition plus one in the high 32 bits (0: none
// chosen yet), the bytes in the low 32.
type stickyState struct{ w atomic.Uint64 }

func (s *stickyState) next(r *Record, n int) int {
	// Capped, so the low half never overflows: a record this large
	// switches partitions after it anyway.
	size := uint64(min(len(r.Key)+len(r.Value), stickySwitchBytes))
	for {
		old := s.w.Load()
		cur, bytes := int(old>>32)-1, old&0xffffffff
		nw := old + size
		if cur < 0 || cur >= n || bytes >= stickySwitchBytes {
			prev := cur
			cur = rand.IntN(n)
			if n > 1 && cur == prev {
				cur = (cur + 1) % n
			}
			nw = uint64(cur+1)<<32 | size
		}
		if s.w.CompareAndSwap(old, nw) {
			return cur
		}
	}
}

// RoundRobinPartitioner sends records to partitions in turn, ignoring keys.
func RoundRobinPartitioner() Partitioner { return roundRobin{} }

type roundRobin struct{}

func (roundRobin) ForTopic(string) TopicPartitioner { return &rrTopic{} }

type rrTopic struct{ n atomic.Uint64 }

func (p *rrTopic) Partition(_ *Record, n int) int {
	return int(p.n.Add(1) % uint64(n))
}

// KeyPartitioner is murmur2(key) % partitions for every record; records
// without a key hash the empty key, so they all land on one partition.
// Prefer DefaultPartitioner unless every record has a key.
func KeyPartitioner() Partitioner { return keyPartitioner{} }

type keyPartitioner struct{}

func (keyPartitioner) ForTopic(string) TopicPartitioner { return keyTopic{} }

type keyTopic struct{}

func (keyTopic) Partition(r *Record, n int) int { return murmurPartition(r.Key, n) }

// ManualPartitioner uses each record's Partition field as is. A partition
// outside the topic fails the record.
func ManualPartitioner() Partitioner { return manual{} }

type manual struct{}

func (manual) ForTopic(string) TopicPartitioner { return manualTopic{} }

type manualTopic struct{}

func (manualTopic) Partition(r *Record, _ int) int { return int(r.Partition) }

func isManual(p Partitioner) bool {
	_, ok := p.(manual)
	return ok
}

// murmurPartition is Kafka's Utils.toPositive(murmur2(key)) % n.
func murmurPartition(key []byte, n int) int {
	return int(murmur2(key)&0x7fffffff) % n
}

// murmur2 is the 32-bit MurmurHash2 with Kafka's seed, as in the Java
// client's Utils.murmur2.
func murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	length := len(data)
	h := seed ^ uint32(length)
	i := 0
	for ; length-i >= 4; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch length - i {
	case 3:
		h ^= uint32(data[i+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[i+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[i])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}
