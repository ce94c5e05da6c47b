package rifftest_test

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/riffle-go/riffle/rifftest"
)

func newBlackhole(t *testing.T) *rifftest.Blackhole {
	t.Helper()
	b, err := rifftest.NewBlackhole()
	if err != nil {
		if runtime.GOOS != "linux" {
			t.Skipf("Blackhole unsupported here: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// dialTimesOut checks that a dial to addr hangs until the dialer gives up,
// rather than being refused or reset. It returns an error rather than
// failing the test so that it can run on goroutines of its own.
func dialTimesOut(addr string) error {
	const timeout = 300 * time.Millisecond
	start := time.Now()
	conn, err := (&net.Dialer{Timeout: timeout}).Dial("tcp", addr)
	elapsed := time.Since(start)
	if err == nil {
		conn.Close()
		return fmt.Errorf("dial to blackhole %s connected", addr)
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("dial to blackhole %s was refused: %w", addr, err)
	}
	var nerr net.Error
	if !errors.As(err, &nerr) || !nerr.Timeout() {
		return fmt.Errorf("dial to blackhole %s: %w, want a timeout", addr, err)
	}
	// A timeout reported early would mean something other than the
	// dialer's clock ended the attempt.
	if elapsed < timeout-20*time.Millisecond {
		return fmt.Errorf("dial to blackhole %s gave up after %v, before its %v timeout", addr, elapsed, timeout)
	}
	return nil
}

func TestBlackhole(t *testing.T) {
	// Several at once, as connection-failure tests may create: each must
	// hold its own port shut without help from the others.
	bs := make([]*rifftest.Blackhole, 3)
	for i := range bs {
		bs[i] = newBlackhole(t)
	}
	seen := make(map[string]bool)
	for _, b := range bs {
		host, _, err := net.SplitHostPort(b.Addr())
		if err != nil || host != "127.0.0.1" || seen[b.Addr()] {
			t.Fatalf("Addr() = %q: want a distinct 127.0.0.1:port", b.Addr())
		}
		seen[b.Addr()] = true
	}

	// Concurrent dials to every blackhole, several each: a queue that
	// let one through would let a client under test through too.
	var wg sync.WaitGroup
	for _, b := range bs {
		for range 3 {
			wg.Go(func() {
				if err := dialTimesOut(b.Addr()); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()

	// And again once those attempts are gone, in case abandoning a
	// half-open attempt freed a slot.
	for _, b := range bs {
		wg.Go(func() {
			if err := dialTimesOut(b.Addr()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()

	for _, b := range bs {
		if err := b.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := b.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		start := time.Now()
		conn, err := (&net.Dialer{Timeout: 300 * time.Millisecond}).Dial("tcp", b.Addr())
		if err == nil {
			// The port was released; something else may have taken
			// it, which is not the blackhole's doing.
			conn.Close()
			continue
		}
		if !errors.Is(err, syscall.ECONNREFUSED) && time.Since(start) > 100*time.Millisecond {
			t.Fatalf("dial after Close: %v after %v, want refused or fast", err, time.Since(start))
		}
	}
}

// TestBlackholeUnblocksPendingDial checks that Close releases a dial already
// waiting on the blackhole instead of leaving it to its timeout.
func TestBlackholeUnblocksPendingDial(t *testing.T) {
	b := newBlackhole(t)
	errc := make(chan error, 1)
	start := time.Now()
	go func() {
		conn, err := (&net.Dialer{Timeout: 5 * time.Second}).Dial("tcp", b.Addr())
		if err == nil {
			conn.Close()
		}
		errc <- err
	}()
	time.Sleep(100 * time.Millisecond)
	b.Close()
	// The kernel resends the SYN after about a second; that retry meets
	// the closed port and is refused, well before the dialer's 5s.
	err := <-errc
	if err == nil {
		t.Fatal("pending dial connected")
	}
	if elapsed := time.Since(start); elapsed > 4*time.Second {
		t.Fatalf("pending dial took %v to fail after Close: %v", elapsed, err)
	}
}
