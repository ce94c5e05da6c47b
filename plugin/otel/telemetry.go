package otel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riffle-go/riffle"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"
)

// Telemetry is a riffle.TelemetryReporter: it reads the instruments of
// Metrics through two SDK manual readers, one with delta and one with
// cumulative temporality (the broker's subscription chooses), and encodes
// what the subscription asks for as OTLP MetricsData for client telemetry
// pushes (KIP-714). Only the instruments of this package's scope
// (ScopeName) are pushed, never the application's own.
//
// Register its readers with the MeterProvider that Metrics records into
// (MeterProviderOptions), then pass Metrics to riffle.WithHooks and the
// Telemetry to riffle.TelemetryPush. A reader belongs to one
// MeterProvider: use a Telemetry with one provider only.
//
// Metric names follow the Java client's KIP-714 names where Riffle has the
// same metric ("org.apache.kafka." + the Java group without "-metrics" +
// the Java name, dots for dashes), and keep their OTel name otherwise:
//
//   - messaging.client.sent.messages → org.apache.kafka.producer.topic.record.send.total,
//     its points with error.type → org.apache.kafka.producer.topic.record.error.total
//   - riffle.producer.byte_total → org.apache.kafka.producer.topic.byte.total
//   - riffle.producer.compression.rate → org.apache.kafka.producer.topic.compression.rate
//   - riffle.producer.batch.size → org.apache.kafka.producer.batch.size
//   - riffle.producer.buffer.available → org.apache.kafka.producer.buffer.available.bytes
//   - messaging.client.consumed.messages → org.apache.kafka.consumer.fetch.manager.records.consumed.total
//   - riffle.consumer.bytes_consumed_total → org.apache.kafka.consumer.fetch.manager.bytes.consumed.total
//   - riffle.consumer.records.lag → org.apache.kafka.consumer.fetch.manager.records.lag
//   - riffle.consumer.fetch.size → org.apache.kafka.consumer.fetch.manager.fetch.size
//   - riffle.consumer.rebalance.total → org.apache.kafka.consumer.coordinator.rebalance.total
//   - riffle.consumer.rebalance.latency → org.apache.kafka.consumer.coordinator.rebalance.latency
//   - riffle.consumer.commit.total → org.apache.kafka.consumer.coordinator.commit.total
//   - riffle.consumer.commit.latency → org.apache.kafka.consumer.coordinator.commit.latency
//   - riffle.producer.record.latency, riffle.consumer.transactional_commit.total,
//     riffle.consumer.partitions.stopped, riffle.request.total,
//     riffle.request.latency and riffle.errors keep their names
//
// Where Java has -avg and -max gauges (batch size, fetch size, latencies)
// the push carries the histogram under the base name; latencies stay in
// seconds (the OTLP unit says so). Attributes are renamed as Java's tags:
// messaging.destination.name → topic, messaging.destination.partition.id
// → partition, messaging.client.id → client_id,
// messaging.consumer.group.name → group_id, error.type → error_type,
// riffle.api → api; messaging.system is dropped.
type Telemetry struct {
	delta, cumulative *sdkmetric.ManualReader
}

// NewTelemetry returns a Telemetry with its two readers.
func NewTelemetry() *Telemetry {
	return &Telemetry{
		delta: sdkmetric.NewManualReader(sdkmetric.WithTemporalitySelector(func(sdkmetric.InstrumentKind) metricdata.Temporality {
			return metricdata.DeltaTemporality
		})),
		cumulative: sdkmetric.NewManualReader(),
	}
}

// MeterProviderOptions returns the options that register the Telemetry's
// readers with a MeterProvider: sdkmetric.NewMeterProvider(append(
// t.MeterProviderOptions(), yourOptions...)...).
func (t *Telemetry) MeterProviderOptions() []sdkmetric.Option {
	return []sdkmetric.Option{sdkmetric.WithReader(t.delta), sdkmetric.WithReader(t.cumulative)}
}

// kafkaNames maps instrument names to KIP-714 names (see Telemetry).
var kafkaNames = map[string]string{
	"messaging.client.sent.messages":       "org.apache.kafka.producer.topic.record.send.total",
	"riffle.producer.byte_total":           "org.apache.kafka.producer.topic.byte.total",
	"riffle.producer.compression.rate":     "org.apache.kafka.producer.topic.compression.rate",
	"riffle.producer.batch.size":           "org.apache.kafka.producer.batch.size",
	"riffle.producer.buffer.available":     "org.apache.kafka.producer.buffer.available.bytes",
	"messaging.client.consumed.messages":   "org.apache.kafka.consumer.fetch.manager.records.consumed.total",
	"riffle.consumer.bytes_consumed_total": "org.apache.kafka.consumer.fetch.manager.bytes.consumed.total",
	"riffle.consumer.records.lag":          "org.apache.kafka.consumer.fetch.manager.records.lag",
	"riffle.consumer.fetch.size":           "org.apache.kafka.consumer.fetch.manager.fetch.size",
	"riffle.consumer.rebalance.total":      "org.apache.kafka.consumer.coordinator.rebalance.total",
	"riffle.consumer.rebalance.latency":    "org.apache.kafka.consumer.coordinator.rebalance.latency",
	"riffle.consumer.commit.total":         "org.apache.kafka.consumer.coordinator.commit.total",
	"riffle.consumer.commit.latency":       "org.apache.kafka.consumer.coordinator.commit.latency",
}

