package riffle

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Hook is a metrics hook: any value implementing one or more of the Broker*
// hook interfaces. Hooks run on the client's connection goroutines, so
// they must be fast and must not block.
type Hook any

// BrokerInfo identifies a broker in hook calls. NodeID is -1 for a seed
// address not yet matched to a node.
type BrokerInfo struct {
	NodeID int32
	Addr   string
}

// BrokerConnectHook is called after every connection attempt.
type BrokerConnectHook interface {
	OnBrokerConnect(b BrokerInfo, dialTime time.Duration, err error)
}

// BrokerDisconnectHook is called when a connection closes, with the reason.
type BrokerDisconnectHook interface {
	OnBrokerDisconnect(b BrokerInfo, err error)
}

// RequestEvent describes one request/response exchange.
type RequestEvent struct {
	APIKey       int16
	APIName      string
	BytesWritten int
	BytesRead    int
	Latency      time.Duration
	Err          error
}

// BrokerRequestHook is called for every request when its response arrives
// or it fails.
type BrokerRequestHook interface {
	OnBrokerRequest(b BrokerInfo, e RequestEvent)
}

// BrokerThrottleHook is called when a broker says it throttled the client.
// The client waits out the throttle before sending more on that connection
// (KIP-219).
type BrokerThrottleHook interface {
	OnBrokerThrottle(b BrokerInfo, throttle time.Duration)
}

// hookObserver fans connection events out to the user's hooks.
type hookObserver struct {
	connect    []BrokerConnectHook
	disconnect []BrokerDisconnectHook
	request    []BrokerRequestHook
	throttle   []BrokerThrottleHook
}

func newHookObserver(hooks []Hook) *hookObserver {
	o := &hookObserver{
		connect:    hooksOf[BrokerConnectHook](hooks),
		disconnect: hooksOf[BrokerDisconnectHook](hooks),
		request:    hooksOf[BrokerRequestHook](hooks),
		throttle:   hooksOf[BrokerThrottleHook](hooks),
	}
	if len(o.connect)+len(o.disconnect)+len(o.request)+len(o.throttle) == 0 {
		return nil
	}
	return o
}

func (o *hookObserver) Connected(addr string, node int32, d time.Duration, err error) {
	for _, h := range o.connect {
		h.OnBrokerConnect(BrokerInfo{node, addr}, d, err)
	}
}

func (o *hookObserver) Disconnected(addr string, node int32, err error) {
	for _, h := range o.disconnect {
		h.OnBrokerDisconnect(BrokerInfo{node, addr}, err)
	}
}

func (o *hookObserver) Request(addr string, node int32, key int16, w, r int, lat time.Duration, err error) {
	if len(o.request) == 0 {
		return
	}
	e := RequestEvent{APIKey: key, APIName: kmsg.NameForKey(key), BytesWritten: w, BytesRead: r, Latency: lat, Err: err}
	for _, h := range o.request {
		h.OnBrokerRequest(BrokerInfo{node, addr}, e)
	}
}

func (o *hookObserver) Throttled(addr string, node int32, d time.Duration) {
	for _, h := range o.throttle {
		h.OnBrokerThrottle(BrokerInfo{node, addr}, d)
	}
}

// Data-path hooks. Like the Broker* hooks they are values passed to
// WithHooks (a Producer also takes them through WithProducerHooks), called
// once per batch or event, never per record (except a ProduceBatchEvent
// for a record that fails before it is buffered, Unbatched, which runs on
// the goroutine calling Produce), on the client's goroutines: they must be
// fast and must not block, nor call the methods of a consumer that change
// its partitions (Assign, Unassign, Pause, Resume, Close), which wait for
// the partitions' hook calls in progress. When none is installed each call
// site costs one length check; the events are passed by value and
// allocate nothing, but for CommitEvent's Offsets (one map per commit,
// built only for installed CommitHooks). ErrorClass turns their Err
// fields into bounded labels.

