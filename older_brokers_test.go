package riffle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Older brokers: kfake capped at the API versions of an older Kafka
// release (kfake.MaxVersions), for the protocol levels no broker jar of the
// harness runs. docs/real-kafka.md ("Which Kafka versions are covered")
// lists which are covered how.

// groupErrs collects what OnGroupError reports.
type groupErrs struct {
	mu   sync.Mutex
	errs []error
	got  chan struct{} // closed at the first
}

func newGroupErrs() *groupErrs { return &groupErrs{got: make(chan struct{})} }

func (g *groupErrs) add(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.errs = append(g.errs, err)
	if len(g.errs) == 1 {
		close(g.got)
	}
}

func (g *groupErrs) all() []error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]error(nil), g.errs...)
}

// wantUnsupported checks that err is the typed error naming the KIP and
// the Kafka release needed.
func wantUnsupported(t *testing.T, err error, api, kip, kafka string) {
	t.Helper()
	var ue *UnsupportedError
	if !errors.Is(err, ErrUnsupported) || !errors.As(err, &ue) {
		t.Fatalf("error %v: want an *UnsupportedError matching ErrUnsupported", err)
	}
	if ue.API != api || ue.KIP != kip || ue.Kafka != kafka {
		t.Fatalf("error %+v: want API %s, %s, Kafka %s", ue, api, kip, kafka)
	}
	for _, s := range []string{api, kip, "Kafka " + kafka + "+"} {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("error %q does not say %q", err, s)
		}
	}
}

