package riffle

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeReporter returns a fixed payload and remembers the subscriptions it
// was called with.
type fakeReporter struct {
	payload []byte
	calls   atomic.Int32
	mu      sync.Mutex
	subs    []TelemetrySubscription
}

func (r *fakeReporter) CollectTelemetry(_ context.Context, sub TelemetrySubscription) ([]byte, error) {
	r.calls.Add(1)
	r.mu.Lock()
	r.subs = append(r.subs, sub)
	r.mu.Unlock()
	return r.payload, nil
}

// telemetryLog records the telemetry requests a kfake cluster received,
// for tests to wait on one by one.
type telemetryLog struct {
	mu     sync.Mutex
	reqs   []kmsg.Request
	signal chan struct{}
}

func newTelemetryLog() *telemetryLog { return &telemetryLog{signal: make(chan struct{}, 1)} }

func (l *telemetryLog) add(r kmsg.Request) {
	l.mu.Lock()
	l.reqs = append(l.reqs, r)
	l.mu.Unlock()
	select {
	case l.signal <- struct{}{}:
	default:
	}
}

// at waits for the i-th request (from 0). The deadline only keeps a broken
// client from hanging the test run; nothing is timed.
func (l *telemetryLog) at(t *testing.T, i int) kmsg.Request {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		if i < len(l.reqs) {
			r := l.reqs[i]
			l.mu.Unlock()
			return r
		}
		l.mu.Unlock()
		select {
		case <-l.signal:
		case <-deadline.C:
			t.Fatalf("telemetry request %d never came", i)
		}
	}
}

func (l *telemetryLog) all() []kmsg.Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]kmsg.Request(nil), l.reqs...)
}