// ProduceBatchEvent describes the outcome of one produced batch.
type ProduceBatchEvent struct {
	Topic     string
	Partition int32
	// Records is the number of records in the batch.
	Records int
	// UncompressedBytes is the batch's encoded size before compression
	// and CompressedBytes its size on the wire (equal without
	// compression); both are 0 for a batch that failed before it was
	// encoded. CompressedBytes / UncompressedBytes is the Java client's
	// compression-rate.
	UncompressedBytes int
	CompressedBytes   int
	// Latency runs from the moment the batch's first record was
	// buffered (Produce) to its outcome: the acknowledgement, or the
	// failure. The batch's other records waited at most that long.
	Latency time.Duration
	// Err is nil when the broker acknowledged the batch, otherwise the
	// error every record of the batch received.
	Err error
	// Unbatched: the records never went out in a batch. Either one record
	// failed before it was buffered (producer or client closed, no topic,
	// too large, no partition, the wait for buffer room ended, a failed
	// partition or transaction: Records is 1, and Partition is -1 when
	// no partition was chosen yet), or a partition's open records failed
	// (or their transaction was aborted) before their batch was sealed.
	// The bytes and Latency are 0: such events are no produce requests,
	// and latency histograms should skip them.
	Unbatched bool
}

// ProduceBatchHook is called once per batch of produced records when its
// outcome is known, before the records' callbacks run, and once per record
// that fails before joining a batch (Unbatched). Every record whose
// callback gets an error is counted in exactly one event with that error.
type ProduceBatchHook interface {
	OnProduceBatch(e ProduceBatchEvent)
}

// FetchBatchEvent describes the records one fetch response brought for one
// partition of a consumer, and the partition's lag after it.
type FetchBatchEvent struct {
	// Group is the consumer's group, "" without one (and for a
	// ShareConsumer's share fetches).
	Group     string
	Topic     string
	Partition int32
	// Node is the broker that answered.
	Node int32
	// Records is the number of records handed to the consumer's buffer
	// (control records and aborted transactions excluded), Bytes the
	// response bytes their batches took (compressed, as on the wire), and
	// UncompressedBytes the size of the records (keys, values, headers).
	Records           int
	Bytes             int
	UncompressedBytes int64
	// HighWatermark is the partition's high watermark as last known: from
	// this response, or from an earlier one when this one left it out or
	// had none (an error), -1 if unknown. Lag is the Java client's
	// records-lag: the high watermark (the last stable offset with
	// ReadCommitted) minus the consumer's position, the next record to
	// hand to the handler; records fetched and not yet handled count. -1
	// when unknown.
	HighWatermark int64
	Lag           int64
	// Refreshed: the event comes from no fetch response but from the
	// consumer's refresh of the end offsets (ListOffsets, about once a
	// second) of a partition that got no fetch response for that long: one
	// stopped by an error, paused, or whose buffer is full. Records and
	// the bytes are 0, Node is the leader that answered, and Lag grows
	// with what is produced meanwhile.
	Refreshed bool
	// Err is the partition's fetch error, if any.
	Err error
}

// FetchBatchHook is called for each partition of each fetch response the
// consumer applies (stale ones, for a partition that moved meanwhile, are
// not reported), after the records are buffered: also for a partition the
// response brought no records for, and for one an incremental fetch
// session (KIP-227) left out of the response because nothing changed on
// the broker (Records 0, the last known HighWatermark, the Lag as of the
// current position). Partitions that get no fetch responses are reported
// by Refreshed events, so Lag always follows the position and the log's
// end; a partition is reported no more once its PartitionRemoved event
// came. With a FetchBatchHook installed the consumer sends those refreshes
// (one ListOffsets per leader of such partitions, two with ReadCommitted);
// without one it does not.
//
// A ShareConsumer's share fetches are reported too, once their records
// are queued for the handlers: Records counts the acquired records
// queued, and HighWatermark and Lag are -1 (a share fetch has neither).
type FetchBatchHook interface {
	OnFetchBatch(e FetchBatchEvent)
}

