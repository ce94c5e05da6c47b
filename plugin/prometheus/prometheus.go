// Package prometheus exports a Riffle client's metrics to Prometheus.
//
// A Metrics is both a set of Riffle hooks and a prometheus.Collector:
// install it on the client with riffle.WithHooks and register it:
//
//	m := rprom.New(rprom.ClientID("example"))
//	reg := prom.NewRegistry()
//	reg.MustRegister(m)
//
//	cl, err := riffle.NewClient(riffle.SeedBrokers(cluster.Addrs()...), riffle.ClientID("example"), riffle.WithHooks(m))
//
// (with rprom this package and prom client_golang's prometheus; in a
// program, serve reg with promhttp.HandlerFor).
//
// # Names
//
// Metric names are the Java client's, in Prometheus form: snake_case, with
// the namespace "riffle" (see Namespace) and the Java metric group as a
// subsystem ("producer", "consumer"; connection metrics have none), so
// Java's producer record-send-total is riffle_producer_record_send_total.
// Java's -rate and -avg metrics are not exported: they are what rate() and
// histograms compute from the totals (record-send-rate is
// rate(riffle_producer_record_send_total[1m]); batch-size-avg is
// riffle_producer_batch_size_bytes_sum / _count). Durations are in
// seconds, sizes in bytes.
//
// Producer (ProduceBatchHook, once per batch; WatchProducer for the buffer):
//
//   - riffle_producer_record_send_total{topic}: records acknowledged (record-send-total)
//   - riffle_producer_record_error_total{topic}: records that failed (record-error-total)
//   - riffle_producer_byte_total{topic}: bytes acknowledged, compressed (byte-total)
//   - riffle_producer_batch_size_bytes{topic}: histogram of batch sizes, compressed (batch-size-avg, -max)
//   - riffle_producer_records_per_batch{topic}: histogram (records-per-request-avg, per batch)
//   - riffle_producer_compression_rate{topic}: histogram of compressed/uncompressed (compression-rate-avg)
//   - riffle_producer_record_latency_seconds{topic}: histogram of a batch's first record buffered → outcome
//   - riffle_producer_buffer_total_bytes: MaxBufferedBytes (buffer-total-bytes)
//   - riffle_producer_buffer_available_bytes: MaxBufferedBytes - buffered (buffer-available-bytes)
//   - riffle_producer_buffered_records: records waiting for their outcome
//
// Consumer (FetchBatchHook, PartitionHook, RebalanceHook, CommitHook):
//
//   - riffle_consumer_records_consumed_total{topic}: records fetched for the handler (records-consumed-total)
//   - riffle_consumer_bytes_consumed_total{topic}: their bytes as fetched (bytes-consumed-total)
//   - riffle_consumer_records_lag{group,topic}: high watermark (last stable offset with read_committed)
//     minus the position, summed over the topic's partitions the consumer has (records-lag); see Lag
//   - riffle_consumer_partitions_stopped{group,topic}: partitions stopped by an error (a handler's, a
//     corrupt batch, an offset out of range with ResetNone...) until Resume or their removal
//   - riffle_consumer_fetch_size_bytes: histogram of fetch response sizes (fetch-size-avg, -max)
//   - riffle_consumer_rebalance_total{group,protocol}: completed rebalances (rebalance-total)
//   - riffle_consumer_failed_rebalance_total{group}: failed joins (failed-rebalance-total)
//   - riffle_consumer_rebalance_latency_seconds{group}: histogram (rebalance-latency-avg, -max)
//   - riffle_consumer_commit_total{group}: offset commits (commit-total)
//   - riffle_consumer_commit_latency_seconds{group}: histogram (commit-latency-avg, -max)
//   - riffle_consumer_transactional_commit_total{group}: transactions that committed offsets of the
//     group (SendOffsetsToTransaction, ExactlyOnce), counted when they commit; the two commit metrics
//     above count OffsetCommit requests only, as Java's do
//
// Connections (the Broker* hooks):
//
//   - riffle_request_total{api}: requests answered or failed (request-total)
//   - riffle_request_latency_seconds{api}: histogram (request-latency-avg, -max)
//   - riffle_outgoing_byte_total, riffle_incoming_byte_total: (outgoing-byte-total, incoming-byte-total)
//   - riffle_connection_creation_total: connections opened (connection-creation-total)
//   - riffle_connection_close_total: connections closed (connection-close-total)
//   - riffle_throttle_time_seconds: histogram of broker throttles (produce-throttle-time-avg)
//
// Errors, all sources:
//
//   - riffle_errors_total{source,class}: source: produce, fetch, rebalance, commit, request, handler (a
//     handler's error, or panic, which stopped its partition), partition_stopped (a partition stopped by
//     any other error); class: riffle.ErrorClass
//
// Every metric carries client_id when ClientID is set. The topic-level
// metrics carry a partition label too with PartitionLabels (off by
// default: a topic of a thousand partitions would make a thousand series
// of each).
//
// # Lag
//
// The lag follows every fetch response, those without records and those
// an incremental fetch session leaves out too, so it drops to 0 once the
// consumer caught up; a partition that is not fetched (stopped by an
// error, paused) has its end refreshed about once a second, so its lag
// grows with what is produced. A partition's series goes when the
// consumer loses the partition (revoked, unassigned, closed): no
// ForgetPartitions needed. group is the consumer's group, "" (no label)
// without one.
package prometheus

