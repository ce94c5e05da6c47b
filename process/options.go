package process

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/track"
)

// Mode is the ordering a Processor keeps within a partition.
type Mode int8

// ByKey: records with the same key never run concurrently and run in
// offset order; different keys run in parallel. Records without a key
// (nil Key) share one queue per partition: they run one at a time, in
// offset order. An empty non-nil key is a key like any other.
const ByKey Mode = 0

// ByPartition: one record at a time per partition, in offset order
// (the plain consumer's behaviour).
const ByPartition Mode = 1

// Unordered: any record may run at any time.
const Unordered Mode = 2

// String returns the mode's name.
func (m Mode) String() string {
	switch m {
	case ByKey:
		return "key"
	case ByPartition:
		return "partition"
	case Unordered:
		return "unordered"
	}
	return fmt.Sprintf("Mode(%d)", int8(m))
}

// MetadataPolicy says what to do when the commit metadata of an assigned
// partition is in the processor's format but corrupt (bad checksum,
// malformed body, written for another committed offset). Metadata that is
// not in the processor's format at all (another client's, for example
// franz-go's member id, or a plain string) is not a finished-offset map:
// the processor logs it at Debug and resumes at the committed offset under
// either policy, reporting nothing.
type MetadataPolicy int8

// IgnoreBadMetadata reports corrupt metadata (OnError, ErrBadMetadata) and
// processes everything from the committed offset: some records may run
// again, none is skipped.
const IgnoreBadMetadata MetadataPolicy = 0

// FailBadMetadata reports corrupt metadata and stops the partition before
// processing anything, until it is reassigned; nothing is committed
// for it, so the metadata stays as it was.
const FailBadMetadata MetadataPolicy = 1

// Errors of the processor.
var (
	// ErrBadMetadata: an assigned partition's commit metadata is in the
	// processor's format but corrupt (metadata in another format is
	// ignored, see MetadataPolicy).
	ErrBadMetadata = errors.New("riffle/process: unreadable commit metadata")
	// ErrHandlerPanic wraps a handler panic: the record failed.
	ErrHandlerPanic = errors.New("riffle/process: handler panicked")
	// ErrProcessorClosed: the call was made after Close. It matches
	// riffle.ErrClosed.
	ErrProcessorClosed = errs.NewClosed("riffle/process: processor closed")
)

// Handler processes one record. ctx is cancelled when the record's
// partition is lost, or when Close's deadline passes. Returning an error
// fails the attempt (see RetryPolicy); a panic is an error too.
type Handler func(ctx context.Context, r *riffle.Record) error

// DeadLetterFunc receives a record whose last attempt failed with cause.
// Returning nil counts the record as finished (its offset can then be
// committed); returning an error stops the partition at that record.
type DeadLetterFunc func(ctx context.Context, r *riffle.Record, cause error, attempts int) error

// RetryPolicy is how a failing record is retried.
type RetryPolicy struct {
	// Attempts is the total number of handler calls per record (1: no
	// retry). Zero means 1.
	Attempts int
	// Backoff is the delay before the second attempt; it doubles per
	// attempt up to MaxBackoff, and each delay d is drawn uniformly from
	// [d/2, d] (equal jitter). Zero means 100 ms.
	Backoff time.Duration
	// MaxBackoff caps the delay. Zero means 10 s.
	MaxBackoff time.Duration
	// RetryIf says whether an error is worth another attempt; nil retries
	// every error.
	RetryIf func(error) bool
}

// RecordError reports a record whose processing failed for good (after its
// attempts and, if set, a failing dead-letter function): its partition
// stops at it. Records older than it still run (and may fail too: each is
// reported, and the partition stops at the lowest).
type RecordError struct {
	Topic     string
	Partition int32
	Offset    int64
	Attempts  int
	Err       error
}

// Error describes the failure.
func (e *RecordError) Error() string {
	return fmt.Sprintf("riffle/process: %s[%d]@%d failed after %d attempt(s): %v", e.Topic, e.Partition, e.Offset, e.Attempts, e.Err)
}

// Unwrap returns the cause.
func (e *RecordError) Unwrap() error { return e.Err }

// Hooks observe the processor, for metrics. Each may be nil; they run on
// the processor's goroutines and must not block.
type Hooks struct {
	// OnFinish: a record finished (err nil), or failed for good.
	OnFinish func(tp riffle.TopicPartition, offset int64, attempts int, took time.Duration, err error)
	// OnRetry: an attempt failed and the record will be retried.
	OnRetry func(tp riffle.TopicPartition, offset int64, attempt int, err error)
	// OnDeadLetter: a record was handed to the dead-letter function,
	// which returned err.
	OnDeadLetter func(tp riffle.TopicPartition, offset int64, err error)
}