// The loop subscribes, pushes the reporter's payload compressed with the
// broker's first accepted codec at the interval, fetches the subscription
// again (same instance id) on UNKNOWN_SUBSCRIPTION_ID, and pushes once
// with Terminating set on Close, as the last request. The requests, in
// order: subscribe (sub 1, 5 ms), push, push (answered
// UNKNOWN_SUBSCRIPTION_ID), subscribe (sub 2), push (UNKNOWN again),
// subscribe (sub 3, one hour), and on Close the terminating push.
func TestTelemetryPush(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1))
	instance := [16]byte{7, 1, 4}
	log := newTelemetryLog()
	var subs, pushes atomic.Int32
	fake.ControlKey(int16(kmsg.GetTelemetrySubscriptions), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		log.add(kreq)
		req := kreq.(*kmsg.GetTelemetrySubscriptionsRequest)
		resp := req.ResponseKind().(*kmsg.GetTelemetrySubscriptionsResponse)
		resp.ClientInstanceID = instance
		resp.SubscriptionID = subs.Add(1)
		resp.AcceptedCompressionTypes = []int8{9, 4, 0} // 9 is unknown: skipped
		resp.PushIntervalMillis = 5
		if resp.SubscriptionID == 3 {
			resp.PushIntervalMillis = 3_600_000 // the loop waits for Close
		}
		resp.TelemetryMaxBytes = 1 << 20
		resp.DeltaTemporality = true
		resp.RequestedMetrics = []string{"org.apache.kafka.producer."}
		return resp, nil, true
	})
	fake.ControlKey(int16(kmsg.PushTelemetry), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		log.add(kreq)
		req := kreq.(*kmsg.PushTelemetryRequest)
		resp := req.ResponseKind().(*kmsg.PushTelemetryResponse)
		if n := pushes.Add(1); n == 2 || n == 3 || req.SubscriptionID != subs.Load() {
			resp.ErrorCode = kafkaerr.UnknownSubscriptionID
		}
		return resp, nil, true
	})

	rep := &fakeReporter{payload: []byte("otlp metrics data")}
	taken := make(chan int32, 10)
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), TelemetryPush(rep),
		func(c *clientConfig) {
			c.telemetrySubscribed = func(s TelemetrySubscription) { taken <- s.SubscriptionID }
		})
	if err := cl.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}

	// subscribe, push (ok), push (unknown id), subscribe again, push.
	first := log.at(t, 0).(*kmsg.GetTelemetrySubscriptionsRequest)
	if first.ClientInstanceID != ([16]byte{}) {
		t.Errorf("first subscription request carries instance id %x", first.ClientInstanceID)
	}
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	for i := 1; i <= 2; i++ {
		p, ok := log.at(t, i).(*kmsg.PushTelemetryRequest)
		if !ok {
			t.Fatalf("request %d: %T, want a push", i, log.at(t, i))
		}
		if p.ClientInstanceID != instance || p.SubscriptionID != 1 || p.Terminating || p.CompressionType != 4 {
			t.Fatalf("push %d: instance %x sub %d terminating %v compression %d", i, p.ClientInstanceID, p.SubscriptionID, p.Terminating, p.CompressionType)
		}
		got, err := dec.DecodeAll(p.Metrics, nil)
		if err != nil || string(got) != "otlp metrics data" {
			t.Fatalf("push %d payload: %q, %v", i, got, err)
		}
	}
	again, ok := log.at(t, 3).(*kmsg.GetTelemetrySubscriptionsRequest)
	if !ok || again.ClientInstanceID != instance {
		t.Fatalf("after UNKNOWN_SUBSCRIPTION_ID: %+v, want a subscription request with the instance id", log.at(t, 3))
	}
	if p, ok := log.at(t, 4).(*kmsg.PushTelemetryRequest); !ok || p.SubscriptionID != 2 {
		t.Fatalf("push after re-subscribing: %+v", log.at(t, 4))
	}
	if _, ok := log.at(t, 5).(*kmsg.GetTelemetrySubscriptionsRequest); !ok {
		t.Fatalf("request 5: %+v, want a subscription request", log.at(t, 5))
	}
	for id := range taken {
		if id == 3 {
			break // the loop holds subscription 3 and waits an hour
		}
	}

	cl.Close()
	all := log.all()
	if len(all) != 7 {
		t.Fatalf("%d telemetry requests, want 7", len(all))
	}
	if p := all[6].(*kmsg.PushTelemetryRequest); p.SubscriptionID != 3 {
		t.Errorf("terminating push for subscription %d, want 3", p.SubscriptionID)
	}
	var terminating int
	for _, r := range all {
		if p, ok := r.(*kmsg.PushTelemetryRequest); ok && p.Terminating {
			terminating++
		}
	}
	last, ok := all[len(all)-1].(*kmsg.PushTelemetryRequest)
	if !ok || !last.Terminating || terminating != 1 {
		t.Fatalf("after Close: %d terminating pushes, last request %+v", terminating, all[len(all)-1])
	}
	rep.mu.Lock()
	defer rep.mu.Unlock()
	lastSub := rep.subs[len(rep.subs)-1]
	if !lastSub.Terminating || !lastSub.DeltaTemporality || lastSub.PushInterval != time.Hour ||
		!lastSub.Requested("org.apache.kafka.producer.record.send.total") || lastSub.Requested("org.apache.kafka.consumer.x") {
		t.Errorf("last subscription given to the reporter: %+v", lastSub)
	}
}

// A broker that answers UNSUPPORTED_VERSION ends the loop; a client that
// never connects never sends telemetry nor collects.
func TestTelemetryStops(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1))
	var asked atomic.Int32
	fake.ControlKey(int16(kmsg.GetTelemetrySubscriptions), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		asked.Add(1)
		resp := kreq.ResponseKind().(*kmsg.GetTelemetrySubscriptionsResponse)
		resp.ErrorCode = kafkaerr.UnsupportedVersion
		return resp, nil, true
	})
	rep := &fakeReporter{}
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), TelemetryPush(rep))
	if err := cl.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() { cl.telemetry.life.Wait(); close(stopped) }() // returns once the loop gave up by itself
	select {
	case <-stopped:
	case <-time.After(30 * time.Second): // only keeps a broken loop from hanging the run
		t.Fatal("the telemetry loop goes on after UNSUPPORTED_VERSION")
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("%d subscription requests, want 1", n)
	}
	cl.Close()
	if n := rep.calls.Load(); n != 0 {
		t.Errorf("reporter called %d times", n)
	}

	idle := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), TelemetryPush(rep))
	idle.Close()
	if n := asked.Load(); n != 1 || rep.calls.Load() != 0 {
		t.Errorf("a client that never connected sent %d subscription requests", n-1)
	}
}

