package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/riffle-go/riffle"
)

// dialTracker is a riffle.BrokerConnectHook remembering the outcome of the
// last connection attempt to each address. When a command runs out of
// time, the client's error is often the bare context error; the tracker
// says why: a refused port, an untrusted certificate, a DNS failure.
type dialTracker struct {
	mu   sync.Mutex
	last map[string]error // nil when the last attempt succeeded
}

func (d *dialTracker) OnBrokerConnect(b riffle.BrokerInfo, _ time.Duration, err error) {
	if errors.Is(err, context.Canceled) {
		return // another broker answered first: nothing learnt
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last == nil {
		d.last = map[string]error{}
	}
	// A dial cut short by the command's deadline says less than why the
	// attempt before it failed, if one did.
	if prev := d.last[b.Addr]; prev != nil && errors.Is(err, context.DeadlineExceeded) {
		return
	}
	d.last[b.Addr] = err
}

// failures describes the addresses whose last connection attempt failed
// the way unreachable errors are (see groupReasons); "" if none did.
func (d *dialTracker) failures() string {
	if d == nil {
		return ""
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []riffle.AddrError
	for addr, err := range d.last {
		if err != nil {
			out = append(out, riffle.AddrError{Addr: addr, NodeID: -1, Err: err})
		}
	}
	return groupReasons(out)
}
