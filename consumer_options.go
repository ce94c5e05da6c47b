package riffle

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/riffle-go/riffle/internal/errs"
)

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String formats the partition as topic[partition].
func (tp TopicPartition) String() string { return fmt.Sprintf("%s[%d]", tp.Topic, tp.Partition) }

// StartOffset says where consumption of a partition starts.
type StartOffset struct {
	kind   int8 // 0 exact, 1 earliest, 2 latest, 3 timestamp
	at     int64
	epoch1 int32 // exact: leader epoch of the record before at, plus one (0: unknown)
}

// atCommitted starts at a committed offset whose last record was written
// in leader epoch (-1: unknown): the position is checked against the
// leader's log before fetching (KIP-320).
func atCommitted(o int64, epoch int32) StartOffset {
	return StartOffset{kind: 0, at: o, epoch1: max(epoch, -1) + 1}
}

func (s StartOffset) epoch() int32 { return s.epoch1 - 1 }

// AtEarliest starts at the log start offset.
func AtEarliest() StartOffset { return StartOffset{kind: 1} }

// AtLatest starts at the high watermark: only records produced from now on.
func AtLatest() StartOffset { return StartOffset{kind: 2} }

// AtOffset starts at an exact offset (reset policy applies if it is out of
// range).
func AtOffset(o int64) StartOffset { return StartOffset{kind: 0, at: o} }

// AtTime starts at the first record whose timestamp is at or after t.
func AtTime(t time.Time) StartOffset { return StartOffset{kind: 3, at: t.UnixMilli()} }

// String describes the start offset.
func (s StartOffset) String() string {
	switch s.kind {
	case 1:
		return "earliest"
	case 2:
		return "latest"
	case 3:
		return fmt.Sprintf("time %d", s.at)
	}
	return fmt.Sprintf("offset %d", s.at)
}

// ResetPolicy says where a partition starts when its offset is out of
// range, or when a group has no committed offset for it (Java's
// auto.offset.reset). See OffsetReset for the default.
type ResetPolicy int8

// ResetLatest jumps to the high watermark: only records produced from now
// on are read. The default, as in the Java client.
const ResetLatest ResetPolicy = 0

// ResetEarliest jumps to the log start offset: every record still in the
// log is read.
const ResetEarliest ResetPolicy = 1

// ResetNone stops the partition with an ErrOffsetOutOfRange error (see
// OnPartitionError).
const ResetNone ResetPolicy = 2

// IsolationLevel selects which transactional records are read.
type IsolationLevel int8

// ReadUncommitted reads every record (the Java default).
const ReadUncommitted IsolationLevel = 0

// ReadCommitted reads only committed transactional records, up to the
// last stable offset; aborted transactions are filtered out.
const ReadCommitted IsolationLevel = 1

// FetchBatch is what a batch handler receives: records of one partition in
// offset order.
type FetchBatch struct {
	Topic         string
	Partition     int32
	Records       []*Record
	HighWatermark int64
}

// PartitionError reports a partition that stopped: a handler error (Offset
// is the failed record, which will be redelivered on resume), a corrupt
// batch, or an out-of-range offset under ResetNone.
type PartitionError struct {
	Topic     string
	Partition int32
	Offset    int64
	Err       error
}

// Error formats the partition, offset and cause.
func (e *PartitionError) Error() string {
	return fmt.Sprintf("%s[%d] at offset %d: %v", e.Topic, e.Partition, e.Offset, e.Err)
}

// Unwrap returns the cause.
func (e *PartitionError) Unwrap() error { return e.Err }

// StoppedPartitionsError is part of Consumer.Close's error when partitions
// were stopped by an error at the time: each one's PartitionError, in topic
// and partition order. errors.As finds it, and errors.Is and errors.As see
// through it to every PartitionError and cause.
type StoppedPartitionsError struct {
	Partitions []*PartitionError
}

// Error lists the stopped partitions.
func (e *StoppedPartitionsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d partition(s) stopped by an error:", len(e.Partitions))
	for i, p := range e.Partitions {
		if i > 0 {
			b.WriteString(";")
		}
		b.WriteString(" ")
		b.WriteString(p.Error())
	}
	return b.String()
}

// Unwrap returns every partition's error.
func (e *StoppedPartitionsError) Unwrap() []error {
	out := make([]error, len(e.Partitions))
	for i, p := range e.Partitions {
		out[i] = p
	}
	return out
}

// ConsumerOption configures a Consumer.
type ConsumerOption func(*consumerConfig)

type consumerConfig struct {
	onRecord        func(context.Context, *Record) error
	onBatch         func(context.Context, *FetchBatch) error
	onError         func(*PartitionError)
	runners         int
	reset           ResetPolicy
	isolation       IsolationLevel
	fetchMaxWait    time.Duration
	fetchMinBytes   int32
	fetchMaxBytes   int32
	partitionMax    int32
	maxBuffered     int64
	partitionBuffer int64
	checkCRC        bool
	maxDecompressed int
	maxBatchRecords int
	group           groupConfig
	sink            recordSink // riffle/process; replaces the handler
	eos             *eosConfig // ExactlyOnce
	share           shareConfig
	// given records the options whose default is a valid value, so
	// NewShareConsumer can refuse them whatever value they carry.
	given givenOptions
}

