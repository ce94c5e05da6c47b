package riffle

import (
	"context"
	"regexp"
	"time"

	"github.com/riffle-go/riffle/internal/assign"
)

// GroupBalancer is a partition assignment strategy for consumer groups.
// The names and encodings match the Java client's, so Riffle members can
// share a group with Java, librdkafka and franz-go members. Range, sticky
// and cooperative-sticky are rack-aware (KIP-881): when members set Rack
// and the partitions' replicas sit in different racks, the leader prefers
// to give each member partitions with a replica in its rack, within the
// same balance (see the README's Racks section).
type GroupBalancer struct{ a assign.Assignor }

// Name is the protocol name ("range", "roundrobin", "sticky",
// "cooperative-sticky").
func (b GroupBalancer) Name() string { return b.a.Name() }

// RangeBalancer assigns each topic's partitions in contiguous ranges
// (rack-aware as Java's RangeAssignor: then the ranges need not be
// contiguous).
func RangeBalancer() GroupBalancer { return GroupBalancer{assign.Range()} }

// RoundRobinBalancer deals all partitions out in turn.
func RoundRobinBalancer() GroupBalancer { return GroupBalancer{assign.RoundRobin()} }

// StickyBalancer balances while keeping partitions where they were (eager
// protocol: every rebalance revokes everything first).
func StickyBalancer() GroupBalancer { return GroupBalancer{assign.Sticky()} }

// CooperativeStickyBalancer is sticky and incremental (KIP-429): only
// partitions that move are revoked; the rest keep flowing through a
// rebalance. The default.
func CooperativeStickyBalancer() GroupBalancer { return GroupBalancer{assign.CooperativeSticky()} }

type groupConfig struct {
	id                string
	topics            []string
	pattern           *regexp.Regexp
	balancers         []GroupBalancer
	sessionTimeout    time.Duration
	rebalanceTimeout  time.Duration
	heartbeatInterval time.Duration
	instanceID        string
	remoteAssignor    *string // GroupRemoteAssignor; nil: the broker's default
	autoCommit        bool
	noCommits         bool // DisableCommits: not on revoke or close either
	autoCommitEvery   time.Duration
	commitMetadata    string
	revokeTimeout     time.Duration
	slowJoinAfter     time.Duration // a JoinGroup pending this long is logged (tests shorten it)
	onAssigned        func(context.Context, []TopicPartition)
	onRevoked         func(context.Context, []TopicPartition)
	onLost            func(context.Context, []TopicPartition)
	onGroupError      func(error)
	protocol          GroupProtocol
}

func defaultGroupConfig() groupConfig {
	return groupConfig{
		balancers:         []GroupBalancer{CooperativeStickyBalancer()},
		sessionTimeout:    45 * time.Second,
		rebalanceTimeout:  5 * time.Minute,
		heartbeatInterval: 3 * time.Second,
		autoCommit:        true,
		autoCommitEvery:   5 * time.Second,
		revokeTimeout:     30 * time.Second,
		slowJoinAfter:     5 * time.Second,
	}
}

// ConsumerGroup makes the consumer join group id and consume the
// partitions the group assigns it (see SubscribeTopics, SubscribePattern).
func ConsumerGroup(id string) ConsumerOption {
	return func(c *consumerConfig) { c.group.id = id }
}

// SubscribeTopics sets the topics a group member subscribes to.
//
// With the classic protocol, as in the Java client, the member that
// computed the group's assignment (its leader) watches the partition
// counts of every topic the group subscribes to, in the client's
// metadata (refreshed at least once per MetadataMaxAge), and rebalances
// the group when a topic is created, deleted or given partitions; the
// other members rejoin only when their own subscription changes.
func SubscribeTopics(topics ...string) ConsumerOption {
	return func(c *consumerConfig) { c.group.topics = append(c.group.topics, topics...) }
}

// SubscribePattern subscribes to every topic whose whole name matches re
// (as the Java client and KIP-848 brokers match: "events" matches only
// "events", "events.*" matches "events-eu"); internal topics are left out.
//
// With the classic protocol the member lists the cluster's topics when it
// starts and then once per MetadataMaxAge (the client's metadata refresh
// period), so topics created later are picked up within that time; a
// listing that fails keeps the previous one, so a failing listing never
// makes the member give up its partitions. With GroupProtocolConsumer the
// broker matches the pattern (KIP-848 SubscribedTopicRegex, RE2/J syntax)
// and the member lists topics only to name ones it is assigned and does not
// know yet. NewShareConsumer refuses it: share groups subscribe by topic
// name.
func SubscribePattern(re *regexp.Regexp) ConsumerOption {
	return func(c *consumerConfig) { c.group.pattern = re }
}

// Balancers sets the assignment strategies in preference order (default
// CooperativeStickyBalancer). Mixing cooperative and eager balancers makes
// the group use the eager protocol, as in the Java client.
func Balancers(bs ...GroupBalancer) ConsumerOption {
	return func(c *consumerConfig) { c.group.balancers = bs }
}

// SessionTimeout is how long the coordinator waits without heartbeats
// before it evicts the member (default 45 s, as Java). Heartbeats run on
// their own goroutine, independently of revokes, offset fetches and
// callbacks, so only an unreachable coordinator makes a session lapse.
func SessionTimeout(d time.Duration) ConsumerOption {
	return func(c *consumerConfig) { c.group.sessionTimeout = d }
}

// RebalanceTimeout is how long the coordinator waits for members to rejoin
// during a rebalance (default 5 min, Java's max.poll.interval.ms).
func RebalanceTimeout(d time.Duration) ConsumerOption {
	return func(c *consumerConfig) { c.group.rebalanceTimeout = d }
}

