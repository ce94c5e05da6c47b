package cluster

import (
	"maps"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BrokerMeta is a broker as metadata describes it.
type BrokerMeta struct {
	NodeID int32
	Host   string
	Port   int32
	Rack   string
}

// Addr is host:port.
func (b BrokerMeta) Addr() string { return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) }

// PartitionMeta is one partition's leadership and replicas.
type PartitionMeta struct {
	Partition   int32
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
	Offline     []int32
	Err         error // a Kafka error for this partition (e.g. LEADER_NOT_AVAILABLE)
}

// TopicMeta is one topic in the metadata.
type TopicMeta struct {
	Name       string
	ID         [16]byte
	Internal   bool
	Err        error // a Kafka error for the whole topic (e.g. UNKNOWN_TOPIC_OR_PARTITION)
	Partitions []PartitionMeta
}

// Snapshot is an immutable view of cluster metadata. A new one replaces the
// old on every refresh; readers never see a half-applied update.
type Snapshot struct {
	Brokers    map[int32]BrokerMeta
	Controller int32
	ClusterID  string
	Topics     map[string]*TopicMeta
	Updated    time.Time
}

func emptySnapshot() *Snapshot {
	return &Snapshot{Brokers: map[int32]BrokerMeta{}, Controller: -1, Topics: map[string]*TopicMeta{}}
}

// BrokerChange says what a refresh did to a broker.
type BrokerChange struct {
	NodeID  int32
	OldAddr string // empty if added
	NewAddr string // empty if removed
}

// merge applies a metadata response to prev and returns the new snapshot
// and broker changes. asked (sorted) are the topics the request asked
// about: the new snapshot holds exactly those, so topics nobody asks about
// any more are dropped; an asked topic missing from the response keeps its
// previous entry. A partition whose leader epoch is older than the cached
// one is stale (the answering broker has not seen the latest election yet)
// and keeps the cached entry. Pure.
func merge(prev *Snapshot, resp *kmsg.MetadataResponse, asked []string, now time.Time) (*Snapshot, []BrokerChange) {
	next := &Snapshot{
		Brokers:    prev.Brokers,
		Controller: resp.ControllerID,
		Topics:     make(map[string]*TopicMeta, len(asked)),
		Updated:    now,
		ClusterID:  prev.ClusterID,
	}
	if resp.ClusterID != nil {
		next.ClusterID = *resp.ClusterID
	}
	var changes []BrokerChange
	// A response without brokers is useless for membership; keep what we
	// know rather than forget every broker.
	if len(resp.Brokers) > 0 {
		next.Brokers = make(map[int32]BrokerMeta, len(resp.Brokers))
		for _, b := range resp.Brokers {
			bm := BrokerMeta{NodeID: b.NodeID, Host: b.Host, Port: b.Port}
			if b.Rack != nil {
				bm.Rack = *b.Rack
			}
			next.Brokers[b.NodeID] = bm
			old, had := prev.Brokers[b.NodeID]
			switch {
			case !had:
				changes = append(changes, BrokerChange{NodeID: b.NodeID, NewAddr: bm.Addr()})
			case old.Addr() != bm.Addr():
				changes = append(changes, BrokerChange{NodeID: b.NodeID, OldAddr: old.Addr(), NewAddr: bm.Addr()})
			}
		}
		for id, old := range prev.Brokers {
			if _, ok := next.Brokers[id]; !ok {
				changes = append(changes, BrokerChange{NodeID: id, OldAddr: old.Addr()})
			}
		}
	}
	for _, name := range asked {
		if t := prev.Topics[name]; t != nil {
			next.Topics[name] = t
		}
	}
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		if rt.Topic == nil {
			continue
		}
		name := *rt.Topic
		if _, ok := slices.BinarySearch(asked, name); !ok {
			continue
		}
		t := &TopicMeta{Name: name, ID: rt.TopicID, Internal: rt.IsInternal, Err: kafkaerr.ForCode(rt.ErrorCode)}
		old := prev.Topics[name]
		if t.Err != nil && old != nil && old.Err == nil && kafkaerr.Typed(rt.ErrorCode).Retriable &&
			rt.ErrorCode != kafkaerr.UnknownTopicOrPartition {
			// A transient topic-level error (leader election in
			// progress) does not erase what we knew.
			next.Topics[name] = old
			continue
		}
		t.Partitions = make([]PartitionMeta, 0, len(rt.Partitions))
		for _, rp := range rt.Partitions {
			pm := PartitionMeta{
				Partition:   rp.Partition,
				Leader:      rp.Leader,
				LeaderEpoch: rp.LeaderEpoch,
				Replicas:    rp.Replicas,
				ISR:         rp.ISR,
				Offline:     rp.OfflineReplicas,
				Err:         kafkaerr.ForCode(rp.ErrorCode),
			}
			if op, ok := old.partition(rp.Partition); ok && rp.LeaderEpoch >= 0 && op.LeaderEpoch > rp.LeaderEpoch {
				pm = op
			}
			t.Partitions = append(t.Partitions, pm)
		}
		sortPartitions(t.Partitions)
		next.Topics[name] = t
	}
	return next, changes
}

func (t *TopicMeta) partition(p int32) (PartitionMeta, bool) {
	if t == nil {
		return PartitionMeta{}, false
	}
	if int(p) < len(t.Partitions) && t.Partitions[p].Partition == p {
		return t.Partitions[p], true
	}
	for _, pm := range t.Partitions {
		if pm.Partition == p {
			return pm, true
		}
	}
	return PartitionMeta{}, false
}

