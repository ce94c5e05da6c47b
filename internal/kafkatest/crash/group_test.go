package crash_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// Scenario (b): a group of 3 members consumes a topic a feeder writes to
// while the leaders (and the group's coordinator, whose __consumer_offsets
// partition is led by one of the nodes) die: every acknowledged record is
// handled (lost=0); a record handled twice is one whose commit had not
// happened (the auto-commit interval, 1 s) when its partition moved, and
// is counted and printed. The same topic is consumed by a classic group
// and by a KIP-848 (consumer protocol) group.

const (
	groupMembers        = 3
	groupCommitInterval = time.Second
)

type groupLoad struct {
	proto   string
	group   string
	topic   string
	led     *ledger
	members []*riffle.Consumer
	mu      sync.Mutex
	errs    []string // group and partition errors, for the log
}

func startGroup(t *testing.T, proto riffle.GroupProtocol, protoName, topic string) *groupLoad {
	t.Helper()
	l := &groupLoad{proto: protoName, group: name(t, "g-"+protoName), topic: topic, led: newLedger()}
	for i := range groupMembers {
		c, err := riffle.NewConsumer(client(t),
			riffle.ConsumerGroup(l.group), riffle.SubscribeTopics(topic), riffle.WithGroupProtocol(proto),
			riffle.OffsetReset(riffle.ResetEarliest), riffle.AutoCommitInterval(groupCommitInterval),
			riffle.HandleRecord(func(_ context.Context, r *riffle.Record) error {
				l.led.add(r)
				return nil
			}),
			riffle.OnGroupError(func(err error) { l.note(fmt.Sprintf("member %d: group error: %v", i, err)) }),
			riffle.OnPartitionError(func(e *riffle.PartitionError) { l.note(fmt.Sprintf("member %d: %v", i, e)) }))
		must(t, "member", err)
		l.members = append(l.members, c)
	}
	t.Cleanup(func() { l.close(context.Background()) })
	return l
}

func (l *groupLoad) name() string                            { return "group " + l.proto }
func (l *groupLoad) topics() []string                        { return []string{l.topic} }
func (l *groupLoad) progress() map[riffle.TopicPartition]int { return l.led.progress() }

func (l *groupLoad) note(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, s)
}

func (l *groupLoad) close(ctx context.Context) []error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var errs []error
	l.mu.Lock()
	ms := l.members
	l.members = nil
	l.mu.Unlock()
	for _, c := range ms {
		if _, err := c.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// finish waits until every value of want was handled, closes the members
// and checks.
func (l *groupLoad) finish(t *testing.T, want []string, kills []kill) {
	err := eventually(2*time.Minute, func() error {
		if n, some := l.led.missing(want); n > 0 {
			return fmt.Errorf("%d of %d not handled, e.g. %v", n, len(want), some)
		}
		return nil
	})
	for _, err := range l.close(context.Background()) {
		t.Errorf("closing a member: %v", err)
	}
	lost, _ := l.led.missing(want)
	dupValues, extra := l.led.dups()
	l.mu.Lock()
	for i, e := range l.errs {
		if i == 10 {
			t.Logf("... %d group and partition errors in all", len(l.errs))
			break
		}
		t.Log(e)
	}
	l.mu.Unlock()
	hit := hitCount(kills, l.topic)
	stalls := stallsOf(kills, l.name())
	t.Logf("accounting group %s: members=%d acked=%d handled=%d lost=%d dup=%d (extra handlings %d, commit interval %v) stalled=%d kills=%d",
		l.proto, groupMembers, len(want), l.led.calls.Load(), lost, dupValues, extra, groupCommitInterval, len(stalls), hit)
	for _, s := range stalls {
		t.Errorf("stalled while a node was down: %s", s)
	}
	if err != nil {
		t.Errorf("every acknowledged record handled: %v", err)
	}
	if hit < 3 {
		t.Errorf("%d kills took leaders of %s, want 3", hit, l.topic)
	}
}
