package rifftest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Blackhole is a loopback TCP address that never completes a TCP handshake:
// a listening socket with accept backlog 0 that never accepts, whose queue
// is filled at creation so further SYNs are dropped and connect() hangs
// until the dialer's own timeout, like a firewalled host.
//
// It exists for testing dial timeouts and unreachable brokers. The usual
// stand-ins are worse: a closed port is refused at once, which exercises a
// different code path, and a non-routable address such as 10.255.255.1
// may be refused, time out, or route somewhere real depending on the
// machine and network the test runs on.
//
// Blackhole needs Linux; elsewhere [NewBlackhole] returns an error, and
// tests should skip.
type Blackhole struct {
	addr    string
	ln      io.Closer  // the never-accepting listening socket
	fillers []net.Conn // connections occupying the accept queue

	closeOnce sync.Once
	closeErr  error
}

const (
	// maxFillers bounds the filling loop. Linux admits exactly one
	// connection into a backlog-0 queue (it deems the queue full only when
	// it holds more than the backlog), so one filler suffices there; the
	// slack covers kernels that round the backlog up.
	maxFillers = 8

	// firstFillTimeout is how long the first filler may take to connect.
	// On Linux a backlog-0 queue always admits one connection, so a first
	// dial that times out means a machine too loaded to answer in a
	// short probe window, not a full queue; be patient with it.
	firstFillTimeout = time.Second

	// probeTimeout is how long a later filler may take before we take it
	// that the queue is full and SYNs are being dropped. Loopback
	// handshakes complete in microseconds, so 100ms separates the two
	// cases with a wide margin while keeping NewBlackhole fast.
	probeTimeout = 100 * time.Millisecond
)

// NewBlackhole creates a Blackhole on a fresh loopback port. It takes about
// 100ms, the time it takes to see that a further connection does not get
// through. Close it to release the port and the connections filling it.
func NewBlackhole() (*Blackhole, error) {
	ln, addr, err := listenNoBacklog()
	if err != nil {
		return nil, err
	}
	b := &Blackhole{addr: addr, ln: ln}
	if err := b.fill(); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// fill opens connections until one does not complete: from then on the
// accept queue is full and the kernel drops every SYN sent to the address.
func (b *Blackhole) fill() error {
	for i := 0; i < maxFillers; i++ {
		timeout := probeTimeout
		if i == 0 {
			timeout = firstFillTimeout
		}
		d := net.Dialer{Timeout: timeout}
		conn, err := d.Dial("tcp", b.addr)
		if err == nil {
			b.fillers = append(b.fillers, conn)
			continue
		}
		var nerr net.Error
		if errors.As(err, &nerr) && nerr.Timeout() {
			return nil
		}
		return fmt.Errorf("rifftest: filling blackhole %s: %w", b.addr, err)
	}
	return fmt.Errorf("rifftest: blackhole %s still completes handshakes after %d connections", b.addr, maxFillers)
}

// Addr returns the blackhole's "127.0.0.1:port" address.
func (b *Blackhole) Addr() string { return b.addr }

// Close releases the port: later dials to Addr are refused at once, and
// dials still waiting on it are reset. It is safe to call more than once;
// later calls return what the first returned.
func (b *Blackhole) Close() error {
	b.closeOnce.Do(func() {
		// The listener goes first so the port refuses connections
		// from the moment Close is called; the fillers are only
		// bookkeeping by then.
		b.closeErr = b.ln.Close()
		for _, c := range b.fillers {
			c.Close()
		}
	})
	return b.closeErr
}
