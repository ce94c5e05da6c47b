package integration_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// groupProtocols are the two group protocols, with the type the broker
// describes them with.
var groupProtocols = []struct {
	name string
	p    riffle.GroupProtocol
	typ  string
}{
	{"classic", riffle.GroupProtocolClassic, "classic"},
	{"consumer", riffle.GroupProtocolConsumer, "consumer"},
}

// groupFixture is a topic, a group and a producer into the topic, with a
// ledger of the records the group's members handled.
type groupFixture struct {
	t      *testing.T
	admin  *riffle.Client
	topic  string
	group  string
	parts  int
	ctx    context.Context
	p      *riffle.Producer
	total  int
	ledger *groupLedger
}

func newGroupFixture(t *testing.T, parts int) *groupFixture {
	t.Helper()
	admin := client(t)
	f := &groupFixture{t: t, admin: admin, topic: topic(t, admin, int32(parts), nil), group: name(t, "g"), parts: parts,
		ctx: timeout(t, 5*time.Minute), ledger: &groupLedger{seen: map[string]int{}}}
	p, err := riffle.NewProducer(admin, riffle.WithPartitioner(riffle.ManualPartitioner())) // Record.Partition
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	f.p = p
	return f
}

// produce writes n records, keyed by their number, spread over the
// partitions.
func (f *groupFixture) produce(n int) {
	f.t.Helper()
	var recs []*riffle.Record
	for i := range n {
		recs = append(recs, &riffle.Record{Topic: f.topic, Partition: int32((f.total + i) % f.parts), Key: []byte(strconv.Itoa(f.total + i)), Value: []byte("v")})
	}
	if err := f.p.ProduceSync(f.ctx, recs...); err != nil {
		f.t.Fatal(err)
	}
	f.total += n
}

// handledAll waits until every record produced was handled by a member.
func (f *groupFixture) handledAll(what string) {
	f.t.Helper()
	eventually(f.t, 2*time.Minute, what, func() error {
		if n := f.ledger.distinct(); n < f.total {
			return fmt.Errorf("%d of %d records handled", n, f.total)
		}
		return nil
	})
}

// stable waits until the broker describes the group Stable with n members
// owning every partition between them, and returns each member's
// partitions by member id (and by instance id, for static members).
func (f *groupFixture) stable(typ string, n int) map[string][]int32 {
	f.t.Helper()
	var out map[string][]int32
	eventually(f.t, 2*time.Minute, fmt.Sprintf("%d members owning the %d partitions", n, f.parts), func() error {
		ds, err := f.admin.Admin().DescribeGroups(f.ctx, f.group)
		if err != nil {
			return err
		}
		d := ds[0]
		if d.Err != nil {
			return d.Err
		}
		out = map[string][]int32{}
		owned := 0
		for _, m := range d.Members {
			var ps []int32
			for _, tp := range m.Assigned {
				if tp.Topic == f.topic {
					ps = append(ps, tp.Partition)
				}
			}
			slices.Sort(ps)
			owned += len(ps)
			out[m.MemberID] = ps
			if m.InstanceID != "" {
				out["instance:"+m.InstanceID] = ps
			}
		}
		if d.Type != typ || d.State != "Stable" || len(d.Members) != n || owned != f.parts {
			return fmt.Errorf("type %s state %s, %d members owning %d partitions: %v", d.Type, d.State, len(d.Members), owned, out)
		}
		return nil
	})
	return out
}

// callbacks counts a member's rebalance callbacks.
type callbacks struct{ assigned, revoked, lost atomic.Int64 }

func (f *groupFixture) member(proto riffle.GroupProtocol, cl *riffle.Client, cb *callbacks, opts ...riffle.ConsumerOption) *riffle.Consumer {
	f.t.Helper()
	t := f.t
	all := append([]riffle.ConsumerOption{
		riffle.ConsumerGroup(f.group), riffle.SubscribeTopics(f.topic),
		riffle.WithGroupProtocol(proto), riffle.OffsetReset(riffle.ResetEarliest),
		riffle.HandleRecord(f.ledger.handler),
		riffle.OnPartitionsAssigned(func(_ context.Context, tps []riffle.TopicPartition) { cb.assigned.Add(1) }),
		riffle.OnPartitionsRevoked(func(_ context.Context, tps []riffle.TopicPartition) { cb.revoked.Add(1) }),
		riffle.OnPartitionsLost(func(_ context.Context, tps []riffle.TopicPartition) { cb.lost.Add(1) }),
		riffle.OnGroupError(func(err error) { t.Logf("group error: %v", err) }),
	}, opts...)
	c, err := riffle.NewConsumer(cl, all...)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	t.Cleanup(func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c.Close(ctx)
		})
	})
	return c
}