// quiet waits d and fails if more than want errors were reported: a
// failure that ends the membership must not repeat (no retry loop).
func (g *groupErrs) quiet(t *testing.T, d time.Duration, want int) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if n := len(g.all()); n > want {
			t.Fatalf("%d group errors, want %d (retrying?): %v", n, want, g.all())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A KIP-848 member on brokers without ConsumerGroupHeartbeat (Kafka 3.6:
// not in ApiVersions) fails at once with the typed error, reported once,
// kept in Stats, and Close returns at once.
func TestGroupProtocolConsumerWithoutKIP848(t *testing.T) {
	fake := newFake(t, kfake.MaxVersions(kversion.V3_6_0()), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	ge := newGroupErrs()
	began := time.Now()
	cs, err := NewConsumer(cl, ConsumerGroup("g"), SubscribeTopics("t"), WithGroupProtocol(GroupProtocolConsumer),
		OnGroupError(ge.add), HandleRecord(func(context.Context, *Record) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ge.got:
	case <-time.After(10 * time.Second):
		t.Fatal("no group error 10 s after NewConsumer: the member keeps retrying")
	}
	t.Logf("failed after %v: %v", time.Since(began).Round(time.Millisecond), ge.all()[0])
	err = ge.all()[0]
	if !errors.Is(err, ErrGroup) {
		t.Fatalf("%v: want ErrGroup", err)
	}
	wantUnsupported(t, err, "ConsumerGroupHeartbeat", "KIP-848", "4.0")
	if st := cs.Stats().GroupErr; st == nil || st.Error() != err.Error() {
		t.Fatalf("Stats().GroupErr %v, want %v", st, err)
	}
	ge.quiet(t, time.Second, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	closed := time.Now()
	if _, err := cs.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(closed); took > 2*time.Second {
		t.Fatalf("Close took %v", took)
	}
}

// Kafka 3.7 to 3.9 list ConsumerGroupHeartbeat but answer
// UNSUPPORTED_VERSION while the consumer protocol is not enabled (3.9's
// default): the member fails at once, sends one heartbeat, and stops.
func TestGroupProtocolConsumerAnsweredUnsupported(t *testing.T) {
	fake := newFake(t, kfake.MaxVersions(kversion.V3_9_0()), kfake.SeedTopics(1, "t"))
	var heartbeats atomic.Int64
	fake.ControlKey(int16(kmsg.ConsumerGroupHeartbeat), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		heartbeats.Add(1)
		resp := kr.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = 35 // UNSUPPORTED_VERSION
		return resp, nil, true
	})
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	ge := newGroupErrs()
	cs, err := NewConsumer(cl, ConsumerGroup("g"), SubscribeTopics("t"), WithGroupProtocol(GroupProtocolConsumer),
		OnGroupError(ge.add), HandleRecord(func(context.Context, *Record) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ge.got:
	case <-time.After(10 * time.Second):
		t.Fatal("no group error 10 s after NewConsumer")
	}
	err = ge.all()[0]
	wantUnsupported(t, err, "ConsumerGroupHeartbeat", "KIP-848", "4.0")
	if !strings.Contains(err.Error(), "UNSUPPORTED_VERSION") {
		t.Fatalf("%v: does not say what the broker answered", err)
	}
	ge.quiet(t, time.Second, 1)
	if n := heartbeats.Load(); n != 1 {
		t.Fatalf("%d heartbeats sent, want 1", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cs.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := heartbeats.Load(); n != 1 {
		t.Fatalf("%d heartbeats after Close (a leave of a group never joined?), want 1", n)
	}
}

// A share consumer on brokers without share groups (Kafka 3.9) fails at
// once with the typed error naming KIP-932, once, in Stats, and closes at
// once.
func TestShareConsumerWithoutShareGroups(t *testing.T) {
	fake := newFake(t, kfake.MaxVersions(kversion.V3_9_0()), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	ge := newGroupErrs()
	sc, err := NewShareConsumer(cl, ShareGroup("sg"), SubscribeTopics("t"), OnGroupError(ge.add),
		HandleRecord(func(context.Context, *Record) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ge.got:
	case <-time.After(10 * time.Second):
		t.Fatal("no group error 10 s after NewShareConsumer: the member keeps retrying")
	}
	err = ge.all()[0]
	if !errors.Is(err, ErrGroup) {
		t.Fatalf("%v: want ErrGroup", err)
	}
	wantUnsupported(t, err, "ShareGroupHeartbeat", "KIP-932", "4.2")
	if st := sc.Stats().Err; st == nil || st.Error() != err.Error() {
		t.Fatalf("Stats().Err %v, want %v", st, err)
	}
	ge.quiet(t, time.Second, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	closed := time.Now()
	if err := sc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(closed); took > 2*time.Second {
		t.Fatalf("Close took %v", took)
	}
}

// Admin calls of APIs an older broker lacks fail at once with the typed
// error naming the KIP and the release, without a retry.
func TestAdminAPIsMissingOnOlderBrokers(t *testing.T) {
	fake := newFake(t, kfake.MaxVersions(kversion.V3_9_0()), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := cl.Admin()
	began := time.Now()
	_, err := adm.DescribeShareGroupOffsets(ctx, "sg", "t")
	wantUnsupported(t, err, "DescribeShareGroupOffsets", "KIP-932", "4.2")
	if took := time.Since(began); took > 2*time.Second {
		t.Fatalf("took %v: retried?", took)
	}
	old := newTestClient(t, SeedBrokers(newFake(t, kfake.MaxVersions(kversion.V2_7_0())).ListenAddrs()...))
	ds, err := old.Admin().DescribeTransactions(ctx, "x")
	if err == nil && len(ds) == 1 {
		err = ds[0].Err // per id
	}
	wantUnsupported(t, err, "DescribeTransactions", "KIP-664", "3.0")
}

// On Kafka 3.7 to 3.9 without the consumer protocol, ConsumerGroupDescribe
// answers UNSUPPORTED_VERSION for every group: a classic group is still
// described, from DescribeGroups.
func TestDescribeGroupsConsumerProtocolOff(t *testing.T) {
	fake := newFake(t, kfake.MaxVersions(kversion.V3_9_0()), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := cl.Admin()
	if err := adm.AlterGroupOffsets(ctx, "g", map[TopicPartition]int64{{"t", 0}: 0}); err != nil {
		t.Fatal(err)
	}
	fake.ControlKey(int16(kmsg.ConsumerGroupDescribe), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		req := kr.(*kmsg.ConsumerGroupDescribeRequest)
		resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
		for _, g := range req.Groups {
			rg := kmsg.NewConsumerGroupDescribeResponseGroup()
			rg.Group, rg.ErrorCode = g, 35 // UNSUPPORTED_VERSION
			resp.Groups = append(resp.Groups, rg)
		}
		return resp, nil, true
	})
	descs, err := adm.DescribeGroups(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if d := descs[0]; d.Err != nil || d.Type != "classic" || d.State != GroupStateEmpty {
		t.Fatalf("classic group described as %+v", d)
	}
}

// Produce, Fetch, a classic group's commits and a transaction at the
// protocol levels of older releases: what Riffle sends at each level is
// what that release's brokers take.
func TestOlderProtocolLevels(t *testing.T) {
	levels := []struct {
		name string
		v    *kversion.Versions
		txn  bool
	}{
		{"3.9", kversion.V3_9_0(), true},
		{"3.0", kversion.V3_0_0(), true},
		{"2.8", kversion.V2_8_0(), true},
		{"2.4", kversion.V2_4_0(), true},
		{"2.1", kversion.V2_1_0(), true},
		{"1.1", kversion.V1_1_0(), true},
		{"0.11", kversion.V0_11_0(), true},
	}
	for _, lv := range levels {
		t.Run(lv.name, func(t *testing.T) {
			fake := newFake(t, kfake.MaxVersions(lv.v), kfake.SeedTopics(2, "t"))
			cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			p, err := NewProducer(cl, WithPartitioner(ManualPartitioner()))
			if err != nil {
				t.Fatal(err)
			}
			var recs []*Record
			for i := range 20 {
				recs = append(recs, &Record{Topic: "t", Partition: int32(i % 2), Key: []byte("k"), Value: []byte(fmt.Sprint(i)),
					Headers: []Header{{Key: "h", Value: []byte("v")}}})
			}
			if err := p.ProduceSync(ctx, recs...); err != nil {
				t.Fatalf("produce: %v", err)
			}
			if err := p.Close(ctx); err != nil {
				t.Fatal(err)
			}
			want := 20
			if lv.txn {
				tp, err := NewProducer(cl, TransactionalID("tx-"+lv.name), WithPartitioner(ManualPartitioner()))
				if err != nil {
					t.Fatal(err)
				}
				if err := tp.InitTransactions(ctx); err != nil {
					t.Fatalf("InitTransactions: %v", err)
				}
				for _, commit := range []bool{true, false} {
					if err := tp.BeginTransaction(); err != nil {
						t.Fatal(err)
					}
					if err := tp.ProduceSync(ctx, &Record{Topic: "t", Partition: 0, Value: []byte(fmt.Sprint("txn-", commit))}); err != nil {
						t.Fatalf("transactional produce: %v", err)
					}
					if commit {
						err = tp.CommitTransaction(ctx)
					} else {
						err = tp.AbortTransaction(ctx)
					}
					if err != nil {
						t.Fatalf("end transaction (commit %v): %v", commit, err)
					}
				}
				if err := tp.Close(ctx); err != nil {
					t.Fatal(err)
				}
				want++ // the committed one
			}
			var mu sync.Mutex
			got := map[string]int{}
			done := make(chan struct{})
			gcl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
			ge := newGroupErrs()
			cs, err := NewConsumer(gcl, ConsumerGroup("g"), SubscribeTopics("t"), OffsetReset(ResetEarliest),
				Isolation(ReadCommitted), OnGroupError(ge.add),
				HandleRecord(func(_ context.Context, r *Record) error {
					mu.Lock()
					defer mu.Unlock()
					got[string(r.Value)]++
					if len(got) == want {
						close(done)
					}
					return nil
				}))
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-done:
			case <-ctx.Done():
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("consumed %d of %d distinct values; group errors %v", len(got), want, ge.all())
			}
			if _, err := cs.Close(ctx); err != nil {
				t.Fatalf("close (final commit): %v", err)
			}
			mu.Lock()
			for v, n := range got {
				if n != 1 || v == "txn-false" {
					t.Errorf("value %q consumed %d times", v, n)
				}
			}
			mu.Unlock()
			offs, err := cl.Admin().FetchOffsets(ctx, "g")
			if err != nil {
				t.Fatal(err)
			}
			if len(offs) != 2 {
				t.Fatalf("committed %v, want both partitions", offs)
			}
		})
	}
}

// Kafka 3.9 has no GROUP config resource (KIP-848's group configs): it
// answers INVALID_REQUEST. Riffle says what the broker lacks.
func TestGroupConfigsOnKafka39(t *testing.T) {
	fake := newFake(t, kfake.MaxVersions(kversion.V3_9_0()), kfake.SeedTopics(1, "t"))
	refuse := func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		switch req := kr.(type) {
		case *kmsg.DescribeConfigsRequest:
			resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
			for _, r := range req.Resources {
				rr := kmsg.NewDescribeConfigsResponseResource()
				rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, 42 // INVALID_REQUEST
				resp.Resources = append(resp.Resources, rr)
			}
			return resp, nil, true
		case *kmsg.IncrementalAlterConfigsRequest:
			resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
			for _, r := range req.Resources {
				rr := kmsg.NewIncrementalAlterConfigsResponseResource()
				rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, 42
				resp.Resources = append(resp.Resources, rr)
			}
			return resp, nil, true
		}
		return nil, nil, false
	}
	fake.ControlKey(int16(kmsg.DescribeConfigs), refuse)
	fake.ControlKey(int16(kmsg.IncrementalAlterConfigs), refuse)
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := cl.Admin()
	if fm, err := adm.DescribeFeatures(ctx); err != nil {
		t.Fatal(err)
	} else if _, ok := fm.Finalized["group.version"]; ok {
		t.Fatalf("kfake at 3.9 finalizes group.version: %v", fm.Finalized)
	}
	gcs, err := adm.DescribeGroupConfigs(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	wantUnsupported(t, gcs[0].Err, "DescribeConfigs", "KIP-848", "4.0")
	if !errors.Is(gcs[0].Err, kafkaerr.ForCode(kafkaerr.InvalidRequest)) {
		t.Fatalf("%v: want the broker's INVALID_REQUEST kept", gcs[0].Err)
	}
	v := "2000"
	res, err := adm.AlterGroupConfigs(ctx, GroupConfigChange{Group: "g", Name: "consumer.heartbeat.interval.ms", Value: &v})
	if err != nil {
		t.Fatal(err)
	}
	wantUnsupported(t, res[0].Err, "IncrementalAlterConfigs", "KIP-848", "4.0")
}