import (
	"strconv"
	"sync"
	"time"

	"github.com/riffle-go/riffle"

	prom "github.com/prometheus/client_golang/prometheus"
)

// Option configures a Metrics.
type Option func(*config)

type config struct {
	namespace  string
	clientID   string
	partitions bool
	latency    []float64
	sizes      []float64
}

// Namespace replaces the metric name prefix (default "riffle"; "kafka"
// makes names such as kafka_producer_record_send_total).
func Namespace(ns string) Option { return func(c *config) { c.namespace = ns } }

// ClientID adds the constant label client_id to every metric; give the
// client's riffle.ClientID, to tell clients of one process apart.
func ClientID(id string) Option { return func(c *config) { c.clientID = id } }

// PartitionLabels adds a partition label to the per-topic metrics. It
// multiplies their series by the partition count.
func PartitionLabels() Option { return func(c *config) { c.partitions = true } }

// LatencyBuckets replaces the buckets of the latency histograms, in
// seconds (default 0.5 ms to about 16 s, doubling).
func LatencyBuckets(b ...float64) Option { return func(c *config) { c.latency = b } }

// SizeBuckets replaces the buckets of the size histograms, in bytes
// (default 256 B to 64 MiB, ×4).
func SizeBuckets(b ...float64) Option { return func(c *config) { c.sizes = b } }

// Metrics turns Riffle hooks into Prometheus metrics. It implements
// riffle.ProduceBatchHook, riffle.FetchBatchHook, riffle.PartitionHook,
// riffle.RebalanceHook, riffle.CommitHook and the Broker* hooks, and
// prometheus.Collector. Pass
// it to riffle.WithHooks of one client (or of several clients that share
// one client id) and register it once. Its methods are safe for
// concurrent use.
type Metrics struct {
	cfg        config
	topicLabel []string

	sendRecords, sendErrors, sendBytes        *prom.CounterVec
	batchBytes, batchRecords, compression     *prom.HistogramVec
	produceLatency                            *prom.HistogramVec
	consumedRecords, consumedBytes            *prom.CounterVec
	fetchSize                                 prom.Histogram
	rebalances, failedRebalances, commits     *prom.CounterVec
	txnCommits                                *prom.CounterVec
	rebalanceLatency, commitLatency           *prom.HistogramVec
	requestCount                              *prom.CounterVec
	requestHist                               *prom.HistogramVec
	outBytes, inBytes, connOpened, connClosed prom.Counter
	throttle                                  prom.Histogram
	errors                                    *prom.CounterVec

	lagDesc, stoppedDesc                    *prom.Desc
	bufTotalDesc, bufAvailDesc, bufRecsDesc *prom.Desc

	seriesMu sync.RWMutex
	series   map[riffle.TopicPartition]*series

	mu        sync.Mutex
	lag       map[groupPartition]int64
	stopped   map[groupPartition]struct{}
	producers map[*riffle.Producer]struct{}
}

// groupPartition is a partition of a consumer group ("" for a consumer
// without one).
type groupPartition struct {
	group string
	riffle.TopicPartition
}