// committedAtEnd checks that the group's committed offsets are the ends
// of the topic's partitions.
func (f *groupFixture) committedAtEnd() {
	f.t.Helper()
	end := endOffsets(f.t, f.admin, f.topic)
	eventually(f.t, time.Minute, "the group's offsets at the end of the topic", func() error {
		committed, err := f.admin.Admin().FetchOffsets(f.ctx, f.group)
		if err != nil {
			return err
		}
		for part, off := range end {
			if got := committed[riffle.TopicPartition{Topic: f.topic, Partition: part}].Offset; got != off {
				return fmt.Errorf("%s[%d]: committed %d, end %d", f.topic, part, got, off)
			}
		}
		return nil
	})
}

// Static membership (group.instance.id, KIP-345 for the classic protocol,
// KIP-848's static members): member a closes (a static member does not
// leave: classic sends no LeaveGroup, KIP-848 leaves with epoch -2) and a
// new instance with the same InstanceID, on a new client, starts within
// the session timeout. It gets a's partitions back, and member b sees no
// rebalance: no callback, the same generation (member epoch). Nothing is
// handled twice (a committed when it closed), and every record is handled.
func TestGroupStaticMemberRestart(t *testing.T) {
	for _, proto := range groupProtocols {
		t.Run(proto.name, func(t *testing.T) {
			need(t)
			if !supports848(t, proto.p) {
				return
			}
			f := newGroupFixture(t, 6)
			// Long enough that the restart is well within it.
			static := func(id string) []riffle.ConsumerOption {
				opts := []riffle.ConsumerOption{riffle.InstanceID(id)}
				if proto.p == riffle.GroupProtocolClassic {
					opts = append(opts, riffle.SessionTimeout(30*time.Second))
				}
				return opts
			}
			if proto.p == riffle.GroupProtocolConsumer {
				ch := "30000"
				res, err := f.admin.Admin().AlterGroupConfigs(f.ctx, riffle.GroupConfigChange{Group: f.group, Name: "consumer.session.timeout.ms", Value: &ch})
				if err != nil || res[0].Err != nil {
					t.Fatalf("AlterGroupConfigs: %v %v", res, err)
				}
				groupConfigIs(t, f.admin, f.group, "consumer.session.timeout.ms", ch)
			}
			f.produce(120)
			var cbA, cbB, cbA2 callbacks
			a := f.member(proto.p, client(t), &cbA, static("a")...)
			b := f.member(proto.p, client(t), &cbB, static("b")...)
			before := f.stable(proto.typ, 2)
			f.handledAll("members a and b")
			// The broker's view (stable) can be ahead of b's: b may not
			// have reconciled its partitions yet (KIP-848: a got all six
			// first and revokes three; b's OnPartitionsAssigned comes
			// after). Take b's baseline once b holds them.
			eventually(t, time.Minute, "b's partitions assigned in b", func() error {
				if cbB.assigned.Load() == 0 || len(b.Stats().Partitions) == 0 {
					return fmt.Errorf("b: %d assigned callbacks, %d partitions", cbB.assigned.Load(), len(b.Stats().Partitions))
				}
				return nil
			})
			genB := b.GroupMetadata().GenerationID
			assignedB, revokedB := cbB.assigned.Load(), cbB.revoked.Load()
			if _, err := a.Close(f.ctx); err != nil {
				t.Fatalf("a.Close: %v", err)
			}
			f.produce(120)
			a2 := f.member(proto.p, client(t), &cbA2, static("a")...)
			after := f.stable(proto.typ, 2)
			if !slices.Equal(after["instance:a"], before["instance:a"]) || !slices.Equal(after["instance:b"], before["instance:b"]) {
				t.Errorf("assignment changed across a's restart: before a %v b %v, after a %v b %v",
					before["instance:a"], before["instance:b"], after["instance:a"], after["instance:b"])
			}
			f.handledAll("members a (restarted) and b")
			if g := b.GroupMetadata().GenerationID; g != genB {
				t.Errorf("b's generation went from %d to %d: a rebalance", genB, g)
			}
			if n, m := cbB.assigned.Load(), cbB.revoked.Load(); n != assignedB || m != revokedB || cbB.lost.Load() != 0 {
				t.Errorf("b's callbacks across a's restart: assigned %d -> %d, revoked %d -> %d, lost %d", assignedB, n, revokedB, m, cbB.lost.Load())
			}
			t.Logf("a before %v, after %v; b %v at generation %d; a2 generation %d", before["instance:a"], after["instance:a"], after["instance:b"], genB, a2.GroupMetadata().GenerationID)
			for _, c := range []*riffle.Consumer{a2, b} {
				if _, err := c.Close(f.ctx); err != nil {
					t.Errorf("Close: %v", err)
				}
			}
			f.ledger.mu.Lock()
			dups := f.ledger.dups
			f.ledger.mu.Unlock()
			if dups > 0 {
				t.Errorf("%d records handled twice across a static restart", dups)
			}
			f.committedAtEnd()
		})
	}
}

