package riffle

import (
	"log/slog"
	"time"

	"github.com/riffle-go/riffle/internal/clientinternal"
	"github.com/riffle-go/riffle/internal/cluster"
	rsink "github.com/riffle-go/riffle/internal/sink"
)

func init() {
	clientinternal.Access = func(client any) (*cluster.Cluster, *slog.Logger) {
		c := client.(*Client)
		return c.cl, c.log
	}
	clientinternal.ReadConfig = func(client any) (string, time.Duration) {
		c := client.(*Client)
		return c.cfg.rack, c.cfg.metadataMaxAge
	}
	clientinternal.ConsumerSink = func(s any) any {
		rs := s.(recordSink)
		return ConsumerOption(func(c *consumerConfig) { c.sink = rs })
	}
	clientinternal.ProducerTxn = func(p any) (bool, time.Duration) {
		pr := p.(*Producer)
		return pr.txn != nil, pr.cfg.txnTimeout
	}
	clientinternal.ConsumerRewind = func(c any, sp rsink.Part, pos rsink.Pos) bool {
		cs := c.(*Consumer)
		p := cs.partition(TopicPartition(sp))
		if p == nil {
			return false
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.state == stateRevoked {
			return false
		}
		p.err, p.fetchErr = nil, nil
		p.resetLocked(atCommitted(pos.Offset, -1))
		p.meta = pos.Meta // resetLocked cleared it: this one goes with the offset
		return true
	}
	clientinternal.ConsumerCommitted = func(c any, offsets map[rsink.Part]int64) {
		cs := c.(*Consumer)
		if cs.member == nil {
			return
		}
		cm := cs.member.commits
		cm.mu.Lock()
		defer cm.mu.Unlock()
		for sp, o := range offsets {
			cm.committed[TopicPartition(sp)] = o
		}
	}
}
