package riffle

import (
	"log/slog"

	"github.com/riffle-go/riffle/internal/clientinternal"
	"github.com/riffle-go/riffle/internal/cluster"
)

func init() {
	clientinternal.Access = func(client any) (*cluster.Cluster, *slog.Logger) {
		c := client.(*Client)
		return c.cl, c.log
	}
	clientinternal.ConsumerSink = func(s any) any {
		rs := s.(recordSink)
		return ConsumerOption(func(c *consumerConfig) { c.sink = rs })
	}
}