// A member whose Client is closed under it (a crash: no LeaveGroup, no
// commit) keeps its partitions until the coordinator's session timeout
// evicts it; then the other member owns every partition, handles the
// records the crashed one never committed, and the group commits to the
// end. Records may be handled twice (at least once), none lost.
func TestGroupMemberCrashSessionTimeout(t *testing.T) {
	for _, proto := range groupProtocols {
		t.Run(proto.name, func(t *testing.T) {
			need(t)
			if !supports848(t, proto.p) {
				return
			}
			f := newGroupFixture(t, 6)
			var opts []riffle.ConsumerOption
			if proto.p == riffle.GroupProtocolClassic {
				opts = append(opts, riffle.SessionTimeout(6*time.Second), riffle.HeartbeatInterval(500*time.Millisecond))
			} else {
				// The group's session timeout, a group config for
				// KIP-848 (the harness's minimum is 3 s).
				v := "6000"
				res, err := f.admin.Admin().AlterGroupConfigs(f.ctx, riffle.GroupConfigChange{Group: f.group, Name: "consumer.session.timeout.ms", Value: &v})
				if err != nil || res[0].Err != nil {
					t.Fatalf("AlterGroupConfigs: %v %v", res, err)
				}
				groupConfigIs(t, f.admin, f.group, "consumer.session.timeout.ms", v)
			}
			f.produce(300)
			var cbA, cbB callbacks
			clA := client(t)
			f.member(proto.p, clA, &cbA, append(opts, riffle.AutoCommitInterval(time.Hour))...) // commits nothing before the crash
			b := f.member(proto.p, client(t), &cbB, opts...)
			two := f.stable(proto.typ, 2)
			f.handledAll("members a and b")
			// Records a handles with the assignment settled: no
			// revoke commits them.
			f.produce(300)
			f.handledAll("members a and b, settled")
			clA.Close() // the crash
			crashed := time.Now()
			f.produce(300)
			one := f.stable(proto.typ, 1)
			t.Logf("2 members %v; after the crash (%v) 1 member %v", two, time.Since(crashed).Round(100*time.Millisecond), one)
			f.handledAll("member b after a crashed")
			if _, err := b.Close(f.ctx); err != nil {
				t.Fatalf("b.Close: %v", err)
			}
			f.committedAtEnd()
			f.ledger.mu.Lock()
			dups := f.ledger.dups
			f.ledger.mu.Unlock()
			t.Logf("%d records, %d handled twice (those a handled after the assignment settled)", f.total, dups)
			if dups == 0 {
				t.Errorf("no record handled twice: the crashed member committed its progress")
			}
		})
	}
}

// groupConfigIs waits until DescribeGroupConfigs reads the group's config
// key back as value, set on the group (Source GROUP_CONFIG). Kafka applies
// a group config change when each broker replays the metadata log, a
// moment after AlterGroupConfigs returns.
func groupConfigIs(t *testing.T, cl *riffle.Client, group, key, value string) {
	t.Helper()
	eventually(t, 30*time.Second, "group "+group+" config "+key+"="+value, func() error {
		gc, err := cl.Admin().DescribeGroupConfigs(timeout(t, 10*time.Second), group)
		if err != nil {
			return err
		}
		if gc[0].Err != nil {
			return gc[0].Err
		}
		i := slices.IndexFunc(gc[0].Configs, func(c riffle.ConfigEntry) bool { return c.Name == key })
		if i < 0 {
			return fmt.Errorf("no %s", key)
		}
		c := gc[0].Configs[i]
		if c.Value == nil || *c.Value != value || c.Source != "GROUP_CONFIG" {
			v := "<nil>"
			if c.Value != nil {
				v = *c.Value
			}
			return fmt.Errorf("%s=%s (%s)", key, v, c.Source)
		}
		return nil
	})
}