// Partition returns partition p of the topic.
func (t *TopicMeta) Partition(p int32) (PartitionMeta, bool) { return t.partition(p) }

func sortPartitions(ps []PartitionMeta) {
	// Responses are often ordered already, but not always (kfake answers
	// in map order): an insertion sort of 10,000 shuffled partitions was
	// most of a metadata refresh.
	cmp := func(a, b PartitionMeta) int { return int(a.Partition) - int(b.Partition) }
	if !slices.IsSortedFunc(ps, cmp) {
		slices.SortFunc(ps, cmp)
	}
}

// LeaderHint is a partition's leader as a broker named it in a response
// (KIP-951: the CurrentLeader that Fetch, Produce, ShareFetch and
// ShareAcknowledge carry with NOT_LEADER_OR_FOLLOWER and
// FENCED_LEADER_EPOCH). The topic is named by Topic or, when that is
// empty, by TopicID (share responses name topics by id).
type LeaderHint struct {
	Topic     string
	TopicID   [16]byte
	Partition int32
	Leader    int32
	Epoch     int32
}

// HintFrom returns the leader hint a partition's error carries (KIP-951):
// ok when code is NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH and the
// response's CurrentLeader names a leader and its epoch (leader >= 0,
// epoch >= 0). Without one, only a metadata refresh says where the
// partition went. Pure.
func HintFrom(code int16, topic string, partition, leader, epoch int32) (LeaderHint, bool) {
	if (code != kafkaerr.NotLeaderForPartition && code != kafkaerr.FencedLeaderEpoch) || leader < 0 || epoch < 0 {
		return LeaderHint{}, false
	}
	return LeaderHint{Topic: topic, Partition: partition, Leader: leader, Epoch: epoch}, true
}

// withHints applies leader hints to prev, as Java's
// Metadata.updatePartitionLeadership does: a partition moves to its hinted
// leader when the hint's epoch is newer than the cached one and the leader
// is a broker the snapshot knows or one of endpoints (the response's
// NodeEndpoints), which joins the brokers if new (a broker already known
// keeps its address: metadata, not a hint, moves brokers). It returns the
// new snapshot (prev itself when nothing changed), the brokers added, and
// whether every hint is satisfied by the result: its partition is led by
// the hinted leader at the hint's epoch or a newer one. An unsatisfied
// hint (unknown topic or broker, or a cached epoch as new with another
// leader) needs a metadata refresh. Pure.
func withHints(prev *Snapshot, hints []LeaderHint, endpoints []BrokerMeta) (*Snapshot, []BrokerChange, bool) {
	next := prev
	var changes []BrokerChange
	all := true
	var byID map[[16]byte]string
	cloned := map[string]bool{}
	for _, h := range hints {
		name := h.Topic
		if name == "" {
			if byID == nil {
				byID = make(map[[16]byte]string, len(prev.Topics))
				for n, t := range prev.Topics {
					byID[t.ID] = n
				}
			}
			name = byID[h.TopicID]
		}
		t := next.Topics[name]
		pm, ok := t.partition(h.Partition)
		if !ok || h.Leader < 0 || h.Epoch < 0 {
			all = false // nothing to apply, or nothing says it is newer
			continue
		}
		if pm.LeaderEpoch >= h.Epoch {
			// Ours is as new or newer: a newer one names its own
			// leader (the hinting broker is behind), an equal one
			// with another leader is a contradiction only a
			// refresh settles.
			if pm.LeaderEpoch == h.Epoch && pm.Leader != h.Leader {
				all = false
			}
			continue
		}
		if _, known := next.Brokers[h.Leader]; !known {
			i := slices.IndexFunc(endpoints, func(b BrokerMeta) bool { return b.NodeID == h.Leader })
			if i < 0 {
				all = false
				continue
			}
			if next == prev {
				next = cloneSnapshot(prev)
			}
			if len(changes) == 0 {
				next.Brokers = maps.Clone(next.Brokers)
			}
			next.Brokers[h.Leader] = endpoints[i]
			changes = append(changes, BrokerChange{NodeID: h.Leader, NewAddr: endpoints[i].Addr()})
		}
		if next == prev {
			next = cloneSnapshot(prev)
		}
		if !cloned[name] {
			cloned[name] = true
			nt := *t
			nt.Partitions = slices.Clone(t.Partitions)
			next.Topics[name] = &nt
			t = &nt
		}
		for i := range t.Partitions {
			if t.Partitions[i].Partition == h.Partition {
				t.Partitions[i].Leader, t.Partitions[i].LeaderEpoch = h.Leader, h.Epoch
				t.Partitions[i].Err = nil
			}
		}
	}
	return next, changes, all
}

// HintLeader is the leader s names for the partition of h (found by name,
// or by topic id when h has no name), -1 when s does not know it.
func (s *Snapshot) HintLeader(h LeaderHint) int32 {
	t := s.Topics[h.Topic]
	if h.Topic == "" {
		t = nil
		for _, c := range s.Topics {
			if c.ID == h.TopicID {
				t = c
				break
			}
		}
	}
	if pm, ok := t.partition(h.Partition); ok {
		return pm.Leader
	}
	return -1
}

// cloneSnapshot copies s shallowly: a new topic map with the same topics.
func cloneSnapshot(s *Snapshot) *Snapshot {
	n := *s
	n.Topics = maps.Clone(s.Topics)
	return &n
}
