package riffle

import (
	"fmt"
	"math"
	"time"

	"github.com/riffle-go/riffle/internal/batch"
	"github.com/riffle-go/riffle/internal/errs"
)

// Acks is how many replicas must have a record before the broker answers.
type Acks int16

// AcksAll waits for every in-sync replica (Java acks=all, -1). The
// default, and required by idempotence.
const AcksAll Acks = -1

// AcksLeader waits for the leader only (acks=1). Needs
// DisableIdempotence.
const AcksLeader Acks = 1

// AcksNone does not wait at all (acks=0): the broker sends no answer
// and errors are not seen. Needs DisableIdempotence.
const AcksNone Acks = 0

// Compression is a batch compression codec, numbered as in the record
// batch attributes. Compression happens on the producing goroutine as a
// batch is sealed, never on the connection writer.
type Compression int8

// CompressionNone sends batches uncompressed (the default).
const CompressionNone Compression = 0

// CompressionGzip compresses batches with gzip.
const CompressionGzip Compression = 1

// CompressionSnappy compresses batches with snappy.
const CompressionSnappy Compression = 2

// CompressionLZ4 compresses batches with LZ4.
const CompressionLZ4 Compression = 3

// CompressionZstd compresses batches with zstd.
const CompressionZstd Compression = 4

// String names the codec.
func (c Compression) String() string { return batch.Codec(c).String() }

// ProducerOption configures a Producer.
type ProducerOption func(*producerConfig)

type producerConfig struct {
	acks               Acks
	idempotent         bool
	linger             time.Duration
	maxBatchBytes      int
	maxBufferedBytes   int64
	maxBufferedRecords int64
	failFast           bool
	compression        Compression
	partitioner        Partitioner
	deliveryTimeout    time.Duration
	maxInflight        int
	produceTimeout     time.Duration
	stopOnDataLoss     bool
	hooks              []ProducerHook
	maxRequestBytes    int
	transactionalID    string
	txnTimeout         time.Duration
	unknownTopicWait   time.Duration // see UnknownTopicTimeout
	unknownTopicSet    bool          // UnknownTopicTimeout given; else the client's UnknownTopicWait
}

func defaultProducerConfig() producerConfig {
	return producerConfig{
		acks:               AcksAll,
		idempotent:         true,
		linger:             5 * time.Millisecond,
		maxBatchBytes:      1 << 20,
		maxBufferedBytes:   32 << 20,
		maxBufferedRecords: 1 << 20,
		compression:        CompressionNone,
		partitioner:        DefaultPartitioner(),
		deliveryTimeout:    120 * time.Second,
		maxInflight:        5,
		produceTimeout:     30 * time.Second,
		maxRequestBytes:    16 << 20,
		txnTimeout:         60 * time.Second,
	}
}

func (c *producerConfig) validate(requestTimeout time.Duration) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: producer: "+format, append([]any{errs.ErrConfig}, args...)...)
	}
	switch {
	case c.transactionalID != "" && !c.idempotent:
		return bad("a transactional producer is idempotent: TransactionalID cannot be used with DisableIdempotence")
	case c.transactionalID != "" && c.acks != AcksAll:
		return bad("a transactional producer needs acks=all (got acks=%d)", c.acks)
	case c.acks != AcksAll && c.acks != AcksLeader && c.acks != AcksNone:
		return bad("acks %d is not -1 (all), 0 or 1", c.acks)
	case c.idempotent && c.acks != AcksAll:
		return bad("idempotence requires acks=all (got acks=%d); use DisableIdempotence for acks 0 or 1", c.acks)
	case c.idempotent && (c.maxInflight < 1 || c.maxInflight > 5):
		return bad("idempotence allows 1 to 5 requests in flight per partition (got %d): brokers remember 5 batches per producer", c.maxInflight)
	case c.maxInflight < 1:
		return bad("max in flight must be at least 1")
	case c.linger < 0:
		return bad("linger must not be negative")
	case c.maxBatchBytes < 1<<10:
		return bad("max batch bytes %d below 1 KiB", c.maxBatchBytes)
	case c.maxBufferedBytes < int64(c.maxBatchBytes):
		return bad("max buffered bytes %d below max batch bytes %d", c.maxBufferedBytes, c.maxBatchBytes)
	case c.maxBufferedRecords < 1:
		return bad("max buffered records must be at least 1")
	case !batch.Codec(c.compression).Valid():
		return bad("unknown compression %d", c.compression)
	case c.partitioner == nil:
		return bad("nil partitioner")
	case c.deliveryTimeout <= 0 || c.produceTimeout <= 0:
		return bad("timeouts must be positive")
	case c.unknownTopicWait < 0:
		return bad("unknown topic timeout %v is negative", c.unknownTopicWait)
	case c.deliveryTimeout < c.linger+requestTimeout:
		// Java's rule: a record must get at least one full attempt.
		return bad("delivery timeout %v below linger + request timeout (%v)", c.deliveryTimeout, c.linger+requestTimeout)
	case c.txnTimeout < time.Millisecond || c.txnTimeout > math.MaxInt32*time.Millisecond:
		return bad("transaction timeout %v out of range (1 ms to %v)", c.txnTimeout, math.MaxInt32*time.Millisecond)
	}
	return nil
}

