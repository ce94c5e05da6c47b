package riffle

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newFake(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func newTestClient(t testing.TB, opts ...Option) *Client {
	t.Helper()
	opts = append([]Option{RetryBackoff(10*time.Millisecond, 100*time.Millisecond), ReconnectBackoff(10*time.Millisecond, 100*time.Millisecond)}, opts...)
	c, err := NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// blackholeDialer returns a dialer that hangs on the dead addresses until
// the dial is cancelled, like a host that drops SYN packets, and dials the
// rest normally. It records every dial and every cancellation.
type blackholeDialer struct {
	dead      map[string]bool
	dials     atomic.Int32
	cancelled atomic.Int32
	mu        sync.Mutex
	order     []string
}

func (d *blackholeDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.dials.Add(1)
	d.mu.Lock()
	d.order = append(d.order, addr)
	d.mu.Unlock()
	if d.dead[addr] {
		<-ctx.Done()
		d.cancelled.Add(1)
		return nil, ctx.Err()
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
}

func TestBootstrapWithDeadSeeds(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1))
	live := fake.ListenAddrs()[0]
	d := &blackholeDialer{dead: map[string]bool{"10.255.255.1:9092": true, "10.255.255.2:9092": true}}
	cl := newTestClient(t,
		SeedBrokers("10.255.255.1:9092", "10.255.255.2:9092", live),
		Dialer(d.dial),
		DialStagger(50*time.Millisecond),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	brokers, err := cl.Brokers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(brokers) != 1 {
		t.Fatalf("brokers %v", brokers)
	}
	// The seeds are tried in a random order, staggered: the dead ones
	// dialed before the live one were cancelled once it won, not waited
	// out, and nothing was dialed after it.
	dials := int(d.dials.Load())
	if dials < 1 || dials > 3 || d.order[dials-1] != live {
		t.Fatalf("dial order %v: the live seed must be dialed last", d.order)
	}
	if got := int(d.cancelled.Load()); got != dials-1 {
		t.Fatalf("cancelled dead dials = %d, want %d (every dead dial started)", got, dials-1)
	}
}

func TestSeedsNeverDiscarded(t *testing.T) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	addr := fake.ListenAddrs()[0]
	_, portStr, _ := net.SplitHostPort(addr)
	var port int
	fmt.Sscan(portStr, &port)
	fake.Close()

	cl := newTestClient(t, SeedBrokers(addr), RetryTimeout(300*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = cl.Ping(ctx)
	var ue *UnreachableError
	if !errors.As(err, &ue) || !errors.Is(err, ErrUnreachable) {
		t.Fatalf("want UnreachableError, got %v", err)
	}
	if len(ue.Addrs) == 0 || ue.Addrs[0].Addr != addr || !strings.Contains(ue.Addrs[0].Cause(), "refused") {
		t.Fatalf("unreachable error does not name the address and cause: %v", err)
	}

	// The seed comes back on the same port; the same client recovers. One
	// Ping has only RetryTimeout (300 ms), and on a loaded machine the
	// address's dial backoff may outlast it: Ping again until the
	// deadline, which only a client that discarded its seed misses.
	fake2 := newFake(t, kfake.NumBrokers(1), kfake.Ports(port))
	_ = fake2
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	for {
		err := cl.Ping(rctx)
		if err == nil {
			break
		}
		if rctx.Err() != nil {
			t.Fatalf("client did not recover once the seed came back: %v", err)
		}
	}
}

func TestUnreachableListsEveryAddress(t *testing.T) {
	// Two ports nobody listens on.
	var addrs []string
	for i := 0; i < 2; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, ln.Addr().String())
		ln.Close()
	}
	cl := newTestClient(t, SeedBrokers(addrs...), RetryTimeout(200*time.Millisecond))
	err := cl.Ping(context.Background())
	var ue *UnreachableError
	if !errors.As(err, &ue) {
		t.Fatalf("got %v", err)
	}
	for _, a := range addrs {
		if !strings.Contains(err.Error(), a) {
			t.Fatalf("error %q does not name %s", err, a)
		}
	}
	if !IsRetriable(ErrUnreachable) {
		t.Fatal("unreachable must be retriable")
	}
}

func TestContextCancellationIsPrompt(t *testing.T) {
	d := &blackholeDialer{dead: map[string]bool{"10.255.255.1:9092": true}}
	cl := newTestClient(t, SeedBrokers("10.255.255.1:9092"), Dialer(d.dial))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cl.Ping(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("want deadline exceeded, got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Ping did not return after its context ended")
	}
	// Admin calls too.
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel2() }()
	if _, err := cl.Admin().ListTopics(ctx2); !errors.Is(err, context.Canceled) {
		t.Fatalf("ListTopics: want canceled, got %v", err)
	}
}

