package riffle

import (
	"context"
	"regexp"
	"time"

	"github.com/riffle-go/riffle/internal/assign"
)

// GroupBalancer is a partition assignment strategy for consumer groups.
// The names and encodings match the Java client's, so Riffle members can
// share a group with Java, librdkafka and franz-go members.
type GroupBalancer struct{ a assign.Assignor }

// Name is the protocol name ("range", "roundrobin", "sticky",
// "cooperative-sticky").
func (b GroupBalancer) Name() string { return b.a.Name() }

// RangeBalancer assigns each topic's partitions in contiguous ranges.
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
	autoCommit        bool
	autoCommitEvery   time.Duration
	commitMetadata    string
	revokeTimeout     time.Duration
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
	}
}

// ConsumerGroup makes the consumer join group id and consume the
// partitions the group assigns it (see SubscribeTopics, SubscribePattern).
func ConsumerGroup(id string) ConsumerOption {
	return func(c *consumerConfig) { c.group.id = id }
}

// SubscribeTopics sets the topics a group member subscribes to.
func SubscribeTopics(topics ...string) ConsumerOption {
	return func(c *consumerConfig) { c.group.topics = append(c.group.topics, topics...) }
}

// SubscribePattern subscribes to every topic matching re; topics created
// later are picked up on metadata refresh.
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
// before it evicts the member (default 45 s, as Java).
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

// InstanceID enables static membership (group.instance.id, KIP-345): a
// restart within the session timeout keeps the member's partitions without
// a rebalance.
func InstanceID(id string) ConsumerOption { return func(c *consumerConfig) { c.group.instanceID = id } }

// AutoCommitInterval commits the offsets of finished records this often
// (default 5 s). Commits also happen on revoke and on close.
func AutoCommitInterval(d time.Duration) ConsumerOption {
	return func(c *consumerConfig) { c.group.autoCommitEvery = d }
}

// DisableAutoCommit turns off periodic commits (revoke and close still
// commit finished work unless you commit yourself; see Consumer.Commit).
func DisableAutoCommit() ConsumerOption {
	return func(c *consumerConfig) { c.group.autoCommit = false }
}

// CommitMetadata is the metadata string stored with every commit.
func CommitMetadata(s string) ConsumerOption {
	return func(c *consumerConfig) { c.group.commitMetadata = s }
}

// RevokeTimeout bounds how long a revoke waits for a partition's running
// handler (default 30 s; it must be below the rebalance timeout). A
// handler still running after it is treated as lost: its context is
// cancelled, its offset is not committed, and the error is reported.
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
// committed, before another member can get them.
func OnPartitionsRevoked(fn func(ctx context.Context, tps []TopicPartition)) ConsumerOption {
	return func(c *consumerConfig) { c.group.onRevoked = fn }
}

// OnPartitionsLost is called when partitions were lost without a clean
// revoke (session expired, fenced): handlers' contexts were cancelled and
// nothing was committed.
func OnPartitionsLost(fn func(ctx context.Context, tps []TopicPartition)) ConsumerOption {
	return func(c *consumerConfig) { c.group.onLost = fn }
}

// OnGroupError is called for group errors the member cannot fix by itself
// (authorization, a fenced static member, misconfiguration).
func OnGroupError(fn func(error)) ConsumerOption {
	return func(c *consumerConfig) { c.group.onGroupError = fn }
}