// New returns metrics configured by opts, ready to register and install.
func New(opts ...Option) *Metrics {
	cfg := config{
		namespace: "riffle",
		latency:   prom.ExponentialBuckets(0.0005, 2, 16),
		sizes:     prom.ExponentialBuckets(256, 4, 10),
	}
	for _, o := range opts {
		o(&cfg)
	}
	m := &Metrics{cfg: cfg, lag: map[groupPartition]int64{}, stopped: map[groupPartition]struct{}{},
		series: map[riffle.TopicPartition]*series{}, producers: map[*riffle.Producer]struct{}{}}
	var constLabels prom.Labels
	if cfg.clientID != "" {
		constLabels = prom.Labels{"client_id": cfg.clientID}
	}
	m.topicLabel = []string{"topic"}
	if cfg.partitions {
		m.topicLabel = []string{"topic", "partition"}
	}
	ns := cfg.namespace
	counter := func(sub, name, help string, labels ...string) *prom.CounterVec {
		return prom.NewCounterVec(prom.CounterOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help, ConstLabels: constLabels}, labels)
	}
	hist := func(sub, name, help string, buckets []float64, labels ...string) *prom.HistogramVec {
		return prom.NewHistogramVec(prom.HistogramOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help, Buckets: buckets, ConstLabels: constLabels}, labels)
	}
	tl := m.topicLabel
	m.sendRecords = counter("producer", "record_send_total", "Records the brokers acknowledged (Java record-send-total).", tl...)
	m.sendErrors = counter("producer", "record_error_total", "Records that failed (Java record-error-total).", tl...)
	m.sendBytes = counter("producer", "byte_total", "Bytes of acknowledged batches, compressed, as sent (Java byte-total).", tl...)
	m.batchBytes = hist("producer", "batch_size_bytes", "Size of each sent batch, compressed (Java batch-size-avg, batch-size-max).", cfg.sizes, tl...)
	m.batchRecords = hist("producer", "records_per_batch", "Records per batch (Java records-per-request-avg).", prom.ExponentialBuckets(1, 4, 10), tl...)
	m.compression = hist("producer", "compression_rate", "Compressed size / uncompressed size of each batch (Java compression-rate-avg).", prom.LinearBuckets(0.1, 0.1, 10), tl...)
	m.produceLatency = hist("producer", "record_latency_seconds", "From a batch's first record buffered by Produce to the batch's outcome.", cfg.latency, tl...)
	m.consumedRecords = counter("consumer", "records_consumed_total", "Records fetched for the handler (Java records-consumed-total).", tl...)
	m.consumedBytes = counter("consumer", "bytes_consumed_total", "Bytes of the fetched records' batches, as fetched (Java bytes-consumed-total).", tl...)
	m.fetchSize = prom.NewHistogram(prom.HistogramOpts{Namespace: ns, Subsystem: "consumer", Name: "fetch_size_bytes",
		Help: "Size of each fetch response (Java fetch-size-avg, fetch-size-max).", Buckets: cfg.sizes, ConstLabels: constLabels})
	m.rebalances = counter("consumer", "rebalance_total", "Completed rebalances (Java rebalance-total).", "group", "protocol")
	m.failedRebalances = counter("consumer", "failed_rebalance_total", "Failed joins (Java failed-rebalance-total).", "group")
	m.rebalanceLatency = hist("consumer", "rebalance_latency_seconds", "Duration of each rebalance (Java rebalance-latency-avg, -max).", cfg.latency, "group")
	m.commits = counter("consumer", "commit_total", "Offset commits (Java commit-total).", "group")
	m.commitLatency = hist("consumer", "commit_latency_seconds", "Duration of each offset commit (Java commit-latency-avg, -max).", cfg.latency, "group")
	m.txnCommits = counter("consumer", "transactional_commit_total", "Committed transactions that carried offsets of the group (not in commit_total).", "group")
	m.requestCount = counter("", "request_total", "Requests answered or failed (Java request-total).", "api")
	m.requestHist = hist("", "request_latency_seconds", "Request latency (Java request-latency-avg, -max).", cfg.latency, "api")
	one := func(name, help string) prom.Counter {
		return prom.NewCounter(prom.CounterOpts{Namespace: ns, Name: name, Help: help, ConstLabels: constLabels})
	}
	m.outBytes = one("outgoing_byte_total", "Bytes written to brokers (Java outgoing-byte-total).")
	m.inBytes = one("incoming_byte_total", "Bytes read from brokers (Java incoming-byte-total).")
	m.connOpened = one("connection_creation_total", "Connections opened (Java connection-creation-total).")
	m.connClosed = one("connection_close_total", "Connections closed (Java connection-close-total).")
	m.throttle = prom.NewHistogram(prom.HistogramOpts{Namespace: ns, Name: "throttle_time_seconds",
		Help: "Throttles brokers imposed (Java produce-throttle-time, fetch-throttle-time).", Buckets: cfg.latency, ConstLabels: constLabels})
	m.errors = counter("", "errors_total", "Errors by source (produce, fetch, rebalance, commit, request, handler, partition_stopped) and class (riffle.ErrorClass).", "source", "class")
	gl := append([]string{"group"}, tl...)
	m.lagDesc = prom.NewDesc(prom.BuildFQName(ns, "consumer", "records_lag"),
		"High watermark (last stable offset with read_committed) minus the consumer's position, of the partitions the consumer has (Java records-lag).", gl, constLabels)
	m.stoppedDesc = prom.NewDesc(prom.BuildFQName(ns, "consumer", "partitions_stopped"),
		"Partitions of the consumer stopped by an error, until resumed or removed.", gl, constLabels)
	m.bufTotalDesc = prom.NewDesc(prom.BuildFQName(ns, "producer", "buffer_total_bytes"), "The producers' MaxBufferedBytes (Java buffer-total-bytes).", nil, constLabels)
	m.bufAvailDesc = prom.NewDesc(prom.BuildFQName(ns, "producer", "buffer_available_bytes"), "Buffer room not used by records waiting for their outcome (Java buffer-available-bytes).", nil, constLabels)
	m.bufRecsDesc = prom.NewDesc(prom.BuildFQName(ns, "producer", "buffered_records"), "Records waiting for their outcome.", nil, constLabels)
	return m
}

