package riffle

import (
	"errors"
	"fmt"
	"time"

	"github.com/riffle-go/riffle/internal/errs"
)

// AcknowledgeType says what becomes of a record a share group member
// acquired (Java's AcknowledgeType).
type AcknowledgeType int8

// AckAccept: the record was processed; it is never delivered again.
// (The values of the acknowledgement types are the wire's, KIP-932.)
const AckAccept AcknowledgeType = 1

// AckRelease: give the record back; the group delivers it again (to
// any member) with its delivery count increased, unless that count
// reached the group's limit (group.share.delivery.count.limit), in
// which case it is archived.
const AckRelease AcknowledgeType = 2

// AckReject: the record cannot be processed; it is archived and never
// delivered again.
const AckReject AcknowledgeType = 3

// AckRenew: keep the record and restart its acquisition lock, for
// processing that outlives the lock (KIP-1222: needs ShareAcknowledge v2);
// the record still needs a final type later.
const AckRenew AcknowledgeType = 4

// String returns the Java name: ACCEPT, RELEASE, REJECT or RENEW.
func (t AcknowledgeType) String() string {
	switch t {
	case AckAccept:
		return "ACCEPT"
	case AckRelease:
		return "RELEASE"
	case AckReject:
		return "REJECT"
	case AckRenew:
		return "RENEW"
	}
	return fmt.Sprintf("AcknowledgeType(%d)", int8(t))
}

// ShareAckMode is share.acknowledgement.mode: who acknowledges records.
type ShareAckMode int8

// ShareAckImplicit (the default): the consumer acknowledges each record
// when its handler returns: AckAccept for nil, AckRelease for an error
// (the record is delivered again, to any member, until the group's
// delivery count limit archives it).
const ShareAckImplicit ShareAckMode = 0

// ShareAckExplicit: the handler (or anyone, later) calls
// ShareConsumer.Acknowledge for each record. A handler that returns an
// error for a record it did not acknowledge releases it; one that
// returns nil without acknowledging leaves it acquired until Acknowledge
// is called or its lock expires (renew it with AckRenew).
const ShareAckExplicit ShareAckMode = 1

// String returns the Java value: implicit or explicit.
func (m ShareAckMode) String() string {
	if m == ShareAckExplicit {
		return "explicit"
	}
	return "implicit"
}

// Share consumer errors.
var (
	// ErrShareConsumerClosed: the share consumer was closed. It matches
	// ErrClosed.
	ErrShareConsumerClosed = errs.NewClosed("riffle: share consumer closed")
	// ErrNotAcquired: Acknowledge was called for a record this member no
	// longer holds: already acknowledged, its acquisition lock expired (the
	// group delivers it again), or not from a ShareConsumer.
	ErrNotAcquired = errors.New("riffle: record not acquired by this share consumer")
	// ErrRenewUnsupported: AckRenew needs ShareAcknowledge v2 (KIP-1222),
	// which the partition's broker does not support.
	ErrRenewUnsupported = errors.New("riffle: the broker does not support acquisition lock renewal (KIP-1222)")
)

type shareConfig struct {
	group      string
	mode       ShareAckMode
	maxRecords int
	autoRenew  bool
}

func defaultShareConfig() shareConfig {
	return shareConfig{maxRecords: 500, autoRenew: true}
}

// ShareGroup makes the consumer a member of the share group id (KIP-932);
// only for NewShareConsumer, with SubscribeTopics.
func ShareGroup(id string) ConsumerOption { return func(c *consumerConfig) { c.share.group = id } }

// ShareAcknowledgementMode sets share.acknowledgement.mode (default
// ShareAckImplicit).
func ShareAcknowledgementMode(m ShareAckMode) ConsumerOption {
	return func(c *consumerConfig) { c.share.mode = m }
}

// ShareMaxRecords caps the records one broker's share fetch acquires
// (Java's max.poll.records; default 500). Whatever it says, a share
// consumer acquires only as many records as it has idle runners (Runners):
// a record waiting for a handler would hold its acquisition lock from the
// other members, and could lose it before a handler took it. Under load
// (the last fetch acquired records), a fetch for fewer than a quarter of
// min(ShareMaxRecords, Runners) records waits up to 1 ms, once, for that
// many runners to be idle.
func ShareMaxRecords(n int) ConsumerOption { return func(c *consumerConfig) { c.share.maxRecords = n } }

