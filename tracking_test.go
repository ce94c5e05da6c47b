package riffle

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// metadataTopics records the topics of every Metadata request a kfake
// cluster answers.
type metadataTopics struct {
	mu    sync.Mutex
	asked [][]string
}

func logMetadataTopics(fake *kfake.Cluster) *metadataTopics {
	l := &metadataTopics{}
	fake.ControlKey(int16(kmsg.Metadata), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		topics := []string{}
		for _, rt := range kr.(*kmsg.MetadataRequest).Topics {
			if rt.Topic != nil {
				topics = append(topics, *rt.Topic)
			}
		}
		slices.Sort(topics)
		l.mu.Lock()
		l.asked = append(l.asked, topics)
		l.mu.Unlock()
		return nil, nil, false
	})
	return l
}

func (l *metadataTopics) last() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.asked) == 0 {
		return nil
	}
	return l.asked[len(l.asked)-1]
}

// refreshTwice refreshes the metadata twice and returns the topics the
// last refresh asked about: after two refreshes, a topic nobody tracks
// is gone even if it was looked up just before.
func refreshTwice(t *testing.T, cl *Client, l *metadataTopics) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 2 {
		if err := cl.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return l.last()
}

func wantTracked(t *testing.T, cl *Client, want map[string]int) {
	t.Helper()
	if got := cl.cl.TrackedTopics(); !maps.Equal(got, want) {
		t.Fatalf("tracked topics %v, want %v", got, want)
	}
}

// TestConsumerUnassignStopsRefreshingTopic checks that a consumer tracks
// a topic once per assigned partition and that, once its partitions of a
// topic are unassigned, metadata refreshes no longer ask about it.
func TestConsumerUnassignStopsRefreshingTopic(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "a", "b"))
	meta := logMetadataTopics(fake)
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	cs, err := NewConsumer(cl, HandleRecord(func(context.Context, *Record) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	assignAll(t, cs, "a", 2, AtEarliest())
	assignAll(t, cs, "b", 2, AtEarliest())
	wantTracked(t, cl, map[string]int{"a": 2, "b": 2})
	if got := refreshTwice(t, cl, meta); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("refresh asked about %v, want [a b]", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cs.Unassign(ctx, TopicPartition{"b", 0}); err != nil {
		t.Fatal(err)
	}
	wantTracked(t, cl, map[string]int{"a": 2, "b": 1})
	if _, err := cs.Unassign(ctx, TopicPartition{"b", 1}); err != nil {
		t.Fatal(err)
	}
	wantTracked(t, cl, map[string]int{"a": 2})
	if got := refreshTwice(t, cl, meta); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("refresh after unassigning b asked about %v, want [a]", got)
	}
	closeConsumer(t, cs)
	wantTracked(t, cl, map[string]int{})
	if got := refreshTwice(t, cl, meta); len(got) != 0 {
		t.Fatalf("refresh after Close asked about %v, want nothing", got)
	}
}

// TestProducerCloseUntracks checks that a producer tracks each of its
// topics once, however many goroutines race to use a topic first, and
// releases them on Close.
func TestProducerCloseUntracks(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "a", "b"))
	meta := logMetadataTopics(fake)
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	p, err := NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			topic := []string{"a", "b"}[i%2]
			if err := p.ProduceSync(ctx, &Record{Topic: topic, Value: []byte("v")}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	// A lookup of a missing topic takes no reference.
	if err := p.ProduceSync(ctx, &Record{Topic: "missing", Value: []byte("v")}); err == nil {
		t.Fatal("produced to a missing topic")
	}
	wantTracked(t, cl, map[string]int{"a": 1, "b": 1})
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	wantTracked(t, cl, map[string]int{})
	if got := refreshTwice(t, cl, meta); len(got) != 0 {
		t.Fatalf("refresh after the producer closed asked about %v, want nothing", got)
	}
}

// TestGroupMemberTracksSubscription checks that a group member tracks its
// subscription (and its partitions, through the consumer) and releases
// everything when it leaves.
func TestGroupMemberTracksSubscription(t *testing.T) {
	for _, proto := range []GroupProtocol{GroupProtocolClassic, GroupProtocolConsumer} {
		t.Run([]string{"classic", "consumer"}[proto], func(t *testing.T) {
			fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "a", "b"))
			cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), MetadataMaxAge(200*time.Millisecond))
			cs, err := NewConsumer(cl, ConsumerGroup("g"), SubscribeTopics("a"), WithGroupProtocol(proto),
				HeartbeatInterval(100*time.Millisecond), HandleRecord(func(context.Context, *Record) error { return nil }))
			if err != nil {
				t.Fatal(err)
			}
			waitUntil(t, 20*time.Second, func() bool { return len(cs.Stats().Partitions) == 2 }, func() string { return statsString(cs) })
			// The subscription's reference and one per partition.
			wantTracked(t, cl, map[string]int{"a": 3})
			closeConsumer(t, cs)
			wantTracked(t, cl, map[string]int{})
		})
	}
}

// TestTrackSubscription checks the member's tracked set against a
// sequence of subscriptions: new topics tracked once, removed ones
// released, unchanged ones untouched.
func TestTrackSubscription(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	m := &member{cs: &Consumer{c: cl, cl: cl.cl}}
	cl.cl.TrackTopics("b") // someone else's reference survives
	for i, step := range []struct {
		sub  []string
		want map[string]int
	}{
		{[]string{"a"}, map[string]int{"a": 1, "b": 1}},
		{[]string{"a", "a"}, map[string]int{"a": 1, "b": 1}},
		{[]string{"a", "b", "c"}, map[string]int{"a": 1, "b": 2, "c": 1}},
		{[]string{"c"}, map[string]int{"b": 1, "c": 1}},
		{nil, map[string]int{"b": 1}},
	} {
		m.trackSubscription(step.sub)
		if got := cl.cl.TrackedTopics(); !maps.Equal(got, step.want) {
			t.Fatalf("step %d (%v): tracked %v, want %v", i, step.sub, got, step.want)
		}
	}
}

// TestGroupPatternTracksMatchingTopics checks that a classic member
// subscribed by pattern follows the matching topics as they come and go:
// a new topic is tracked (its subscription reference and its partitions'),
// a deleted one released.
func TestGroupPatternTracksMatchingTopics(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "pt-a"), kfake.SeedTopics(1, "other"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), MetadataMaxAge(200*time.Millisecond))
	cs, err := NewConsumer(cl, ConsumerGroup("g-pt"), SubscribePattern(regexp.MustCompile("pt-.*")),
		HeartbeatInterval(100*time.Millisecond), HandleRecord(func(context.Context, *Record) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	waitTracked := func(want map[string]int) {
		t.Helper()
		waitUntil(t, 20*time.Second, func() bool { return maps.Equal(cl.cl.TrackedTopics(), want) },
			func() string { return fmt.Sprintf("tracked %v, want %v", cl.cl.TrackedTopics(), want) })
	}
	waitTracked(map[string]int{"pt-a": 3})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := cl.Admin()
	if _, err := adm.CreateTopics(ctx, TopicSpec{Name: "pt-b", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	waitTracked(map[string]int{"pt-a": 3, "pt-b": 2})
	if _, err := adm.DeleteTopics(ctx, "pt-a"); err != nil {
		t.Fatal(err)
	}
	waitTracked(map[string]int{"pt-b": 2})
	closeConsumer(t, cs)
	wantTracked(t, cl, map[string]int{})
}
