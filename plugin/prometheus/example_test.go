package prometheus_test

import (
	"context"
	"fmt"
	"strings"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/riffle-go/riffle"
	rprom "github.com/riffle-go/riffle/plugin/prometheus"
	"github.com/riffle-go/riffle/rifftest"
)

// Install the metrics as hooks of a client, register them, and scrape.
// In a program, serve the registry with promhttp.HandlerFor.
func Example() {
	cluster, err := rifftest.Start(rifftest.Topic("events", 3))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()

	m := rprom.New(rprom.ClientID("example"))
	reg := prom.NewRegistry()
	reg.MustRegister(m)

	cl, err := riffle.NewClient(riffle.SeedBrokers(cluster.Addrs()...), riffle.ClientID("example"), riffle.WithHooks(m))
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	ctx := context.Background()
	p, err := riffle.NewProducer(cl)
	if err != nil {
		panic(err)
	}
	defer p.Close(ctx)
	defer m.WatchProducer(p)()
	for i := range 10 {
		if err := p.ProduceSync(ctx, &riffle.Record{Topic: "events", Value: fmt.Appendf(nil, "v%d", i)}); err != nil {
			panic(err)
		}
	}
	err = testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP riffle_producer_record_send_total Records the brokers acknowledged (Java record-send-total).
# TYPE riffle_producer_record_send_total counter
riffle_producer_record_send_total{client_id="example",topic="events"} 10
`), "riffle_producer_record_send_total")
	fmt.Println(err)
	// Output: <nil>
}
