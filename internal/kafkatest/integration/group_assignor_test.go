package integration_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// kip848Member starts a KIP-848 member of group on a client of its own,
// closed when the test ends.
func kip848Member(t *testing.T, group string, opts ...riffle.ConsumerOption) *riffle.Consumer {
	t.Helper()
	all := append([]riffle.ConsumerOption{riffle.ConsumerGroup(group), riffle.WithGroupProtocol(riffle.GroupProtocolConsumer),
		riffle.OffsetReset(riffle.ResetEarliest),
		riffle.HandleRecord(func(context.Context, *riffle.Record) error { return nil }),
		riffle.OnGroupError(func(err error) { t.Logf("group error: %v", err) })}, opts...)
	c, err := riffle.NewConsumer(client(t), all...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c.Close(ctx)
	})
	return c
}

// stableAssignment waits until the broker describes group Stable with n
// members owning want partitions in all, and returns its description.
func stableAssignment(t *testing.T, cl *riffle.Client, group string, n, want int) riffle.GroupDescription {
	t.Helper()
	var d riffle.GroupDescription
	eventually(t, 2*time.Minute, fmt.Sprintf("%d members owning %d partitions", n, want), func() error {
		ds, err := cl.Admin().DescribeGroups(timeout(t, 30*time.Second), group)
		if err != nil {
			return err
		}
		d = ds[0]
		if d.Err != nil {
			return d.Err
		}
		owned := 0
		for _, m := range d.Members {
			owned += len(m.Assigned)
		}
		if d.State != "Stable" || len(d.Members) != n || owned != want {
			return fmt.Errorf("state %s, %d members owning %d partitions: %+v", d.State, len(d.Members), owned, d.Members)
		}
		return nil
	})
	return d
}

// byTopic is a member's partitions by topic, sorted.
func byTopic(tps []riffle.TopicPartition) map[string][]int32 {
	out := map[string][]int32{}
	for _, tp := range tps {
		out[tp.Topic] = append(out[tp.Topic], tp.Partition)
	}
	for _, ps := range out {
		slices.Sort(ps)
	}
	return out
}

// The broker's assignors (GroupRemoteAssignor, KIP-848), two members
// subscribed to two topics of 5 partitions each, as Kafka's
// group coordinator computes them: "range" co-partitions (each member the
// same contiguous partition numbers of both topics, 3 and 2: 6 and 4
// partitions), "uniform" balances the 10 partitions 5 and 5, one whole
// topic to each member. The group describes itself with the assignor's
// name.
func TestGroupServerAssignors(t *testing.T) {
	for _, assignor := range []string{"range", "uniform"} {
		t.Run(assignor, func(t *testing.T) {
			need(t)
			if !supports848(t, riffle.GroupProtocolConsumer) {
				return
			}
			admin := client(t)
			t1, t2 := topic(t, admin, 5, nil), topic(t, admin, 5, nil)
			group := name(t, "g")
			opts := []riffle.ConsumerOption{riffle.SubscribeTopics(t1, t2), riffle.GroupRemoteAssignor(assignor)}
			kip848Member(t, group, opts...)
			kip848Member(t, group, opts...)
			d := stableAssignment(t, admin, group, 2, 10)
			if d.Protocol != assignor {
				t.Errorf("the group's assignor: %q, want %q", d.Protocol, assignor)
			}
			var shapes []string
			for _, m := range d.Members {
				bt := byTopic(m.Assigned)
				shapes = append(shapes, fmt.Sprintf("%v/%v", bt[t1], bt[t2]))
				t.Logf("%s: member %s: %s %v, %s %v", assignor, m.MemberID, t1, bt[t1], t2, bt[t2])
			}
			slices.Sort(shapes)
			switch assignor {
			case "range":
				// Co-partitioned contiguous ranges: [0 1 2] of both
				// topics to one member, [3 4] of both to the other.
				if want := []string{"[0 1 2]/[0 1 2]", "[3 4]/[3 4]"}; !slices.Equal(shapes, want) {
					t.Errorf("range assignment %q, want %q", shapes, want)
				}
			case "uniform":
				// Balanced, 5 and 5, and on Kafka 4.4 (the second
				// member joining a member that owns all 10) each
				// member one whole topic.
				if want := []string{"[0 1 2 3 4]/[]", "[]/[0 1 2 3 4]"}; !slices.Equal(shapes, want) {
					t.Errorf("uniform assignment %q, want %q", shapes, want)
				}
			}
		})
	}
}

// A KIP-848 regex subscription (SubscribePattern: the broker matches the
// regex, SubscribedTopicRegex): a topic created after the member joined
// that matches is assigned to it, and its records are consumed; a topic
// that does not match is not.
func TestGroupRegexSubscriptionNewTopic(t *testing.T) {
	need(t)
	if !supports848(t, riffle.GroupProtocolConsumer) {
		return
	}
	admin := client(t)
	group := name(t, "g")
	prefix := name(t, "re")
	re := regexp.MustCompile("^" + regexp.QuoteMeta(prefix) + `-match-.*`)
	var mu sync.Mutex
	got := map[string]int{}
	kip848Member(t, group, riffle.SubscribePattern(re),
		riffle.HandleRecord(func(_ context.Context, r *riffle.Record) error {
			mu.Lock()
			got[r.Topic]++
			mu.Unlock()
			return nil
		}))
	ctx := timeout(t, 3*time.Minute)
	first := createNamed(t, admin, prefix+"-match-1", 2)
	stableAssignment(t, admin, group, 1, 2)
	// Created after the member joined and got its first assignment.
	second := createNamed(t, admin, prefix+"-match-2", 3)
	other := createNamed(t, admin, prefix+"-other", 1)
	created := time.Now()
	d := stableAssignment(t, admin, group, 1, 5)
	t.Logf("the new matching topic assigned %v after it was created", time.Since(created).Round(100*time.Millisecond))
	bt := byTopic(d.Members[0].Assigned)
	if len(bt[first]) != 2 || len(bt[second]) != 3 || len(bt[other]) != 0 {
		t.Errorf("assignment %v", bt)
	}
	p, err := riffle.NewProducer(admin)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	for _, tp := range []string{first, second, other} {
		if err := p.ProduceSync(ctx, &riffle.Record{Topic: tp, Value: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, time.Minute, "the records of the matching topics consumed", func() error {
		mu.Lock()
		defer mu.Unlock()
		if got[first] != 1 || got[second] != 1 {
			return fmt.Errorf("consumed %v", got)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if got[other] != 0 {
		t.Errorf("consumed %d records of %s, which does not match", got[other], other)
	}
}

// createNamed creates topic tp (deleted when the test ends).
func createNamed(t *testing.T, cl *riffle.Client, tp string, partitions int32) string {
	t.Helper()
	ctx := timeout(t, time.Minute)
	res, err := cl.Admin().CreateTopics(ctx, riffle.TopicSpec{Name: tp, Partitions: partitions, ReplicationFactor: rf()})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = cl.Admin().DeleteTopics(ctx, tp)
	})
	return tp
}