// PartitionEventKind is what happened to a consumer's partition.
type PartitionEventKind int8

// PartitionAssigned: the partition was assigned (Assign, or by the group);
// it comes before any FetchBatchEvent of the partition.
const PartitionAssigned PartitionEventKind = 1

// PartitionStopped: an error stopped the partition (see PartitionError):
// a handler's error, a corrupt batch, an offset out of range with
// ResetNone, a refused start offset, a log truncation with ResetNone, or,
// with ExactlyOnce, a failed transactional producer. It stays stopped
// until Resume.
const PartitionStopped PartitionEventKind = 2

// PartitionResumed: Resume restarted a stopped partition.
const PartitionResumed PartitionEventKind = 3

// PartitionRemoved: the partition is no longer the consumer's: revoked or
// lost in a rebalance, unassigned, or the consumer closed. No event of the
// partition follows until it is assigned again.
const PartitionRemoved PartitionEventKind = 4

// String returns the kind's name: "assigned", "stopped", "resumed" or
// "removed".
func (k PartitionEventKind) String() string {
	switch k {
	case PartitionAssigned:
		return "assigned"
	case PartitionStopped:
		return "stopped"
	case PartitionResumed:
		return "resumed"
	case PartitionRemoved:
		return "removed"
	}
	return "PartitionEventKind(" + strconv.Itoa(int(k)) + ")"
}

// PartitionEvent describes a change of one of a consumer's partitions: a
// metrics sink keeps per-partition series (lag, stopped partitions) from
// Assigned to Removed, with no call of its own when partitions are revoked.
type PartitionEvent struct {
	// Group is the consumer's group, "" without one.
	Group     string
	Topic     string
	Partition int32
	Kind      PartitionEventKind
	// Err is why the partition stopped (PartitionStopped only): the
	// *PartitionError that OnPartitionError gets.
	Err error
	// Handler (PartitionStopped only): the error is the handler's (it
	// returned it, or panicked).
	Handler bool
}

// PartitionHook is called when one of a consumer's partitions is
// assigned, stopped by an error, resumed, and removed (see
// PartitionEventKind). A partition's events come in that order, one at a
// time, and never after its PartitionRemoved; a partition removed before
// it was reported at all gets no event. ShareConsumers report none.
type PartitionHook interface {
	OnPartition(e PartitionEvent)
}

// RebalanceEvent describes one rebalance of a group member: under the
// classic protocol from JoinGroup to the assignment being applied (revokes
// and callbacks included), under KIP-848 one reconciliation of a new
// target assignment.
type RebalanceEvent struct {
	Group string
	// Protocol is "eager", "cooperative" (classic protocol) or
	// "consumer" (KIP-848).
	Protocol string
	// Generation is the member's generation (member epoch under
	// KIP-848) once the rebalance ended.
	Generation int32
	// Assigned and Revoked count the partitions the rebalance added and
	// took away.
	Assigned, Revoked int
	Duration          time.Duration
	// Err is nil for a rebalance that completed, or why joining failed
	// (the member retries).
	Err error
}

// RebalanceHook is called when a rebalance of a group consumer ends.
type RebalanceHook interface {
	OnRebalance(e RebalanceEvent)
}