// givenOptions is a set of consumer options that were given.
type givenOptions uint8

const (
	givenOffsetReset givenOptions = 1 << iota
	givenIsolation
	givenMaxBatchRecords
)

func defaultConsumerConfig() consumerConfig {
	return consumerConfig{
		runners:         0, // one per partition up to GOMAXPROCS*4
		reset:           ResetLatest,
		fetchMaxWait:    500 * time.Millisecond,
		fetchMinBytes:   1,
		fetchMaxBytes:   50 << 20,
		partitionMax:    1 << 20,
		maxBuffered:     64 << 20,
		partitionBuffer: 4 << 20,
		checkCRC:        true,
		maxDecompressed: 128 << 20,
		maxBatchRecords: 1000,
		group:           defaultGroupConfig(),
		share:           defaultShareConfig(),
	}
}

func (c *consumerConfig) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: consumer: "+format, append([]any{errs.ErrConfig}, args...)...)
	}
	switch {
	case c.share.group != "":
		return bad("ShareGroup is for NewShareConsumer")
	case c.sink == nil && c.onRecord == nil && c.onBatch == nil:
		return bad("no handler (use HandleRecord or HandleBatch)")
	case c.onRecord != nil && c.onBatch != nil:
		return bad("both HandleRecord and HandleBatch set")
	case c.sink != nil && (c.onRecord != nil || c.onBatch != nil):
		return bad("a processor replaces HandleRecord and HandleBatch")
	case c.runners < 0:
		return bad("negative runner count")
	case c.fetchMaxWait < 0 || c.fetchMaxWait > 5*time.Minute:
		return bad("fetch max wait %v out of range", c.fetchMaxWait)
	case c.partitionMax < 1<<10 || c.fetchMaxBytes < c.partitionMax:
		return bad("fetch sizes: partition max %d, fetch max %d", c.partitionMax, c.fetchMaxBytes)
	case c.maxBuffered < int64(c.partitionMax):
		return bad("buffer budget %d below partition max bytes %d", c.maxBuffered, c.partitionMax)
	case c.partitionBuffer < 1:
		return bad("partition buffer must be positive")
	case c.maxBatchRecords < 1:
		return bad("max batch records must be positive")
	}
	g := &c.group
	if g.remoteAssignor != nil {
		switch {
		case *g.remoteAssignor == "":
			return bad("GroupRemoteAssignor: empty assignor name (omit the option for the broker's default)")
		case g.id == "":
			return bad("GroupRemoteAssignor(%q) needs ConsumerGroup", *g.remoteAssignor)
		case g.protocol != GroupProtocolConsumer:
			return bad("GroupRemoteAssignor(%q) needs WithGroupProtocol(GroupProtocolConsumer) (KIP-848); classic groups assign on the client (GroupBalancers)", *g.remoteAssignor)
		}
	}
	if g.id == "" {
		if len(g.topics) > 0 || g.pattern != nil {
			return bad("SubscribeTopics/SubscribePattern need ConsumerGroup")
		}
		if c.eos != nil {
			return c.eos.validate(c)
		}
		return nil
	}
	switch {
	case len(g.topics) == 0 && g.pattern == nil:
		return bad("group %q subscribes to nothing (use SubscribeTopics or SubscribePattern)", g.id)
	case len(g.topics) > 0 && g.pattern != nil:
		return bad("use SubscribeTopics or SubscribePattern, not both")
	case len(g.balancers) == 0:
		return bad("no group balancer")
	case g.heartbeatInterval <= 0 || g.heartbeatInterval >= g.sessionTimeout:
		return bad("heartbeat interval %v must be positive and below the session timeout %v", g.heartbeatInterval, g.sessionTimeout)
	case g.rebalanceTimeout < g.sessionTimeout/10 || g.rebalanceTimeout <= 0:
		return bad("rebalance timeout %v too small", g.rebalanceTimeout)
	case g.revokeTimeout <= 0 || g.revokeTimeout >= g.rebalanceTimeout:
		return bad("revoke timeout %v must be positive and below the rebalance timeout %v", g.revokeTimeout, g.rebalanceTimeout)
	case g.autoCommitEvery <= 0:
		return bad("auto-commit interval must be positive")
	}
	for _, b := range g.balancers {
		if b.a == nil {
			return bad("zero GroupBalancer")
		}
	}
	if c.eos != nil {
		return c.eos.validate(c)
	}
	return nil
}

func (c *consumerConfig) runnerCount() int {
	if c.runners > 0 {
		return c.runners
	}
	return runtime.GOMAXPROCS(0) * 4
}

// HandleRecord sets the per-record handler. It is called for one record at
// a time per partition, in offset order; different partitions run
// concurrently. Returning an error stops the partition at that record
// (see OnPartitionError). ctx is cancelled when the partition is lost or
// the consumer closes.
func HandleRecord(fn func(ctx context.Context, r *Record) error) ConsumerOption {
	return func(c *consumerConfig) { c.onRecord = fn }
}

