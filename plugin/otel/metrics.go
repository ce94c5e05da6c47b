package otel

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riffle-go/riffle"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// Metrics records Riffle's hooks as OTel instruments (see the package
// documentation for their names). It implements riffle.ProduceBatchHook,
// riffle.FetchBatchHook, riffle.PartitionHook, riffle.RebalanceHook,
// riffle.CommitHook and the Broker* hooks: pass it to riffle.WithHooks.
// Its methods are safe for concurrent use.
type Metrics struct {
	cfg config
	ctx context.Context

	sent, consumed, sentBytes, consumedBytes metric.Int64Counter
	batchSize, fetchSize                     metric.Int64Histogram
	compression, latency                     metric.Float64Histogram
	rebalances, commits, requests, errs      metric.Int64Counter
	txnCommits                               metric.Int64Counter
	rebalanceLatency, commitLatency, reqLat  metric.Float64Histogram
	bufAvail, lag, stopped                   metric.Int64ObservableGauge
	reg                                      metric.Registration

	mu        sync.RWMutex
	attrs     map[riffle.TopicPartition]*tpAttrs
	producers map[*riffle.Producer]struct{}
	// The consumers' partitions, from their first lag to their
	// PartitionRemoved, and the stopped ones.
	lags          map[groupPartition]*lagEntry
	stoppedParts  map[groupPartition]struct{}
	stoppedAttrs  map[groupPartition]metric.ObserveOption // per series (topic or partition)
	groupPartAttr map[groupPartition]metric.ObserveOption
}

// groupPartition is a partition of a consumer group ("" for a consumer
// without one).
type groupPartition struct {
	group string
	riffle.TopicPartition
}

// lagEntry is a partition's last lag and the attributes it is observed
// with.
type lagEntry struct {
	lag   atomic.Int64 // set under mu.RLock too
	attrs metric.ObserveOption
}

// tpAttrs are the attribute sets of a topic (or topic-partition), built
// once: recording with them allocates nothing.
type tpAttrs struct {
	ok, failed metric.MeasurementOption
}

