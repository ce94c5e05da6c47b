package crash_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// Scenario (d): 3 share consumers (KIP-932) of one share group consume a
// topic a feeder writes to while the leaders die. The partition leader
// keeps a share partition's in-flight state (acquired records, delivery
// counts) in memory and persists it through the share coordinator
// (__share_group_state) as acknowledgements arrive: a leader that dies
// loses acknowledgements not yet persisted, and the new leader delivers
// those records again, possibly at the delivery count they had. So a
// record may be accepted more than once; none may be lost: every
// acknowledged record is accepted at least once, and the group's lag ends
// at 0 on every partition. Records accepted more than once are counted
// and printed, as are redeliveries (delivery count above 1).

const shareMembers = 3

type shareLoad struct {
	group   string
	topic   string
	members []*riffle.ShareConsumer
	mu      sync.Mutex
	counts  map[string][]int16 // value: the delivery counts it was handled with
	byPart  map[riffle.TopicPartition]int
	calls   int
	closed  bool
}

func startShare(t *testing.T, admin *riffle.Client, topic string) *shareLoad {
	t.Helper()
	l := &shareLoad{group: name(t, "sg"), topic: topic, counts: map[string][]int16{}, byPart: map[riffle.TopicPartition]int{}}
	ctx := timeout(t, time.Minute)
	v := "earliest"
	res, err := admin.Admin().AlterGroupConfigs(ctx, riffle.GroupConfigChange{Group: l.group, Name: "share.auto.offset.reset", Value: &v})
	must(t, "share.auto.offset.reset", err)
	must(t, "share.auto.offset.reset", res.Err())
	for range shareMembers {
		sc, err := riffle.NewShareConsumer(client(t), riffle.ShareGroup(l.group), riffle.SubscribeTopics(topic),
			riffle.HandleRecord(func(_ context.Context, r *riffle.Record) error {
				l.mu.Lock()
				defer l.mu.Unlock()
				l.calls++
				l.byPart[riffle.TopicPartition{Topic: r.Topic, Partition: r.Partition}]++
				l.counts[string(r.Value)] = append(l.counts[string(r.Value)], r.DeliveryCount)
				return nil
			}))
		must(t, "share consumer", err)
		l.members = append(l.members, sc)
	}
	t.Cleanup(func() { l.close() })
	return l
}

func (l *shareLoad) name() string     { return "share" }
func (l *shareLoad) topics() []string { return []string{l.topic} }

func (l *shareLoad) progress() map[riffle.TopicPartition]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.byPart)
}

func (l *shareLoad) close() []error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, sc := range l.members {
		if err := sc.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func (l *shareLoad) missing(want []string) (int, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	var some []string
	for _, v := range want {
		if len(l.counts[v]) == 0 {
			n++
			if len(some) < 5 {
				some = append(some, v)
			}
		}
	}
	return n, some
}

// finish waits until every value of want was handled and the group's lag
// is 0 on every partition, closes the members and checks.
func (l *shareLoad) finish(t *testing.T, admin *riffle.Client, want []string, kills []kill) {
	ctx := timeout(t, 3*time.Minute)
	handledErr := eventually(2*time.Minute, func() error {
		if n, some := l.missing(want); n > 0 {
			return fmt.Errorf("%d of %d not handled, e.g. %v", n, len(want), some)
		}
		return nil
	})
	lagErr := eventually(time.Minute, func() error {
		offs, err := admin.Admin().DescribeShareGroupOffsets(ctx, l.group, l.topic)
		if err != nil {
			return err
		}
		if len(offs) == 0 {
			return fmt.Errorf("no offsets")
		}
		for _, o := range offs {
			if o.Err != nil || o.Lag != 0 {
				return fmt.Errorf("%v", o)
			}
		}
		return nil
	})
	var st riffle.ShareStats
	for _, sc := range l.members {
		s := sc.Stats()
		st.Accepted += s.Accepted
		st.Redelivered += s.Redelivered
		st.Expired += s.Expired
		st.AckErrors += s.AckErrors
	}
	for _, err := range l.close() {
		t.Errorf("closing a share consumer: %v", err)
	}
	lost, _ := l.missing(want)
	l.mu.Lock()
	twice, sameCount := 0, 0
	var shown []string
	for _, v := range sortedKeys(l.counts) {
		cs := l.counts[v]
		if len(cs) < 2 {
			continue
		}
		twice++
		// Handled again at a delivery count it had been handled with:
		// the broker lost the first acquisition (a crash), rather
		// than delivering it again after a release or a lock's end.
		sorted := slices.Clone(cs)
		slices.Sort(sorted)
		if len(slices.Compact(sorted)) < len(cs) {
			sameCount++
		}
		if len(shown) < 10 {
			shown = append(shown, fmt.Sprintf("%s%v", v, cs))
		}
	}
	calls := l.calls
	l.mu.Unlock()
	hit := hitCount(kills, l.topic)
	stalls := stallsOf(kills, l.name())
	t.Logf("accounting share: members=%d acked=%d handled=%d lost=%d accepted_more_than_once=%d (at a delivery count seen before: %d) redelivered=%d expired=%d ack_errors=%d stalled=%d kills=%d",
		shareMembers, len(want), calls, lost, twice, sameCount, st.Redelivered, st.Expired, st.AckErrors, len(stalls), hit)
	for _, s := range stalls {
		t.Errorf("stalled while a node was down: %s", s)
	}
	if len(shown) > 0 {
		t.Logf("share: accepted more than once (value[delivery counts]), first %d: %v", len(shown), shown)
	}
	if handledErr != nil {
		t.Errorf("every acknowledged record handled: %v", handledErr)
	}
	if lagErr != nil {
		t.Errorf("the share group's lag at 0: %v", lagErr)
	}
	if hit < 3 {
		t.Errorf("%d kills took leaders of %s, want 3", hit, l.topic)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