func TestSingleFlightMetadata(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1))
	// The first Metadata request is held until every lookup has begun:
	// on a loaded machine the 1,000 goroutines start over a second or
	// more, and a lookup beginning after a refresh was sent rightly
	// needs refreshes of its own, so the count measured how slowly the
	// machine started goroutines (4-7 of the 10 allowed at a load of
	// 10-16 on 2 cores) rather than whether lookups share refreshes.
	const n = 1000
	var metadataReqs, begun atomic.Int32
	allBegun := make(chan struct{})
	fake.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if metadataReqs.Add(1) == 1 {
			fake.SleepControl(func() {
				select {
				case <-allBegun:
				case <-time.After(time.Minute): // a hang guard; the count then tells
				}
			})
		}
		return nil, nil, false
	})
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), UnknownTopicRetries(2))
	var wg sync.WaitGroup
	var unknown atomic.Int32
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if begun.Add(1) == n {
				close(allBegun)
			}
			_, err := cl.cl.LookupTopic(context.Background(), "missing")
			if errors.Is(err, ErrUnknownTopic) {
				unknown.Add(1)
			}
		}()
	}
	wg.Wait()
	if unknown.Load() != n {
		t.Fatalf("%d of %d lookups reported ErrUnknownTopic", unknown.Load(), n)
	}
	if got := metadataReqs.Load(); got > 10 {
		t.Fatalf("%d concurrent lookups caused %d metadata requests", n, got)
	}
	t.Logf("%d lookups, %d metadata requests", n, metadataReqs.Load())
}

func TestClusterChangesAreFollowed(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(6, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()[0]))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl.cl.TrackTopics("t")
	if _, err := cl.cl.LookupTopic(ctx, "t"); err != nil {
		t.Fatal(err)
	}

	// Leader moves are followed after a refresh.
	cur := fake.LeaderFor("t", 0)
	target := (cur + 1) % 3
	if err := fake.MoveTopicPartition("t", 0, target); err != nil {
		t.Fatal(err)
	}
	if err := cl.cl.RefreshMetadata(ctx); err != nil {
		t.Fatal(err)
	}
	pm, err := cl.cl.Leader(ctx, "t", 0)
	if err != nil || pm.Leader != target {
		t.Fatalf("leader %d (%v), want %d", pm.Leader, err, target)
	}

	// A removed broker disappears from the brokers and its partitions
	// move; requests keep working.
	if err := fake.RemoveNode(2); err != nil {
		t.Fatal(err)
	}
	brokers, err := cl.Brokers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range brokers {
		if b.NodeID == 2 {
			t.Fatalf("removed broker still listed: %v", brokers)
		}
	}
	for p := int32(0); p < 6; p++ {
		pm, err := cl.cl.Leader(ctx, "t", p)
		if err != nil || pm.Leader == 2 {
			t.Fatalf("partition %d leader %d err %v", p, pm.Leader, err)
		}
		if _, err := cl.cl.Request(ctx, pm.Leader, cluster.ClassOther, kmsg.NewPtrMetadataRequest()); err != nil {
			t.Fatalf("request to leader %d: %v", pm.Leader, err)
		}
	}

	// An added broker appears and can be talked to.
	id, _, err := fake.AddNode(-1, 0)
	if err != nil {
		t.Fatal(err)
	}
	brokers, err = cl.Brokers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, b := range brokers {
		found = found || b.NodeID == id
	}
	if !found {
		t.Fatalf("added broker %d not listed: %v", id, brokers)
	}
	if _, err := cl.cl.Request(ctx, id, cluster.ClassOther, kmsg.NewPtrApiVersionsRequest()); err != nil {
		t.Fatalf("request to new broker: %v", err)
	}
}