// NewMetrics creates the instruments on the meter provider
// (WithMeterProvider, default the global one).
func NewMetrics(opts ...Option) (*Metrics, error) {
	cfg := newConfig(opts)
	meter := cfg.mp.Meter(ScopeName)
	m := &Metrics{cfg: cfg, ctx: context.Background(), attrs: map[riffle.TopicPartition]*tpAttrs{}, producers: map[*riffle.Producer]struct{}{},
		lags: map[groupPartition]*lagEntry{}, stoppedParts: map[groupPartition]struct{}{},
		stoppedAttrs: map[groupPartition]metric.ObserveOption{}, groupPartAttr: map[groupPartition]metric.ObserveOption{}}
	var err error
	ic := func(name, unit, desc string) metric.Int64Counter {
		if err != nil {
			return nil
		}
		var c metric.Int64Counter
		c, err = meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		return c
	}
	ih := func(name, unit, desc string) metric.Int64Histogram {
		if err != nil {
			return nil
		}
		var h metric.Int64Histogram
		h, err = meter.Int64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc))
		return h
	}
	fh := func(name, unit, desc string) metric.Float64Histogram {
		if err != nil {
			return nil
		}
		var h metric.Float64Histogram
		h, err = meter.Float64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc))
		return h
	}
	m.sent = ic("messaging.client.sent.messages", "{message}", "Records the producer sent: acknowledged, or failed (error.type).")
	m.consumed = ic("messaging.client.consumed.messages", "{message}", "Records fetched for the consumer's handler.")
	m.sentBytes = ic("riffle.producer.byte_total", "By", "Bytes of acknowledged batches, compressed (Java byte-total).")
	m.consumedBytes = ic("riffle.consumer.bytes_consumed_total", "By", "Bytes of fetched batches, as fetched (Java bytes-consumed-total).")
	m.batchSize = ih("riffle.producer.batch.size", "By", "Size of each sent batch, compressed (Java batch-size-avg).")
	m.fetchSize = ih("riffle.consumer.fetch.size", "By", "Size of each fetch response (Java fetch-size-avg).")
	m.compression = fh("riffle.producer.compression.rate", "1", "Compressed / uncompressed size of each batch (Java compression-rate-avg).")
	m.latency = fh("riffle.producer.record.latency", "s", "From a batch's first record buffered to the batch's outcome.")
	m.rebalances = ic("riffle.consumer.rebalance.total", "{rebalance}", "Rebalances, completed or failed (error.type) (Java rebalance-total).")
	m.rebalanceLatency = fh("riffle.consumer.rebalance.latency", "s", "Duration of each rebalance (Java rebalance-latency-avg).")
	m.commits = ic("riffle.consumer.commit.total", "{commit}", "Offset commits (Java commit-total).")
	m.commitLatency = fh("riffle.consumer.commit.latency", "s", "Duration of each offset commit (Java commit-latency-avg).")
	m.txnCommits = ic("riffle.consumer.transactional_commit.total", "{commit}", "Committed transactions that carried offsets of the group (not in riffle.consumer.commit.total).")
	m.requests = ic("riffle.request.total", "{request}", "Requests answered or failed, by API (Java request-total).")
	m.reqLat = fh("riffle.request.latency", "s", "Request latency, by API (Java request-latency-avg).")
	m.errs = ic("riffle.errors", "{error}", "Errors by source (riffle.error.source) and class (error.type, riffle.ErrorClass).")
	if err != nil {
		return nil, err
	}
	m.lag, err = meter.Int64ObservableGauge("riffle.consumer.records.lag", metric.WithUnit("{record}"),
		metric.WithDescription("High watermark (last stable offset with read_committed) minus the consumer's position, per partition the consumer has (Java records-lag)."))
	if err != nil {
		return nil, err
	}
	m.stopped, err = meter.Int64ObservableGauge("riffle.consumer.partitions.stopped", metric.WithUnit("{partition}"),
		metric.WithDescription("Partitions of the consumer stopped by an error, until resumed or removed."))
	if err != nil {
		return nil, err
	}
	m.bufAvail, err = meter.Int64ObservableGauge("riffle.producer.buffer.available", metric.WithUnit("By"),
		metric.WithDescription("Buffer room of the watched producers not used by records waiting for their outcome (Java buffer-available-bytes)."))
	if err != nil {
		return nil, err
	}
	m.reg, err = meter.RegisterCallback(m.observe, m.bufAvail, m.lag, m.stopped)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Close unregisters the observable instruments' callback.
func (m *Metrics) Close() error { return m.reg.Unregister() }

func (m *Metrics) observe(_ context.Context, o metric.Observer) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, e := range m.lags {
		o.ObserveInt64(m.lag, e.lag.Load(), e.attrs)
	}
	stopped := map[groupPartition]int64{}
	for gp := range m.stoppedParts {
		stopped[m.stoppedKey(gp)]++
	}
	for k, n := range stopped {
		o.ObserveInt64(m.stopped, n, m.stoppedAttrs[k])
	}
	if len(m.producers) == 0 {
		return nil
	}
	var avail int64
	for p := range m.producers {
		st := p.Stats()
		avail += st.MaxBufferedBytes - st.BufferedBytes
	}
	o.ObserveInt64(m.bufAvail, avail, m.clientOpt())
	return nil
}

func (m *Metrics) clientOpt() metric.MeasurementOption {
	if m.cfg.clientID == "" {
		return metric.WithAttributes(semconv.MessagingSystemKafka)
	}
	return metric.WithAttributes(semconv.MessagingSystemKafka, semconv.MessagingClientID(m.cfg.clientID))
}

// WatchProducer adds p's buffer to riffle.producer.buffer.available until
// the returned function is called.
func (m *Metrics) WatchProducer(p *riffle.Producer) (unwatch func()) {
	m.mu.Lock()
	m.producers[p] = struct{}{}
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		delete(m.producers, p)
		m.mu.Unlock()
	}
}