func TestTelemetryHelpers(t *testing.T) {
	for _, rnd := range []float64{0, 0.5, 0.999} {
		d := firstPushDelay(10*time.Second, rnd)
		if d < 5*time.Second || d >= 15*time.Second {
			t.Errorf("firstPushDelay(10s, %v) = %v", rnd, d)
		}
	}
	all := TelemetrySubscription{RequestedMetrics: []string{""}}
	none := TelemetrySubscription{}
	if !all.Requested("anything") || none.Requested("anything") {
		t.Error("Requested: [\"\"] must match everything, [] nothing")
	}
	for _, err := range []error{ErrUnsupported, kafkaerr.ForCode(kafkaerr.UnsupportedVersion), ErrClientClosed} {
		if !telemetryPermanent(err) {
			t.Errorf("%v should end telemetry", err)
		}
	}
	if telemetryPermanent(errors.New("x")) || telemetryPermanent(kafkaerr.ForCode(kafkaerr.UnknownSubscriptionID)) {
		t.Error("transient errors end telemetry")
	}
}

// The loop sends every telemetry request to one broker until a request to
// it fails; then it fetches the subscription from another broker and
// stays there, the terminating push included. A broker that answered with
// an error is still connected and idle, the least loaded: the loop must
// pass it over all the same.
func TestTelemetryMovesOnFailure(t *testing.T) {
	for _, dropConn := range []bool{false, true} {
		name := "broker error"
		if dropConn {
			name = "connection dropped"
		}
		t.Run(name, func(t *testing.T) { testTelemetryMoves(t, dropConn) })
	}
}

func testTelemetryMoves(t *testing.T, dropConn bool) {
	fake := newFake(t, kfake.NumBrokers(3))
	type sent struct {
		push, terminating, failed bool
		node                      int32
	}
	var (
		mu      sync.Mutex
		reqs    []sent
		failing = true // the second push fails
		pushes  int
	)
	moved := make(chan struct{}) // two pushes answered after the failure
	var after int
	fake.ControlKey(int16(kmsg.GetTelemetrySubscriptions), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		mu.Lock()
		reqs = append(reqs, sent{node: fake.CurrentNode()})
		mu.Unlock()
		resp := kreq.ResponseKind().(*kmsg.GetTelemetrySubscriptionsResponse)
		resp.ClientInstanceID = [16]byte{1}
		resp.SubscriptionID = 1
		resp.PushIntervalMillis = 5
		resp.RequestedMetrics = []string{""}
		return resp, nil, true
	})
	fake.ControlKey(int16(kmsg.PushTelemetry), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		req := kreq.(*kmsg.PushTelemetryRequest)
		mu.Lock()
		defer mu.Unlock()
		s := sent{push: true, terminating: req.Terminating, node: fake.CurrentNode()}
		if pushes++; pushes == 2 && failing {
			failing, s.failed = false, true
			reqs = append(reqs, s)
			if dropConn {
				return nil, errors.New("connection dropped"), true // kfake closes the connection
			}
			resp := req.ResponseKind().(*kmsg.PushTelemetryResponse)
			resp.ErrorCode = kafkaerr.UnknownServerError
			return resp, nil, true
		}
		reqs = append(reqs, s)
		if !failing && !req.Terminating {
			if after++; after == 2 {
				close(moved)
			}
		}
		return req.ResponseKind(), nil, true
	})
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), TelemetryPush(&fakeReporter{payload: []byte("m")}))
	if err := cl.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-moved:
	case <-time.After(30 * time.Second): // only keeps a broken loop from hanging the run
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("no two pushes after the failure: %+v", reqs)
	}
	cl.Close()

	mu.Lock()
	defer mu.Unlock()
	fail := -1
	for i, r := range reqs {
		if r.failed {
			fail = i
		}
	}
	if fail != 2 || reqs[0].push || !reqs[1].push {
		t.Fatalf("requests %+v: want subscribe, push, failed push, ...", reqs)
	}
	first := reqs[0].node
	for _, r := range reqs[:fail+1] {
		if r.node != first {
			t.Fatalf("requests %+v: the loop left node %d before a failure", reqs, first)
		}
	}
	next := reqs[fail+1]
	if next.push || next.node == first {
		t.Fatalf("requests %+v: after the failure on node %d, want a subscription request to another node", reqs, first)
	}
	for _, r := range reqs[fail+1:] {
		if r.node != next.node {
			t.Fatalf("requests %+v: the loop left node %d without a failure", reqs, next.node)
		}
	}
	if last := reqs[len(reqs)-1]; !last.push || !last.terminating {
		t.Errorf("requests %+v: the last is no terminating push", reqs)
	}
}