// Acknowledgements sets acks (default AcksAll). AcksLeader and AcksNone
// require DisableIdempotence: a contradiction is a construction error, not
// a silent downgrade.
func Acknowledgements(a Acks) ProducerOption { return func(c *producerConfig) { c.acks = a } }

// DisableIdempotence turns off idempotent produce (on by default, KIP-679).
// Without it, retries may duplicate or reorder records.
func DisableIdempotence() ProducerOption { return func(c *producerConfig) { c.idempotent = false } }

// Linger is how long a partition's batch may wait for more records before
// it is sent (default 5 ms, as Kafka 4.0). Synchronous produce does not
// wait for linger.
func Linger(d time.Duration) ProducerOption { return func(c *producerConfig) { c.linger = d } }

// MaxBatchBytes caps a batch's encoded size before compression (default
// 1 MiB). It is lowered to the topic's max.message.bytes when that is
// smaller. A record that cannot fit alone fails with ErrRecordTooLarge.
func MaxBatchBytes(n int) ProducerOption { return func(c *producerConfig) { c.maxBatchBytes = n } }

// MaxBufferedBytes caps the memory the producer holds for records
// produced but not yet acknowledged (default 32 MiB, as Java's
// buffer.memory). When full, Produce blocks until there is room or its
// context ends (see FailFast).
//
// A record counts what the producer keeps for it until its callback: its
// key, value and headers (the Record stays reachable until then), their
// encoding in a batch, and about 200 bytes for the Record and its queue
// entry. So a record of 100 value bytes counts about 400, and the default
// buffers about 83,000 of them; a 1 MiB value counts about 2 MiB. (Java
// serializes a record at send and lets the object go, so its buffer holds
// only the encoding.) A record larger than the whole buffer is admitted
// when nothing else is buffered. It may not be below MaxBatchBytes; since
// a batch's records count about twice its size, a buffer under twice
// MaxBatchBytes never fills a batch (linger seals them).
//
// The buffer only needs to cover what the brokers take in one round trip
// and what lingers: a producer that outruns its brokers keeps it full, and
// a deeper buffer then adds no throughput, only live memory for the
// garbage collector.
func MaxBufferedBytes(n int64) ProducerOption {
	return func(c *producerConfig) { c.maxBufferedBytes = n }
}

// MaxBufferedRecords caps records produced but not yet acknowledged
// (default 1,048,576).
func MaxBufferedRecords(n int64) ProducerOption {
	return func(c *producerConfig) { c.maxBufferedRecords = n }
}

// FailFast makes Produce fail with ErrBufferFull instead of blocking when
// the buffer is full.
func FailFast() ProducerOption { return func(c *producerConfig) { c.failFast = true } }

// WithCompression sets the batch codec (default none).
func WithCompression(codec Compression) ProducerOption {
	return func(c *producerConfig) { c.compression = codec }
}

// WithPartitioner sets the partitioner (default DefaultPartitioner).
func WithPartitioner(p Partitioner) ProducerOption {
	return func(c *producerConfig) { c.partitioner = p }
}

// DeliveryTimeout bounds the time from Produce to a record's outcome
// (default 120 s, as Java's delivery.timeout.ms). It fails a record only
// when that cannot cause a gap or a duplicate: a record whose request may
// have been written waits for the outcome.
func DeliveryTimeout(d time.Duration) ProducerOption {
	return func(c *producerConfig) { c.deliveryTimeout = d }
}