// attrsFor returns the attribute sets of a topic-partition.
func (m *Metrics) attrsFor(topic string, partition int32) *tpAttrs {
	key := riffle.TopicPartition{Topic: topic, Partition: partition}
	m.mu.RLock()
	a := m.attrs[key]
	m.mu.RUnlock()
	if a != nil {
		return a
	}
	base := []attribute.KeyValue{semconv.MessagingSystemKafka, semconv.MessagingDestinationName(topic)}
	if m.cfg.clientID != "" {
		base = append(base, semconv.MessagingClientID(m.cfg.clientID))
	}
	withPart := append(base[:len(base):len(base)], semconv.MessagingDestinationPartitionID(strconv.Itoa(int(partition))))
	series := base
	if m.cfg.partitions {
		series = withPart
	}
	a = &tpAttrs{
		ok:     metric.WithAttributeSet(attribute.NewSet(series...)),
		failed: metric.WithAttributeSet(attribute.NewSet(append(series[:len(series):len(series)], semconv.ErrorTypeOther)...)),
	}
	m.mu.Lock()
	if cur := m.attrs[key]; cur != nil {
		a = cur
	} else {
		m.attrs[key] = a
	}
	m.mu.Unlock()
	return a
}

func (m *Metrics) countError(source string, err error) {
	m.errs.Add(m.ctx, 1, metric.WithAttributes(attribute.String("riffle.error.source", source),
		semconv.ErrorTypeKey.String(riffle.ErrorClass(err))))
}

// OnProduceBatch implements riffle.ProduceBatchHook.
func (m *Metrics) OnProduceBatch(e riffle.ProduceBatchEvent) {
	a := m.attrsFor(e.Topic, e.Partition)
	if e.Err != nil {
		// error.type is "_OTHER" in the per-topic series (bounded);
		// riffle.errors has the class.
		m.sent.Add(m.ctx, int64(e.Records), a.failed)
		m.countError("produce", e.Err)
	} else {
		m.sent.Add(m.ctx, int64(e.Records), a.ok)
		m.sentBytes.Add(m.ctx, int64(e.CompressedBytes), a.ok)
	}
	if e.CompressedBytes > 0 {
		m.batchSize.Record(m.ctx, int64(e.CompressedBytes), a.ok)
		if e.UncompressedBytes > 0 {
			m.compression.Record(m.ctx, float64(e.CompressedBytes)/float64(e.UncompressedBytes), a.ok)
		}
	}
	if !e.Unbatched { // a record failed before a batch: no request to time
		m.latency.Record(m.ctx, e.Latency.Seconds(), a.ok)
	}
}

// OnFetchBatch implements riffle.FetchBatchHook.
func (m *Metrics) OnFetchBatch(e riffle.FetchBatchEvent) {
	a := m.attrsFor(e.Topic, e.Partition)
	if e.Records > 0 {
		m.consumed.Add(m.ctx, int64(e.Records), a.ok)
		m.consumedBytes.Add(m.ctx, int64(e.Bytes), a.ok)
	}
	if e.Lag >= 0 {
		gp := groupPartition{e.Group, riffle.TopicPartition{Topic: e.Topic, Partition: e.Partition}}
		m.mu.RLock()
		le := m.lags[gp]
		if le != nil {
			le.lag.Store(e.Lag) // observe reads it under mu.RLock
		}
		m.mu.RUnlock()
		if le == nil {
			m.mu.Lock()
			if le = m.lags[gp]; le == nil {
				le = &lagEntry{attrs: m.groupAttrsLocked(gp, true)}
				m.lags[gp] = le
			}
			le.lag.Store(e.Lag)
			m.mu.Unlock()
		}
	}
	if e.Err != nil {
		m.countError("fetch", e.Err)
	}
}

// groupAttrsLocked returns the attributes of a group's partition (with
// its partition id, or its topic's only unless withPartition or
// PartitionAttributes); m.mu must be held for writing.
func (m *Metrics) groupAttrsLocked(gp groupPartition, withPartition bool) metric.ObserveOption {
	if !withPartition && !m.cfg.partitions {
		gp.Partition = -1
	}
	if a, ok := m.groupPartAttr[gp]; ok {
		return a
	}
	kv := []attribute.KeyValue{semconv.MessagingSystemKafka, semconv.MessagingDestinationName(gp.Topic)}
	if gp.Partition >= 0 {
		kv = append(kv, semconv.MessagingDestinationPartitionID(strconv.Itoa(int(gp.Partition))))
	}
	if m.cfg.clientID != "" {
		kv = append(kv, semconv.MessagingClientID(m.cfg.clientID))
	}
	if gp.group != "" {
		kv = append(kv, semconv.MessagingConsumerGroupName(gp.group))
	}
	a := metric.WithAttributeSet(attribute.NewSet(kv...))
	m.groupPartAttr[gp] = a
	return a
}

