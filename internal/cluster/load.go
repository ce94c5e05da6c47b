package cluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/riffle-go/riffle/internal/errs"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BrokerLoad is what the client knows of a broker's load, for LeastLoaded.
type BrokerLoad struct {
	NodeID int32 // -1 for a seed that is no broker of the metadata
	Addr   string
	// Connected: the client has a live connection to it, of any class.
	Connected bool
	// Inflight counts the requests written to it and not yet answered,
	// over all its live connections (each connection counts its own with
	// an atomic counter, conn.Conn.Inflight).
	Inflight int
	// Dialing: a connection to it is being dialed.
	Dialing bool
	// BackingOff: its last dial failed and it may not be dialed again yet.
	BackingOff bool
}

// LeastLoaded picks, as the Java client's leastLoadedNode, the broker for
// a request any broker can answer: the connected one with the fewest
// requests in flight (the first found with none), else one being dialed,
// else one that may be dialed now. The search starts at loads[start %
// len(loads)] and wraps around, so a random start spreads ties. The broker
// at address avoid (one that just failed) is passed over unless no other
// qualifies. It returns the index of the pick in loads, or -1 when every
// broker is backing off.
func LeastLoaded(loads []BrokerLoad, start int, avoid string) int {
	n := len(loads)
	if n == 0 {
		return -1
	}
	start = ((start % n) + n) % n
	least, dialing, dialable := -1, -1, -1
	for i := range n {
		j := (start + i) % n
		l := loads[j]
		if avoid != "" && l.Addr == avoid {
			continue
		}
		switch {
		case l.Connected:
			if l.Inflight == 0 {
				return j
			}
			if least < 0 || l.Inflight < loads[least].Inflight {
				least = j
			}
		case l.Dialing:
			if dialing < 0 {
				dialing = j
			}
		case !l.BackingOff:
			if dialable < 0 {
				dialable = j
			}
		}
	}
	for _, j := range []int{least, dialing, dialable} {
		if j >= 0 {
			return j
		}
	}
	if avoid != "" {
		return LeastLoaded(loads, start, "")
	}
	return -1
}

// Loads returns the load of every broker the client knows: the brokers
// of the metadata in node order, then the seeds at other addresses. A
// seed at a broker's address is the same broker: its connections count
// with the broker's.
func (c *Cluster) Loads() []BrokerLoad {
	c.mu.Lock()
	entries := make([]*broker, 0, len(c.brokers)+len(c.seeds))
	for _, b := range c.brokers {
		entries = append(entries, b)
	}
	slices.SortFunc(entries, func(a, b *broker) int { return int(a.nodeID) - int(b.nodeID) })
	entries = append(entries, c.seeds...)
	now := time.Now()
	loads := make([]BrokerLoad, 0, len(entries))
	at := make(map[string]int, len(entries))
	for _, b := range entries {
		if _, ok := at[b.addr]; ok {
			continue
		}
		at[b.addr] = len(loads)
		loads = append(loads, BrokerLoad{
			NodeID: b.nodeID, Addr: b.addr,
			Dialing:    c.dialing[b.addr] != nil,
			BackingOff: !c.tracker.Ready(b.addr, now),
		})
	}
	c.mu.Unlock()
	for _, b := range entries {
		l := &loads[at[b.addr]]
		b.mu.Lock()
		b.slots(func(_ Class, sl *slot) {
			if cn := sl.c; cn != nil && cn.Err() == nil {
				l.Connected = true
				l.Inflight += cn.Inflight()
			}
			if sl.dialing != nil {
				l.Dialing = true
			}
		})
		b.mu.Unlock()
	}
	return loads
}

// RequestAt sends req once to the broker at addr (from Loads) on a
// connection of class Other: an open one of the broker or of a seed at
// its address, else one dialed to the broker (the seed if the metadata
// has no broker there).
func (c *Cluster) RequestAt(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	if c.ctx.Err() != nil {
		return nil, errs.ErrClientClosed
	}
	c.mu.Lock()
	var entries []*broker
	for _, b := range c.brokers {
		if b.addr == addr {
			entries = append(entries, b)
		}
	}
	for _, b := range c.seeds {
		if b.addr == addr {
			entries = append(entries, b)
		}
	}
	c.mu.Unlock()
	if len(entries) == 0 {
		return nil, fmt.Errorf("broker %s left the cluster: %w", addr, errs.ErrConnClosed)
	}
	for _, b := range entries {
		if cn := b.liveConn(ClassOther); cn != nil {
			return cn.Request(ctx, req)
		}
	}
	cn, err := entries[0].conn(ctx, ClassOther)
	if err != nil {
		return nil, err
	}
	return cn.Request(ctx, req)
}