// HandleBatch sets the per-batch handler: it receives up to
// MaxBatchRecords buffered records of one partition at a time. An error
// stops the partition at the batch's first record.
func HandleBatch(fn func(ctx context.Context, b *FetchBatch) error) ConsumerOption {
	return func(c *consumerConfig) { c.onBatch = fn }
}

// OnPartitionError is called when a partition stops (handler error,
// corrupt batch, offset out of range with ResetNone, a start offset that
// cannot be resolved). Other partitions keep flowing. Resume restarts the
// partition at the reported offset. It is also called, without the
// partition stopping, when the metadata names an assigned topic or
// partition unknown (ErrUnknownTopic; once per change: the start offset is
// retried in case it is created, and Stats shows the error meanwhile), and
// when a log truncation is detected after a leader
// change (ErrLogTruncated, a *LogTruncationError) and a reset policy lets
// the partition go on from where the logs diverge; with ResetNone such a
// partition stops. NewShareConsumer refuses it: no share partition stops.
func OnPartitionError(fn func(*PartitionError)) ConsumerOption {
	return func(c *consumerConfig) { c.onError = fn }
}

// Runners caps how many handler calls run at once across partitions. The
// default is one per assigned partition, up to GOMAXPROCS*4 (like kafkajs'
// partitionsConsumedConcurrently): handlers are often I/O bound, so more
// runners than cores pays, while the cap keeps a consumer of thousands of
// partitions from spawning thousands of goroutines. When partitions
// outnumber runners, ready partitions are served in FIFO order and each
// gets at most one batch before yielding.
func Runners(n int) ConsumerOption { return func(c *consumerConfig) { c.runners = n } }

// OffsetReset says where a partition starts when its offset is out of range
// and, in a group, when the group has no committed offset for it.
//
// The default is ResetLatest, as in the Java client: a new group reads
// only what is produced after it joined. Set ResetEarliest to read a
// topic's history. (The riffle CLI's "consume --from" defaults to
// earliest instead: a person asking to see a topic wants what is in it.)
// NewShareConsumer refuses it: a share group starts where its
// share.auto.offset.reset group config says (Admin.AlterGroupConfigs).
func OffsetReset(p ResetPolicy) ConsumerOption {
	return func(c *consumerConfig) { c.reset, c.given = p, c.given|givenOffsetReset }
}

// Isolation sets the isolation level (default ReadUncommitted).
// NewShareConsumer refuses it: a share group reads at its
// share.isolation.level group config (Admin.AlterGroupConfigs).
func Isolation(l IsolationLevel) ConsumerOption {
	return func(c *consumerConfig) { c.isolation, c.given = l, c.given|givenIsolation }
}

// FetchMaxWait is how long a broker may hold a fetch waiting for data
// (default 500 ms).
func FetchMaxWait(d time.Duration) ConsumerOption {
	return func(c *consumerConfig) { c.fetchMaxWait = d }
}

// FetchMaxBytes caps one fetch response (default 50 MiB).
func FetchMaxBytes(n int32) ConsumerOption { return func(c *consumerConfig) { c.fetchMaxBytes = n } }

// FetchPartitionMaxBytes caps one partition in a fetch response (default
// 1 MiB, Java's max.partition.fetch.bytes).
func FetchPartitionMaxBytes(n int32) ConsumerOption {
	return func(c *consumerConfig) { c.partitionMax = n }
}

// FetchBufferBytes is the byte budget of fetched, decompressed records
// waiting for handlers, across all partitions (default 64 MiB). Fetching
// asks for no more than the budget has room for.
func FetchBufferBytes(n int64) ConsumerOption { return func(c *consumerConfig) { c.maxBuffered = n } }

// PartitionBufferBytes caps one partition's buffered records (default
// 4 MiB): a partition whose handler lags stops being fetched until it
// catches up, without stalling other partitions.
func PartitionBufferBytes(n int64) ConsumerOption {
	return func(c *consumerConfig) { c.partitionBuffer = n }
}

// CheckCRC turns CRC-32C verification of fetched batches on or off
// (default on).
func CheckCRC(on bool) ConsumerOption { return func(c *consumerConfig) { c.checkCRC = on } }

// MaxDecompressedBytes bounds one batch's decompressed size (default
// 128 MiB); a bigger batch (a decompression bomb) stops its partition with
// an error instead of exhausting memory.
func MaxDecompressedBytes(n int) ConsumerOption {
	return func(c *consumerConfig) { c.maxDecompressed = n }
}

// MaxBatchRecords caps the records given to one HandleBatch call (default
// 1000). With HandleRecord it caps the records of one partition a runner
// handles, one call each, before the partition yields to the next one
// ready (when partitions outnumber Runners); under ExactlyOnce, a commit
// point that comes due ends that run at the next record, whatever the
// cap. NewShareConsumer refuses it (see ShareMaxRecords).
func MaxBatchRecords(n int) ConsumerOption {
	return func(c *consumerConfig) { c.maxBatchRecords, c.given = n, c.given|givenMaxBatchRecords }
}