// sendErrorName is where failed sends go (Java's record-error-total).
const sendErrorName = "org.apache.kafka.producer.topic.record.error.total"

// kafkaAttrs maps attribute keys to Java's tag names; "" drops the key.
var kafkaAttrs = map[attribute.Key]string{
	"messaging.system":                   "",
	"messaging.destination.name":         "topic",
	"messaging.destination.partition.id": "partition",
	"messaging.client.id":                "client_id",
	"messaging.consumer.group.name":      "group_id",
	"error.type":                         "error_type",
	"riffle.api":                         "api",
}

// KafkaMetricName returns the name an instrument of this package is
// pushed under (see Telemetry); failed is for data points carrying
// error.type.
func KafkaMetricName(instrument string, failed bool) string {
	if instrument == "messaging.client.sent.messages" && failed {
		return sendErrorName
	}
	if n, ok := kafkaNames[instrument]; ok {
		return n
	}
	return instrument
}

// CollectTelemetry implements riffle.TelemetryReporter: it collects from
// the reader of the subscription's temporality and returns the requested
// metrics as a serialized OTLP MetricsData message. Collecting from the
// delta reader starts the next delta.
func (t *Telemetry) CollectTelemetry(ctx context.Context, sub riffle.TelemetrySubscription) ([]byte, error) {
	r := t.cumulative
	if sub.DeltaTemporality {
		r = t.delta
	}
	var rm metricdata.ResourceMetrics
	if err := r.Collect(ctx, &rm); err != nil {
		return nil, fmt.Errorf("otel telemetry: %w", err)
	}
	md, err := encodeMetrics(&rm, sub)
	if err != nil {
		return nil, err
	}
	return proto.Marshal(md)
}

// errUnknownData is returned for an aggregation this package never
// creates.
var errUnknownData = errors.New("otel telemetry: unsupported aggregation")

// encodeMetrics converts the scope's metrics that sub requests to OTLP.
func encodeMetrics(rm *metricdata.ResourceMetrics, sub riffle.TelemetrySubscription) (*metricspb.MetricsData, error) {
	out := &metricspb.ScopeMetrics{}
	byName := map[string]*metricspb.Metric{}
	metricFor := func(src metricdata.Metrics, failed bool) *metricspb.Metric {
		name := KafkaMetricName(src.Name, failed)
		if !sub.Requested(name) {
			return nil
		}
		m := byName[name]
		if m == nil {
			m = &metricspb.Metric{Name: name, Description: src.Description, Unit: src.Unit}
			byName[name] = m
			out.Metrics = append(out.Metrics, m)
		}
		return m
	}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != ScopeName {
			continue
		}
		out.Scope = &commonpb.InstrumentationScope{Name: sm.Scope.Name, Version: sm.Scope.Version}
		for _, src := range sm.Metrics {
			switch d := src.Data.(type) {
			case metricdata.Sum[int64]:
				addSum(d.DataPoints, d.Temporality, d.IsMonotonic, src, metricFor, intValue)
			case metricdata.Sum[float64]:
				addSum(d.DataPoints, d.Temporality, d.IsMonotonic, src, metricFor, floatValue)
			case metricdata.Gauge[int64]:
				addGauge(d.DataPoints, src, metricFor, intValue)
			case metricdata.Gauge[float64]:
				addGauge(d.DataPoints, src, metricFor, floatValue)
			case metricdata.Histogram[int64]:
				addHistogram(d, src, metricFor)
			case metricdata.Histogram[float64]:
				addHistogram(d, src, metricFor)
			default:
				return nil, fmt.Errorf("%w: %s is %T", errUnknownData, src.Name, src.Data)
			}
		}
	}
	md := &metricspb.MetricsData{}
	if len(out.Metrics) > 0 {
		var res *resourcepb.Resource
		if rm.Resource != nil {
			res = &resourcepb.Resource{Attributes: encodeAttrs(rm.Resource.Iter(), false)}
		}
		md.ResourceMetrics = []*metricspb.ResourceMetrics{{Resource: res, ScopeMetrics: []*metricspb.ScopeMetrics{out}}}
	}
	return md, nil
}