// Option configures a Processor.
type Option func(*config)

type config struct {
	mode        Mode
	modeSet     bool // Ordering was given (NewShare takes Unordered only)
	shareLimit  int
	concurrency int
	partLimit   int
	window      int
	maxBytes    int64
	metaLimit   int
	metaPolicy  MetadataPolicy
	retry       RetryPolicy
	deadLetter  DeadLetterFunc
	onError     func(error)
	hooks       Hooks
	consumer    []riffle.ConsumerOption
	eos         *eosConfig
}

func defaultConfig() config {
	return config{
		mode: ByKey, concurrency: 64, maxBytes: 64 << 20, metaLimit: track.DefaultMetadataLimit,
	}
}

func (c *config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: process: "+format, append([]any{riffle.ErrInvalidConfig}, args...)...)
	}
	switch {
	case c.mode < ByKey || c.mode > Unordered:
		return bad("unknown mode %d", c.mode)
	case c.concurrency < 1:
		return bad("concurrency must be positive")
	case c.partLimit < 0:
		return bad("negative partition concurrency")
	case c.window < 0:
		return bad("negative window")
	case c.maxBytes < 1:
		return bad("byte budget must be positive")
	case c.metaLimit < 64:
		return bad("metadata limit %d below 64 bytes", c.metaLimit)
	case c.retry.Attempts < 0 || c.retry.Backoff < 0 || c.retry.MaxBackoff < 0:
		return bad("negative retry setting")
	}
	if c.eos != nil {
		if err := c.eos.validate(); err != nil {
			return err
		}
	}
	if c.window == 0 {
		c.window = max(1024, 2*c.concurrency)
	}
	if c.retry.Attempts == 0 {
		c.retry.Attempts = 1
	}
	if c.retry.Backoff == 0 {
		c.retry.Backoff = 100 * time.Millisecond
	}
	if c.retry.MaxBackoff == 0 {
		c.retry.MaxBackoff = 10 * time.Second
	}
	return nil
}

// Ordering sets the ordering mode (default ByKey).
func Ordering(m Mode) Option { return func(c *config) { c.mode, c.modeSet = m, true } }

// Concurrency caps the records running at once across all partitions
// (default 64). Throughput of I/O-bound handlers is about concurrency /
// latency, independent of the partition count.
func Concurrency(n int) Option { return func(c *config) { c.concurrency = n } }

// PartitionConcurrency caps the records running at once per partition
// (default 0: only Concurrency applies).
func PartitionConcurrency(n int) Option { return func(c *config) { c.partLimit = n } }

// Window caps the records a partition holds that did not finish (queued or
// running; default max(1024, 2×Concurrency)). When full, the partition's
// fetching pauses until records finish; other partitions keep flowing.
func Window(n int) Option { return func(c *config) { c.window = n } }

// MaxBytes caps the bytes of records held across partitions, queued or
// running (default 64 MiB). When full, partitions stop taking records (and
// so fetching) until records finish. A record larger than the budget is
// still taken when nothing else is held.
func MaxBytes(n int64) Option { return func(c *config) { c.maxBytes = n } }

// MetadataLimit is the broker's offset.metadata.max.bytes (default 4096):
// the commit metadata that lists records finished above the committed
// offset never exceeds it. Near the limit a partition only starts records
// that keep the encoding within it.
func MetadataLimit(n int) Option { return func(c *config) { c.metaLimit = n } }

// OnBadMetadata sets the policy for commit metadata in the processor's
// format that does not decode (default IgnoreBadMetadata); other clients'
// metadata is ignored under either policy.
func OnBadMetadata(p MetadataPolicy) Option { return func(c *config) { c.metaPolicy = p } }

// Retry sets the retry policy of failing records (default: no retry).
func Retry(p RetryPolicy) Option { return func(c *config) { c.retry = p } }

// DeadLetter hands records whose last attempt failed to fn (see
// DeadLetterTopic) instead of stopping their partition.
func DeadLetter(fn DeadLetterFunc) Option { return func(c *config) { c.deadLetter = fn } }

// OnError receives partition errors: *RecordError for a record that failed
// for good, and ErrBadMetadata.
func OnError(fn func(error)) Option { return func(c *config) { c.onError = fn } }

// WithHooks sets metric hooks.
func WithHooks(h Hooks) Option { return func(c *config) { c.hooks = h } }

// ConsumerOptions configures the underlying consumer: its group
// (riffle.ConsumerGroup, riffle.SubscribeTopics, balancers, timeouts),
// fetch sizes and reset policy. Handler options are not allowed: the
// processor is the handler.
func ConsumerOptions(opts ...riffle.ConsumerOption) Option {
	return func(c *config) { c.consumer = append(c.consumer, opts...) }
}