// UnknownTopicTimeout is how long a record's first use of a topic waits
// for the topic to appear in the metadata; the default is the client's
// UnknownTopicWait (5 s unless set), so this is only needed for a
// producer that should wait longer or shorter than the client's other
// lookups. While refreshes answer UNKNOWN_TOPIC_OR_PARTITION or
// LEADER_NOT_AVAILABLE for the topic, the producer refreshes again,
// spaced by the retry backoff (100 ms doubling to 1 s by default) and
// MetadataMinAge; after d the record fails with ErrUnknownTopic, whose
// message names the topic, the time waited and the brokers' last answer.
// 0 fails at the first such answer. Produce's context bounds the wait
// too. See UnknownTopicWait for why the wait is there.
func UnknownTopicTimeout(d time.Duration) ProducerOption {
	return func(c *producerConfig) { c.unknownTopicWait, c.unknownTopicSet = d, true }
}

// MaxInflightPerPartition caps produce requests in flight per partition
// (default 5, the most idempotence allows).
func MaxInflightPerPartition(n int) ProducerOption {
	return func(c *producerConfig) { c.maxInflight = n }
}

// ProduceRequestTimeout is the time the broker may wait for replicas before
// answering a produce request (default 30 s).
func ProduceRequestTimeout(d time.Duration) ProducerOption {
	return func(c *producerConfig) { c.produceTimeout = d }
}

// StopOnDataLoss makes the producer fail every later record with the
// data-loss error once data loss was detected, instead of continuing with
// a fresh epoch (the default).
func StopOnDataLoss() ProducerOption { return func(c *producerConfig) { c.stopOnDataLoss = true } }

// WithProducerHooks adds producer hooks (DataLossHook, BatchWrittenHook,
// ProduceBatchHook, CommitHook). The client's ProduceBatchHooks and
// CommitHooks (WithHooks) apply to every producer already. A producer's
// CommitHooks see the offsets its transactions commit (CommitEvent's
// Transactional).
func WithProducerHooks(hooks ...ProducerHook) ProducerOption {
	return func(c *producerConfig) { c.hooks = append(c.hooks, hooks...) }
}

// TransactionalID makes the producer transactional (Java's
// transactional.id): its records are written in transactions that
// read_committed consumers see whole or not at all, together with the
// consumer offsets sent with SendOffsetsToTransaction. A transactional
// producer is idempotent with acks=all (combining it with
// DisableIdempotence or another Acknowledgements is a configuration
// error); InitTransactions must run before the first transaction, and
// every record must be produced between BeginTransaction and
// CommitTransaction or AbortTransaction.
//
// The id names the producer across restarts: InitTransactions fences any
// earlier producer with the same id (its later writes fail with
// ErrProducerFenced) and aborts its open transaction. Give each
// independent producer its own id; since KIP-447 one transactional
// producer per process serves every partition of a consumer group, its
// offsets fenced by the group's generation (see GroupMetadata).
func TransactionalID(id string) ProducerOption {
	return func(c *producerConfig) { c.transactionalID = id }
}

// TransactionTimeout is how long a transaction may stay open before the
// transaction coordinator aborts it (Java's transaction.timeout.ms, default
// 60 s). It must not exceed the brokers' transaction.max.timeout.ms
// (15 minutes by default): InitTransactions then fails fatally with
// INVALID_TRANSACTION_TIMEOUT. A transaction aborted by the coordinator
// fails the producer's next operation fatally (see CommitTransaction).
// Without TransactionalID it has no effect.
func TransactionTimeout(d time.Duration) ProducerOption {
	return func(c *producerConfig) { c.txnTimeout = d }
}

// ProducerHook is any value implementing DataLossHook, BatchWrittenHook,
// ProduceBatchHook and/or CommitHook. Hooks run on producer goroutines
// (CommitHooks on the goroutine calling CommitTransaction) and must not
// block.
type ProducerHook any

// DataLossHook is told when the broker's sequence checks prove or cannot
// rule out that records were lost (OUT_OF_ORDER_SEQUENCE_NUMBER or
// UNKNOWN_PRODUCER_ID without log truncation). The affected records fail
// with ErrDataLoss.
type DataLossHook interface {
	OnDataLoss(topic string, partition int32, err error)
}

// BatchWrittenHook is told about every batch the broker acknowledged.
type BatchWrittenHook interface {
	OnBatchWritten(b BrokerInfo, topic string, partition int32, records int, bytes int)
}
