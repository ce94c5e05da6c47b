package cluster

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/backoff"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// metadataLog records the topics of every Metadata request a kfake cluster
// answers.
type metadataLog struct {
	mu    sync.Mutex
	asked [][]string
}

func (l *metadataLog) last() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.asked) == 0 {
		return nil
	}
	return l.asked[len(l.asked)-1]
}

// newKfake starts a kfake cluster with topics a, b and c (2 partitions
// each) that logs metadata requests.
func newKfake(t *testing.T, opts ...kfake.Opt) (*kfake.Cluster, *metadataLog) {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(2, "a", "b", "c")}, opts...)
	fake, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	log := &metadataLog{}
	fake.ControlKey(int16(kmsg.Metadata), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		topics := []string{}
		for _, rt := range kr.(*kmsg.MetadataRequest).Topics {
			if rt.Topic != nil {
				topics = append(topics, *rt.Topic)
			}
		}
		log.mu.Lock()
		log.asked = append(log.asked, topics)
		log.mu.Unlock()
		return nil, nil, false
	})
	return fake, log
}

func newTestCluster(t *testing.T, cfg Config) *Cluster {
	t.Helper()
	if cfg.RetryBackoff.Base == 0 {
		cfg.RetryBackoff = backoff.Policy{Base: 10 * time.Millisecond, Max: 50 * time.Millisecond}
	}
	if cfg.ReconnectBackoff.Base == 0 {
		cfg.ReconnectBackoff = backoff.Policy{Base: 10 * time.Millisecond, Max: 50 * time.Millisecond}
	}
	if cfg.MetadataMinAge == 0 {
		cfg.MetadataMinAge = 10 * time.Millisecond
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestTrackedTopics checks that tracked topics are refreshed while anyone
// holds them and dropped from refreshes and the snapshot after the last
// release, and that one-off lookups never join the refresh set.
func TestTrackedTopics(t *testing.T) {
	fake, log := newKfake(t)
	c := newTestCluster(t, Config{Seeds: fake.ListenAddrs()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	refresh := func() []string {
		t.Helper()
		if _, err := c.RefreshOnce(ctx); err != nil {
			t.Fatal(err)
		}
		return log.last()
	}

	c.TrackTopics("a", "b")
	c.TrackTopics("a")
	if got := refresh(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("refresh asked %v, want [a b]", got)
	}
	c.UntrackTopics("a", "b")
	if got := refresh(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after releasing b: refresh asked %v, want [a]", got)
	}
	if s := c.Snapshot(); s.Topics["b"] != nil || s.Topics["a"] == nil {
		t.Fatalf("snapshot topics %v, want a only", s.Topics)
	}

	// One-off lookups: fetched for the caller, never refreshed for life.
	if _, err := c.LookupTopic(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if got := log.last(); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("lookup asked %v, want [a c]", got)
	}
	if _, err := c.Leader(ctx, "c", 1); err != nil { // served from the snapshot: in use
		t.Fatal(err)
	}
	if got := refresh(); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("refresh after a use asked %v, want [a c]", got)
	}
	if got := refresh(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("refresh after no use asked %v, want [a]", got)
	}
	if c.Snapshot().Topics["c"] != nil {
		t.Fatal("unused one-off topic still in the snapshot")
	}

	c.UntrackTopics("a")
	if got := refresh(); len(got) != 0 {
		t.Fatalf("nothing tracked: refresh asked %v", got)
	}
	if n := len(c.Snapshot().Topics); n != 0 {
		t.Fatalf("nothing tracked: snapshot holds %d topics", n)
	}
}

// A lookup of a topic the last refresh did not ask about does not wait out
// MetadataMinAge (a producer's first record to a topic waited 100 ms after
// the client's first refresh); asking again about the same topics does.
func TestNewTopicSkipsMinAge(t *testing.T) {
	fake, log := newKfake(t)
	c := newTestCluster(t, Config{Seeds: fake.ListenAddrs(), MetadataMinAge: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.LookupTopic(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.LookupTopic(ctx, "b"); err != nil {
		t.Fatalf("a new topic waited for the minimum age: %v", err)
	}
	if got := log.last(); !slices.Contains(got, "b") {
		t.Fatalf("last metadata request asked %v", got)
	}
	// The same topics again: the minimum age holds.
	short, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	if _, err := c.RefreshOnce(short); err == nil {
		t.Fatal("a refresh of known topics did not wait for the minimum age")
	}
}