// HeartbeatInterval is the time between heartbeats (default 3 s).
func HeartbeatInterval(d time.Duration) ConsumerOption {
	return func(c *consumerConfig) { c.group.heartbeatInterval = d }
}

// GroupRemoteAssignor names the server-side assignor of a KIP-848 member
// (group.remote.assignor in the Java client), sent in its
// ConsumerGroupHeartbeat: "uniform" or "range" on Apache Kafka. Without it
// the broker uses its default (group.consumer.assignors' first). It needs
// GroupProtocolConsumer; an empty name, or the option with the classic
// protocol, is refused with ErrInvalidConfig. The broker refuses a name
// it does not know (UNSUPPORTED_ASSIGNOR).
func GroupRemoteAssignor(name string) ConsumerOption {
	return func(c *consumerConfig) { c.group.remoteAssignor = &name }
}

// InstanceID enables static membership (group.instance.id, KIP-345): a
// restart within the session timeout keeps the member's partitions without
// a rebalance. Without it a restarted member (a new member id) waits for
// its previous instance's session to expire; a join held over 5 s is
// logged once at Info. NewShareConsumer refuses it: share groups have no
// static membership.
func InstanceID(id string) ConsumerOption { return func(c *consumerConfig) { c.group.instanceID = id } }

// AutoCommitInterval commits the offsets of finished records this often
// (default 5 s), on a schedule of its own: during a rebalance the
// partitions kept (cooperative-sticky) go on being committed. Each commit
// carries the current generation (member epoch); one the coordinator
// refuses because the group is rebalancing waits for the next interval,
// and partitions the member no longer owns are never committed. Commits
// also happen on revoke and on close.
func AutoCommitInterval(d time.Duration) ConsumerOption {
	return func(c *consumerConfig) { c.group.autoCommitEvery = d }
}

// DisableAutoCommit turns off periodic commits (revoke and close still
// commit finished work; see Consumer.Commit, and DisableCommits to turn
// those off too).
func DisableAutoCommit() ConsumerOption {
	return func(c *consumerConfig) { c.group.autoCommit = false }
}

// DisableCommits makes the consumer commit nothing by itself: no
// periodic commits, and none on revoke or Close (Commit and CommitOffsets
// still commit when called). Use it when the offsets are committed
// elsewhere, above all by a transactional producer
// (Producer.SendOffsetsToTransaction): a commit of its own would record
// records as done whose transaction may still abort. Commit the open
// transaction in OnPartitionsRevoked, which runs once the revoked
// partitions' handlers finished and before another member can get them.
func DisableCommits() ConsumerOption {
	return func(c *consumerConfig) { c.group.autoCommit, c.group.noCommits = false, true }
}

// CommitMetadata is the metadata string stored with every commit.
func CommitMetadata(s string) ConsumerOption {
	return func(c *consumerConfig) { c.group.commitMetadata = s }
}

// RevokeTimeout bounds how long a revoke waits for a partition's running
// handler (default 30 s; it must be below the rebalance timeout). Heartbeats
// go on meanwhile, so it may exceed the session timeout; the member rejoins
// only once the revoke is done. A handler still running after it is
// treated as lost: its context is cancelled, its offset is not committed,
// and the error is reported.
func RevokeTimeout(d time.Duration) ConsumerOption {
	return func(c *consumerConfig) { c.group.revokeTimeout = d }
}

// OnPartitionsAssigned is called after partitions are assigned, before
// their first record is handled.
func OnPartitionsAssigned(fn func(ctx context.Context, tps []TopicPartition)) ConsumerOption {
	return func(c *consumerConfig) { c.group.onAssigned = fn }
}

// OnPartitionsRevoked is called when partitions are given up in a
// rebalance, after their running handlers finished and their offsets were
// committed, before another member can get them. Consumer.Close calls it
// too, for every partition still owned, after the final commit and before
// leaving the group (the Java client's order), so per-partition state can
// be flushed on shutdown; if Close finds the member fenced or in the middle
// of a rebalance, OnPartitionsLost is called instead.
func OnPartitionsRevoked(fn func(ctx context.Context, tps []TopicPartition)) ConsumerOption {
	return func(c *consumerConfig) { c.group.onRevoked = fn }
}

// OnPartitionsLost is called when partitions were lost without a clean
// revoke: the coordinator fenced the member (a heartbeat, SyncGroup or
// JoinGroup answered UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
// FENCED_INSTANCE_ID, or under KIP-848 FENCED_MEMBER_EPOCH), or no
// heartbeat was answered for a whole session. Handlers' contexts were
// cancelled (a revoke in progress is abandoned) and nothing was committed.
func OnPartitionsLost(fn func(ctx context.Context, tps []TopicPartition)) ConsumerOption {
	return func(c *consumerConfig) { c.group.onLost = fn }
}

// OnGroupError is called for group errors the member cannot fix by itself
// (authorization, a fenced static member, misconfiguration), each time
// one occurs: the member keeps retrying, with backoff, and may meet the
// same error on every attempt. The client's log has each distinct error
// at Error once (until the member joins again), its repeats at Debug.
// An error that ends the membership for good, because the broker cannot
// run the group's protocol (an *UnsupportedError: KIP-848 groups on a
// broker without them, a share group on a broker without share groups),
// comes once and the member stops; Stats (GroupErr, a share consumer's
// Err) keeps it. A ShareConsumer takes this option for that error only.
func OnGroupError(fn func(error)) ConsumerOption {
	return func(c *consumerConfig) { c.group.onGroupError = fn }
}