func intValue(v int64) *metricspb.NumberDataPoint {
	return &metricspb.NumberDataPoint{Value: &metricspb.NumberDataPoint_AsInt{AsInt: v}}
}
func floatValue(v float64) *metricspb.NumberDataPoint {
	return &metricspb.NumberDataPoint{Value: &metricspb.NumberDataPoint_AsDouble{AsDouble: v}}
}

func temporality(t metricdata.Temporality) metricspb.AggregationTemporality {
	if t == metricdata.DeltaTemporality {
		return metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA
	}
	return metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE
}

func failedPoint(s attribute.Set) bool { return s.HasValue("error.type") }

func numberPoint[N int64 | float64](p metricdata.DataPoint[N], value func(N) *metricspb.NumberDataPoint) *metricspb.NumberDataPoint {
	dp := value(p.Value)
	dp.Attributes = encodeAttrs(p.Attributes.Iter(), true)
	dp.StartTimeUnixNano = unixNano(p.StartTime)
	dp.TimeUnixNano = unixNano(p.Time)
	return dp
}

func addSum[N int64 | float64](pts []metricdata.DataPoint[N], temp metricdata.Temporality, mono bool, src metricdata.Metrics,
	metricFor func(metricdata.Metrics, bool) *metricspb.Metric, value func(N) *metricspb.NumberDataPoint) {
	for _, p := range pts {
		m := metricFor(src, failedPoint(p.Attributes))
		if m == nil {
			continue
		}
		if m.Data == nil {
			m.Data = &metricspb.Metric_Sum{Sum: &metricspb.Sum{AggregationTemporality: temporality(temp), IsMonotonic: mono}}
		}
		s := m.GetSum()
		s.DataPoints = append(s.DataPoints, numberPoint(p, value))
	}
}

func addGauge[N int64 | float64](pts []metricdata.DataPoint[N], src metricdata.Metrics,
	metricFor func(metricdata.Metrics, bool) *metricspb.Metric, value func(N) *metricspb.NumberDataPoint) {
	for _, p := range pts {
		m := metricFor(src, false)
		if m == nil {
			continue
		}
		if m.Data == nil {
			m.Data = &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{}}
		}
		g := m.GetGauge()
		g.DataPoints = append(g.DataPoints, numberPoint(p, value))
	}
}

func addHistogram[N int64 | float64](h metricdata.Histogram[N], src metricdata.Metrics, metricFor func(metricdata.Metrics, bool) *metricspb.Metric) {
	for _, p := range h.DataPoints {
		m := metricFor(src, false)
		if m == nil {
			continue
		}
		if m.Data == nil {
			m.Data = &metricspb.Metric_Histogram{Histogram: &metricspb.Histogram{AggregationTemporality: temporality(h.Temporality)}}
		}
		sum := float64(p.Sum)
		dp := &metricspb.HistogramDataPoint{
			Attributes:        encodeAttrs(p.Attributes.Iter(), true),
			StartTimeUnixNano: unixNano(p.StartTime),
			TimeUnixNano:      unixNano(p.Time),
			Count:             p.Count,
			Sum:               &sum,
			BucketCounts:      p.BucketCounts,
			ExplicitBounds:    p.Bounds,
		}
		if v, ok := p.Min.Value(); ok {
			f := float64(v)
			dp.Min = &f
		}
		if v, ok := p.Max.Value(); ok {
			f := float64(v)
			dp.Max = &f
		}
		hg := m.GetHistogram()
		hg.DataPoints = append(hg.DataPoints, dp)
	}
}

// encodeAttrs converts attributes, renamed as Java's tags when rename is
// set (data points; the resource keeps its own names).
func encodeAttrs(it attribute.Iterator, rename bool) []*commonpb.KeyValue {
	var out []*commonpb.KeyValue
	for it.Next() {
		kv := it.Attribute()
		key := string(kv.Key)
		if rename {
			if k, ok := kafkaAttrs[kv.Key]; ok {
				if k == "" {
					continue
				}
				key = k
			}
		}
		out = append(out, &commonpb.KeyValue{Key: key, Value: anyValue(kv.Value)})
	}
	return out
}

func anyValue(v attribute.Value) *commonpb.AnyValue {
	switch v.Type() {
	case attribute.BOOL:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}}
	case attribute.INT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}}
	case attribute.FLOAT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}}
	case attribute.STRING:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v.AsString()}}
	}
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v.String()}}
}

func unixNano(t time.Time) uint64 {
	if t.IsZero() || t.UnixNano() < 0 {
		return 0
	}
	return uint64(t.UnixNano())
}