func (m *Metrics) collectors() []prom.Collector {
	return []prom.Collector{
		m.sendRecords, m.sendErrors, m.sendBytes, m.batchBytes, m.batchRecords, m.compression, m.produceLatency,
		m.consumedRecords, m.consumedBytes, m.fetchSize, m.rebalances, m.failedRebalances, m.rebalanceLatency,
		m.commits, m.commitLatency, m.txnCommits, m.requestCount, m.requestHist, m.outBytes, m.inBytes, m.connOpened,
		m.connClosed, m.throttle, m.errors,
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prom.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
	ch <- m.lagDesc
	ch <- m.stoppedDesc
	ch <- m.bufTotalDesc
	ch <- m.bufAvailDesc
	ch <- m.bufRecsDesc
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prom.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
	m.mu.Lock()
	// Summed per group and topic, or per partition (PartitionLabels).
	lag := map[groupPartition]int64{}
	for gp, l := range m.lag {
		lag[m.seriesKey(gp)] += l
	}
	stopped := map[groupPartition]int{}
	for gp := range m.stopped {
		stopped[m.seriesKey(gp)]++
	}
	var total, used, recs int64
	for p := range m.producers {
		st := p.Stats()
		total += st.MaxBufferedBytes
		used += st.BufferedBytes
		recs += st.BufferedRecords
	}
	watching := len(m.producers) > 0
	m.mu.Unlock()
	for gp, l := range lag {
		ch <- prom.MustNewConstMetric(m.lagDesc, prom.GaugeValue, float64(l), m.labels(gp)...)
	}
	for gp, n := range stopped {
		ch <- prom.MustNewConstMetric(m.stoppedDesc, prom.GaugeValue, float64(n), m.labels(gp)...)
	}
	if watching {
		ch <- prom.MustNewConstMetric(m.bufTotalDesc, prom.GaugeValue, float64(total))
		ch <- prom.MustNewConstMetric(m.bufAvailDesc, prom.GaugeValue, float64(total-used))
		ch <- prom.MustNewConstMetric(m.bufRecsDesc, prom.GaugeValue, float64(recs))
	}
}

// WatchProducer adds p's buffer to the buffer gauges (summed over the
// watched producers) until the returned function is called; call it
// before or after p.Close.
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

// seriesKey is the series a partition's lag counts in: its own with
// PartitionLabels, its topic's otherwise.
func (m *Metrics) seriesKey(gp groupPartition) groupPartition {
	if !m.cfg.partitions {
		gp.Partition = -1
	}
	return gp
}

// labels are the label values of a series of the lag and stopped gauges.
func (m *Metrics) labels(gp groupPartition) []string {
	if m.cfg.partitions {
		return []string{gp.group, gp.Topic, strconv.Itoa(int(gp.Partition))}
	}
	return []string{gp.group, gp.Topic}
}

// ForgetPartitions drops the lag and stopped state of partitions, of
// every group. A consumer's partitions go by themselves when it loses
// them (its PartitionRemoved events); this is for a client that stopped
// without telling (e.g. killed in a test).
func (m *Metrics) ForgetPartitions(tps ...riffle.TopicPartition) {
	m.mu.Lock()
	for _, tp := range tps {
		for gp := range m.lag {
			if gp.TopicPartition == tp {
				delete(m.lag, gp)
			}
		}
		for gp := range m.stopped {
			if gp.TopicPartition == tp {
				delete(m.stopped, gp)
			}
		}
	}
	m.mu.Unlock()
}

// series are the per-topic (or per-partition) metrics, resolved once:
// the hooks then cost no label lookups and no allocation.
type series struct {
	sendRecords, sendErrors, sendBytes prom.Counter
	batchBytes, batchRecords           prom.Observer
	compression, latency               prom.Observer
	consumedRecords, consumedBytes     prom.Counter
}

// seriesFor returns the series of a topic-partition.
func (m *Metrics) seriesFor(topic string, partition int32) *series {
	if !m.cfg.partitions {
		partition = -1
	}
	key := riffle.TopicPartition{Topic: topic, Partition: partition}
	m.seriesMu.RLock()
	s := m.series[key]
	m.seriesMu.RUnlock()
	if s != nil {
		return s
	}
	l := []string{topic}
	if m.cfg.partitions {
		l = append(l, strconv.Itoa(int(partition)))
	}
	s = &series{
		sendRecords: m.sendRecords.WithLabelValues(l...), sendErrors: m.sendErrors.WithLabelValues(l...),
		sendBytes: m.sendBytes.WithLabelValues(l...), batchBytes: m.batchBytes.WithLabelValues(l...),
		batchRecords: m.batchRecords.WithLabelValues(l...), compression: m.compression.WithLabelValues(l...),
		latency: m.produceLatency.WithLabelValues(l...), consumedRecords: m.consumedRecords.WithLabelValues(l...),
		consumedBytes: m.consumedBytes.WithLabelValues(l...),
	}
	m.seriesMu.Lock()
	if cur := m.series[key]; cur != nil {
		s = cur
	} else {
		m.series[key] = s
	}
	m.seriesMu.Unlock()
	return s
}

// OnProduceBatch implements riffle.ProduceBatchHook.
func (m *Metrics) OnProduceBatch(e riffle.ProduceBatchEvent) {
	s := m.seriesFor(e.Topic, e.Partition)
	if e.Err != nil {
		s.sendErrors.Add(float64(e.Records))
		m.errors.WithLabelValues("produce", riffle.ErrorClass(e.Err)).Inc()
	} else {
		s.sendRecords.Add(float64(e.Records))
		s.sendBytes.Add(float64(e.CompressedBytes))
	}
	if e.CompressedBytes > 0 {
		s.batchBytes.Observe(float64(e.CompressedBytes))
		s.batchRecords.Observe(float64(e.Records))
		if e.UncompressedBytes > 0 {
			s.compression.Observe(float64(e.CompressedBytes) / float64(e.UncompressedBytes))
		}
	}
	if !e.Unbatched { // a record failed before a batch: no request to time
		s.latency.Observe(e.Latency.Seconds())
	}
}

// OnFetchBatch implements riffle.FetchBatchHook.
func (m *Metrics) OnFetchBatch(e riffle.FetchBatchEvent) {
	if e.Records > 0 {
		s := m.seriesFor(e.Topic, e.Partition)
		s.consumedRecords.Add(float64(e.Records))
		s.consumedBytes.Add(float64(e.Bytes))
	}
	if e.Err != nil {
		m.errors.WithLabelValues("fetch", riffle.ErrorClass(e.Err)).Inc()
	}
	if e.Lag >= 0 {
		m.mu.Lock()
		m.lag[groupPartition{e.Group, riffle.TopicPartition{Topic: e.Topic, Partition: e.Partition}}] = e.Lag
		m.mu.Unlock()
	}
}

// OnPartition implements riffle.PartitionHook: a stopped partition counts
// in partitions_stopped and errors_total (source handler or
// partition_stopped); a removed one leaves the lag and stopped gauges.
func (m *Metrics) OnPartition(e riffle.PartitionEvent) {
	gp := groupPartition{e.Group, riffle.TopicPartition{Topic: e.Topic, Partition: e.Partition}}
	switch e.Kind {
	case riffle.PartitionStopped:
		source := "partition_stopped"
		if e.Handler {
			source = "handler"
		}
		m.errors.WithLabelValues(source, riffle.ErrorClass(e.Err)).Inc()
		m.mu.Lock()
		m.stopped[gp] = struct{}{}
		m.mu.Unlock()
	case riffle.PartitionResumed:
		m.mu.Lock()
		delete(m.stopped, gp)
		m.mu.Unlock()
	case riffle.PartitionRemoved:
		m.mu.Lock()
		delete(m.lag, gp)
		delete(m.stopped, gp)
		m.mu.Unlock()
	}
}

// OnRebalance implements riffle.RebalanceHook.
func (m *Metrics) OnRebalance(e riffle.RebalanceEvent) {
	if e.Err != nil {
		m.failedRebalances.WithLabelValues(e.Group).Inc()
		m.errors.WithLabelValues("rebalance", riffle.ErrorClass(e.Err)).Inc()
		return
	}
	m.rebalances.WithLabelValues(e.Group, e.Protocol).Inc()
	m.rebalanceLatency.WithLabelValues(e.Group).Observe(e.Duration.Seconds())
}

// OnCommit implements riffle.CommitHook: a transactional commit counts
// in transactional_commit_total only (its latency is CommitTransaction's,
// not an OffsetCommit's).
func (m *Metrics) OnCommit(e riffle.CommitEvent) {
	if e.Transactional {
		m.txnCommits.WithLabelValues(e.Group).Inc()
		return
	}
	m.commits.WithLabelValues(e.Group).Inc()
	m.commitLatency.WithLabelValues(e.Group).Observe(e.Latency.Seconds())
	if e.Err != nil {
		m.errors.WithLabelValues("commit", riffle.ErrorClass(e.Err)).Inc()
	}
}

// OnBrokerConnect implements riffle.BrokerConnectHook.
func (m *Metrics) OnBrokerConnect(_ riffle.BrokerInfo, _ time.Duration, err error) {
	if err == nil {
		m.connOpened.Inc()
	}
}

// OnBrokerDisconnect implements riffle.BrokerDisconnectHook.
func (m *Metrics) OnBrokerDisconnect(riffle.BrokerInfo, error) { m.connClosed.Inc() }

// OnBrokerRequest implements riffle.BrokerRequestHook.
func (m *Metrics) OnBrokerRequest(_ riffle.BrokerInfo, e riffle.RequestEvent) {
	m.requestCount.WithLabelValues(e.APIName).Inc()
	m.requestHist.WithLabelValues(e.APIName).Observe(e.Latency.Seconds())
	m.outBytes.Add(float64(e.BytesWritten))
	m.inBytes.Add(float64(e.BytesRead))
	if e.Err != nil {
		m.errors.WithLabelValues("request", riffle.ErrorClass(e.Err)).Inc()
	} else if e.APIKey == 1 { // Fetch
		m.fetchSize.Observe(float64(e.BytesRead))
	}
}

// OnBrokerThrottle implements riffle.BrokerThrottleHook.
func (m *Metrics) OnBrokerThrottle(_ riffle.BrokerInfo, d time.Duration) {
	m.throttle.Observe(d.Seconds())
}
