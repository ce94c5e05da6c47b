package otel_test

import (
	"context"
	"fmt"

	"github.com/riffle-go/riffle"
	rotel "github.com/riffle-go/riffle/plugin/otel"
	"github.com/riffle-go/riffle/rifftest"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Trace a record from Produce to the consumer's handler: the handler runs
// in a "process" span whose parent is the record's "send" span.
func Example() {
	cluster, err := rifftest.Start(rifftest.Topic("events", 1))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	tracing := rotel.NewTracing(rotel.WithTracerProvider(tp), rotel.WithPropagator(propagation.TraceContext{}))

	ctx := context.Background()
	cl, err := riffle.NewClient(riffle.SeedBrokers(cluster.Addrs()...))
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	p, err := riffle.NewProducer(cl)
	if err != nil {
		panic(err)
	}
	defer p.Close(ctx)
	if err := tracing.ProduceSync(ctx, p, &riffle.Record{Topic: "events", Value: []byte("hello")}); err != nil {
		panic(err)
	}

	done := make(chan struct{})
	cs, err := riffle.NewConsumer(cl, riffle.ConsumerGroup("example"), riffle.SubscribeTopics("events"),
		riffle.OffsetReset(riffle.ResetEarliest),
		riffle.HandleRecord(tracing.WrapHandler(func(ctx context.Context, r *riffle.Record) error {
			close(done)
			return nil
		})))
	if err != nil {
		panic(err)
	}
	<-done
	cs.Close(ctx)
	tp.Shutdown(ctx)
	ended := spans.Ended()
	fmt.Println(ended[0].Name(), ended[0].SpanKind())
	fmt.Println(ended[1].Name(), ended[1].SpanKind(), ended[1].Parent().SpanID() == ended[0].SpanContext().SpanID())
	// Output:
	// send events producer
	// process events consumer true
}

// Push the client's metrics to the brokers (KIP-714 client telemetry):
// the Telemetry's readers go on the MeterProvider that Metrics records
// into, and the client pushes what the brokers' subscription asks for.
func ExampleTelemetry() {
	cluster, err := rifftest.Start(rifftest.Topic("events", 1))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()

	tel := rotel.NewTelemetry()
	mp := sdkmetric.NewMeterProvider(tel.MeterProviderOptions()...)
	defer mp.Shutdown(context.Background())
	m, err := rotel.NewMetrics(rotel.WithMeterProvider(mp), rotel.ClientID("svc"))
	if err != nil {
		panic(err)
	}
	defer m.Close()

	cl, err := riffle.NewClient(riffle.SeedBrokers(cluster.Addrs()...), riffle.ClientID("svc"),
		riffle.WithHooks(m), riffle.TelemetryPush(tel))
	if err != nil {
		panic(err)
	}
	defer cl.Close() // pushes a last time, Terminating
	p, err := riffle.NewProducer(cl)
	if err != nil {
		panic(err)
	}
	defer p.Close(context.Background())
	if err := p.ProduceSync(context.Background(), &riffle.Record{Topic: "events", Value: []byte("hello")}); err != nil {
		panic(err)
	}
	fmt.Println(rotel.KafkaMetricName("messaging.client.sent.messages", false))
	// Output:
	// org.apache.kafka.producer.topic.record.send.total
}

// Trace the batches of a HandleBatch consumer: each handler call runs in
// one "process" span that links to the "send" span of each of its records.
func ExampleTracing_WrapBatchHandler() {
	cluster, err := rifftest.Start(rifftest.Topic("events", 1))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	tracing := rotel.NewTracing(rotel.WithTracerProvider(tp), rotel.WithPropagator(propagation.TraceContext{}))

	ctx := context.Background()
	cl, err := riffle.NewClient(riffle.SeedBrokers(cluster.Addrs()...))
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	p, err := riffle.NewProducer(cl)
	if err != nil {
		panic(err)
	}
	defer p.Close(ctx)
	if err := tracing.ProduceSync(ctx, p,
		&riffle.Record{Topic: "events", Value: []byte("a")}, &riffle.Record{Topic: "events", Value: []byte("b")}); err != nil {
		panic(err)
	}

	done := make(chan struct{})
	var seen int
	cs, err := riffle.NewConsumer(cl, riffle.ConsumerGroup("example"), riffle.SubscribeTopics("events"),
		riffle.OffsetReset(riffle.ResetEarliest),
		riffle.HandleBatch(tracing.WrapBatchHandler(func(ctx context.Context, b *riffle.FetchBatch) error {
			if seen += len(b.Records); seen == 2 {
				close(done)
			}
			return nil
		})))
	if err != nil {
		panic(err)
	}
	<-done
	cs.Close(ctx)
	tp.Shutdown(ctx)
	links := 0
	for _, s := range spans.Ended() {
		if s.Name() == "process events" {
			links += len(s.Links())
		}
	}
	fmt.Println("links to send spans:", links)
	// Output:
	// links to send spans: 2
}