// A fetch long-poll in flight must not delay control traffic to the same
// broker: they use different connections.
func TestFetchDoesNotDelayControl(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tm, err := cl.cl.LookupTopic(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	leader := tm.Partitions[0].Leader

	fetch := kmsg.NewPtrFetchRequest()
	fetch.MaxWaitMillis = 5000
	fetch.MinBytes = 1
	fetch.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	ft.TopicID = tm.ID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition = 0
	fp.FetchOffset = 0
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)

	fetchDone := make(chan error, 1)
	go func() {
		_, err := cl.cl.Request(ctx, leader, cluster.ClassFetch, fetch)
		fetchDone <- err
	}()
	// Wait until the fetch is on the wire.
	fc, err := cl.cl.Conn(ctx, leader, cluster.ClassFetch)
	if err != nil {
		t.Fatal(err)
	}
	for fc.Inflight() == 0 {
		time.Sleep(time.Millisecond)
	}
	for i := 0; i < 5; i++ {
		if _, err := cl.cl.Request(ctx, leader, cluster.ClassOther, kmsg.NewPtrMetadataRequest()); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-fetchDone:
		t.Fatalf("fetch finished (%v) before the control requests; the long poll did not block anything", err)
	default:
	}
	if err := <-fetchDone; err != nil {
		t.Fatalf("fetch: %v", err)
	}
}

type recordingHooks struct {
	connects, requests, disconnects atomic.Int32
	mu                              sync.Mutex
	connectErrs                     []string
}

func (h *recordingHooks) OnBrokerConnect(_ BrokerInfo, _ time.Duration, err error) {
	h.connects.Add(1)
	if err != nil {
		h.mu.Lock()
		h.connectErrs = append(h.connectErrs, err.Error())
		h.mu.Unlock()
	}
}

func (h *recordingHooks) errs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.connectErrs...)
}
func (h *recordingHooks) OnBrokerDisconnect(BrokerInfo, error) { h.disconnects.Add(1) }
func (h *recordingHooks) OnBrokerRequest(b BrokerInfo, e RequestEvent) {
	if e.APIName != "" && e.BytesWritten > 0 {
		h.requests.Add(1)
	}
}

func TestHooksAndIdleClose(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1))
	h := &recordingHooks{}
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), WithHooks(h), ConnIdleTimeout(100*time.Millisecond))
	if err := cl.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h.connects.Load() == 0 || h.requests.Load() == 0 {
		t.Fatalf("hooks saw %d connects, %d requests", h.connects.Load(), h.requests.Load())
	}
	deadline := time.Now().Add(30 * time.Second)
	for h.disconnects.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("idle connection was never closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The client reconnects transparently.
	if err := cl.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestInvalidConfig(t *testing.T) {
	for name, opts := range map[string][]Option{
		"no seeds":       nil,
		"bad seed":       {SeedBrokers("nohostport")},
		"port too large": {SeedBrokers("a:1", "kafka:99999")},
		"empty port":     {SeedBrokers("kafka:")},
		"named port":     {SeedBrokers("kafka:http")},
		"port zero":      {SeedBrokers("kafka:0")},
		"no host":        {SeedBrokers(":9092")},
		"empty seed":     {SeedBrokers("")},
		"bad ipv6":       {SeedBrokers("::1:9092")},
		"zero timeout":   {SeedBrokers("a:1"), RequestTimeout(0)},
		"backoff":        {SeedBrokers("a:1"), RetryBackoff(time.Second, time.Millisecond)},
		"tiny responses": {SeedBrokers("a:1"), MaxResponseSize(10)},
	} {
		if _, err := NewClient(opts...); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: want ErrInvalidConfig, got %v", name, err)
		}
	}
}

func TestClosedClient(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1))
	cl, err := NewClient(SeedBrokers(fake.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if err := cl.Ping(context.Background()); !errors.Is(err, ErrClientClosed) {
		t.Fatalf("want ErrClientClosed, got %v", err)
	}
	cl.Close() // idempotent
}

// slowConn delays its first read: a live broker whose handshake is slow
// (TLS, SASL, a loaded broker).
type slowConn struct {
	net.Conn
	once  sync.Once
	delay time.Duration
}

func (c *slowConn) Read(p []byte) (int, error) {
	c.once.Do(func() { time.Sleep(c.delay) })
	return c.Conn.Read(p)
}

// A live seed that connects at once but is slow to finish its handshake
// holds the race for the handshake grace, not just the short stagger: the
// other seeds are not dialed while it proceeds. (With a 100 ms handshake,
// a 25 ms stagger alone would dial all three.)
func TestSlowHandshakeDialsOneSeed(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3))
	var dials atomic.Int32
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		var nd net.Dialer
		c, err := nd.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &slowConn{Conn: c, delay: 100 * time.Millisecond}, nil
	}
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), Dialer(dial), DialStagger(25*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d dials for one slow but live handshake, want 1", n)
	}
}