// ShareAutoRenew says whether the consumer renews (AckRenew, KIP-1222) the
// acquisition locks of records whose handler is still running as their
// lock nears its end (default true), so a handler may run longer than the
// group's lock duration without its record going to another member. Only
// where the broker supports renewal; elsewhere a record whose lock expired
// is delivered again while its handler runs, and its acknowledgement is
// dropped.
func ShareAutoRenew(on bool) ConsumerOption {
	return func(c *consumerConfig) { c.share.autoRenew = on }
}

func (c *consumerConfig) validateShare() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: share consumer: "+format, append([]any{errs.ErrConfig}, args...)...)
	}
	switch {
	case c.share.group == "":
		return bad("no share group (use ShareGroup)")
	case c.group.id != "":
		return bad("ConsumerGroup and ShareGroup are exclusive")
	}
	for _, r := range shareRefused {
		if r.given(c) {
			return bad("%s is not supported: %s", r.option, r.instead)
		}
	}
	switch {
	case len(c.group.topics) == 0:
		return bad("share group %q subscribes to nothing (use SubscribeTopics)", c.share.group)
	case c.onBatch != nil || c.sink != nil:
		return bad("a share consumer takes HandleRecord only")
	case c.onRecord == nil:
		return bad("no handler (use HandleRecord)")
	case c.runners < 0:
		return bad("negative runner count")
	case c.share.maxRecords < 1:
		return bad("ShareMaxRecords must be positive")
	case c.share.mode != ShareAckImplicit && c.share.mode != ShareAckExplicit:
		return bad("unknown acknowledgement mode %d", c.share.mode)
	case c.fetchMaxWait < 0 || c.fetchMaxWait > 5*time.Minute:
		return bad("fetch max wait %v out of range", c.fetchMaxWait)
	}
	return nil
}

// shareRefused are the consumer options whose meaning a share group does
// not have, or has in a group config the member cannot set: honouring
// none of them silently would change what the application gets (e.g.
// aborted records under Isolation(ReadCommitted)), so NewShareConsumer
// refuses each, whatever its value, and says what to do instead.
var shareRefused = []struct {
	option  string
	given   func(*consumerConfig) bool
	instead string
}{
	{"ExactlyOnce", func(c *consumerConfig) bool { return c.eos != nil },
		"share groups acknowledge records, they have no offsets to commit in a transaction (delivery is at least once)"},
	{"Isolation", func(c *consumerConfig) bool { return c.given&givenIsolation != 0 },
		"a share group's isolation level is its share.isolation.level group config (read_uncommitted unless altered): " +
			"set it with Admin.AlterGroupConfigs, or riffle config set --group GROUP share.isolation.level=read_committed"},
	{"OffsetReset", func(c *consumerConfig) bool { return c.given&givenOffsetReset != 0 },
		"where a share group starts in a partition is its share.auto.offset.reset group config (latest unless altered): " +
			"set it with Admin.AlterGroupConfigs, or riffle config set --group GROUP share.auto.offset.reset=earliest; " +
			"Admin.AlterShareGroupOffsets moves a group that has started"},
	{"OnPartitionError", func(c *consumerConfig) bool { return c.onError != nil },
		"a share consumer stops no partition: a handler error releases its record to be delivered again, " +
			"and fetch and acknowledgement errors are logged and counted in ShareConsumer.Stats"},
	{"InstanceID", func(c *consumerConfig) bool { return c.group.instanceID != "" },
		"share groups have no static membership (KIP-932 members name themselves): a restarted member joins as a new one"},
	{"SubscribePattern", func(c *consumerConfig) bool { return c.group.pattern != nil },
		"share groups subscribe by topic name: use SubscribeTopics"},
	{"MaxBatchRecords", func(c *consumerConfig) bool { return c.given&givenMaxBatchRecords != 0 },
		"a ShareConsumer hands HandleRecord one record at a time; ShareMaxRecords caps the records one share fetch acquires"},
}