// stoppedKey is the series of riffle.consumer.partitions.stopped a
// partition counts in: its topic's, or its own with PartitionAttributes.
func (m *Metrics) stoppedKey(gp groupPartition) groupPartition {
	if !m.cfg.partitions {
		gp.Partition = -1
	}
	return gp
}

// OnPartition implements riffle.PartitionHook: a stopped partition counts
// in riffle.consumer.partitions.stopped and riffle.errors (source handler
// or partition_stopped); a removed one leaves the lag and stopped gauges.
func (m *Metrics) OnPartition(e riffle.PartitionEvent) {
	gp := groupPartition{e.Group, riffle.TopicPartition{Topic: e.Topic, Partition: e.Partition}}
	switch e.Kind {
	case riffle.PartitionStopped:
		source := "partition_stopped"
		if e.Handler {
			source = "handler"
		}
		m.countError(source, e.Err)
		m.mu.Lock()
		m.stoppedParts[gp] = struct{}{}
		k := m.stoppedKey(gp)
		if _, ok := m.stoppedAttrs[k]; !ok {
			m.stoppedAttrs[k] = m.groupAttrsLocked(gp, false)
		}
		m.mu.Unlock()
	case riffle.PartitionResumed:
		m.mu.Lock()
		delete(m.stoppedParts, gp)
		m.mu.Unlock()
	case riffle.PartitionRemoved:
		m.mu.Lock()
		delete(m.lags, gp)
		delete(m.stoppedParts, gp)
		m.mu.Unlock()
	}
}

// OnRebalance implements riffle.RebalanceHook.
func (m *Metrics) OnRebalance(e riffle.RebalanceEvent) {
	attrs := []attribute.KeyValue{semconv.MessagingSystemKafka, semconv.MessagingConsumerGroupName(e.Group), attribute.String("riffle.rebalance.protocol", e.Protocol)}
	if e.Err != nil {
		m.countError("rebalance", e.Err)
		attrs = append(attrs, semconv.ErrorTypeKey.String(riffle.ErrorClass(e.Err)))
	}
	m.rebalances.Add(m.ctx, 1, metric.WithAttributes(attrs...))
	m.rebalanceLatency.Record(m.ctx, e.Duration.Seconds(), metric.WithAttributes(attrs...))
}

// OnCommit implements riffle.CommitHook: a transactional commit counts
// in riffle.consumer.transactional_commit.total only (its latency is
// CommitTransaction's, not an OffsetCommit's).
func (m *Metrics) OnCommit(e riffle.CommitEvent) {
	attrs := metric.WithAttributes(semconv.MessagingSystemKafka, semconv.MessagingConsumerGroupName(e.Group))
	if e.Transactional {
		m.txnCommits.Add(m.ctx, 1, attrs)
		return
	}
	m.commits.Add(m.ctx, 1, attrs)
	m.commitLatency.Record(m.ctx, e.Latency.Seconds(), attrs)
	if e.Err != nil {
		m.countError("commit", e.Err)
	}
}

// OnBrokerRequest implements riffle.BrokerRequestHook.
func (m *Metrics) OnBrokerRequest(_ riffle.BrokerInfo, e riffle.RequestEvent) {
	attrs := metric.WithAttributes(semconv.MessagingSystemKafka, attribute.String("riffle.api", e.APIName))
	m.requests.Add(m.ctx, 1, attrs)
	m.reqLat.Record(m.ctx, e.Latency.Seconds(), attrs)
	if e.Err != nil {
		m.countError("request", e.Err)
	} else if e.APIKey == 1 { // Fetch
		m.fetchSize.Record(m.ctx, int64(e.BytesRead), m.clientOpt())
	}
}

// OnBrokerConnect implements riffle.BrokerConnectHook: failed dials count
// in riffle.errors (source "connect").
func (m *Metrics) OnBrokerConnect(_ riffle.BrokerInfo, _ time.Duration, err error) {
	if err != nil {
		m.countError("connect", err)
	}
}