// CommitEvent describes one offset commit of a group: an OffsetCommit of a
// group member (retries included), or the offsets a transaction committed
// for the group (Transactional).
type CommitEvent struct {
	Group string
	// Partitions is the number of partitions the commit carried:
	// len(Offsets).
	Partitions int
	// Offsets are the offsets the commit carried, per partition (those
	// it tried when Err is set). The map is made for this event and
	// shared by the hooks it is passed to: a hook may keep it but must
	// not modify it.
	Offsets map[TopicPartition]OffsetAndMetadata
	// Transactional reports offsets committed by a transaction: sent
	// with Producer.SendOffsetsToTransaction (by the application, a
	// consumer's ExactlyOnce or process.ExactlyOnce) and made the
	// group's when CommitTransaction succeeded. The event comes then,
	// once per group of the transaction, with Offsets the offsets the
	// group's coordinator accepted for it; Latency is that
	// CommitTransaction call (flushing the transaction's records
	// included), and Err is always nil. An aborted transaction, or one
	// whose commit failed, reports nothing: its offsets were never
	// committed.
	Transactional bool
	// Latency is the duration of the commit.
	Latency time.Duration
	// Err is nil for a commit that succeeded (for an OffsetCommit, one
	// that failed for some partitions joins their errors).
	Err error
}

// CommitHook is called when an offset commit of a group consumer ends,
// and when a transaction that carried offsets (SendOffsetsToTransaction)
// commits: the hooks of the transactional producer's client (WithHooks)
// and the producer's own (WithProducerHooks) get an event with
// Transactional set.
type CommitHook interface {
	OnCommit(e CommitEvent)
}

// dataHooks are the data-path hooks of a client, sorted by interface.
type dataHooks struct {
	produce   []ProduceBatchHook
	fetch     []FetchBatchHook
	rebalance []RebalanceHook
	commit    []CommitHook
	partition []PartitionHook
}

func newDataHooks(hooks []Hook) dataHooks {
	return dataHooks{
		produce:   hooksOf[ProduceBatchHook](hooks),
		fetch:     hooksOf[FetchBatchHook](hooks),
		rebalance: hooksOf[RebalanceHook](hooks),
		commit:    hooksOf[CommitHook](hooks),
		partition: hooksOf[PartitionHook](hooks),
	}
}

// hooksOf returns the hooks that implement T, in order.
func hooksOf[T, H any](hooks []H) []T {
	var out []T
	for _, h := range hooks {
		if x, ok := any(h).(T); ok {
			out = append(out, x)
		}
	}
	return out
}

// ErrorClass names the class of a client error, for metric labels: a
// bounded set of values. It returns "" for nil; the Kafka error's name
// (e.g. "NOT_LEADER_FOR_PARTITION") for a Kafka error that no client class
// below wraps; otherwise one of "closed", "canceled", "timeout" (a context
// deadline or ErrRequestTimeout), "delivery_timeout", "auth" (the client
// could not authenticate: SASL, TLS), "authorization" (ErrAuthorization:
// the broker refused a missing ACL, any *_AUTHORIZATION_FAILED code),
// "unreachable", "connection" (ErrConnClosed), "malformed",
// "unknown_topic", "buffer_full", "record_too_large", "data_loss",
// "corrupt_batch", "config", "unsupported", or "other".
func ErrorClass(err error) string {
	if err == nil {
		return ""
	}
	classes := [...]struct {
		target error
		name   string
	}{
		{ErrClosed, "closed"},
		{ErrDeliveryTimeout, "delivery_timeout"},
		{ErrDataLoss, "data_loss"},
		{ErrBufferFull, "buffer_full"},
		{ErrRecordTooLarge, "record_too_large"},
		{ErrCorruptBatch, "corrupt_batch"},
		{ErrAuth, "auth"},
		{ErrAuthorization, "authorization"},
		{ErrUnreachable, "unreachable"},
		{ErrConnClosed, "connection"},
		{ErrMalformedResponse, "malformed"},
		{ErrUnknownTopic, "unknown_topic"},
		{ErrInvalidConfig, "config"},
		{ErrUnsupported, "unsupported"},
		{ErrRequestTimeout, "timeout"},
		{context.DeadlineExceeded, "timeout"},
		{context.Canceled, "canceled"},
	}
	for _, c := range classes {
		if errors.Is(err, c.target) {
			return c.name
		}
	}
	var kx *KafkaError
	if errors.As(err, &kx) {
		return kx.Name
	}
	return "other"
}
