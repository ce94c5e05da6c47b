package fetch

import (
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/kafkaerr"
)

func TestReadReplica(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const ttl = time.Minute
	brokers := func(ns ...int32) func(int32) bool {
		return func(n int32) bool {
			for _, b := range ns {
				if b == n {
					return true
				}
			}
			return false
		}
	}
	// The partition as the leader named replica 2 under: leader 1, epoch 5.
	base := Placement{Leader: 1, LeaderEpoch: 5, Replicas: []int32{1, 2, 3}, Known: brokers(1, 2, 3)}
	type step func(r *ReadReplica) (got, want any)
	named := func(node int32, at time.Time) step {
		return func(r *ReadReplica) (any, any) { return r.Named(node, 1, 5, at, ttl), nil }
	}
	target := func(pl Placement, at time.Time, want int32) step {
		return func(r *ReadReplica) (any, any) { return r.Target(pl, at), want }
	}
	failed := func(node int32, want bool) step {
		return func(r *ReadReplica) (any, any) { return r.Failed(node), want }
	}
	with := func(f func(*Placement)) Placement {
		pl := base
		f(&pl)
		return pl
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"no preference: the leader", []step{target(base, t0, 1)}},
		{"no preference, leader unknown", []step{target(with(func(p *Placement) { p.Leader = -1 }), t0, -1)}},
		{"named replica is used", []step{named(2, t0), target(base, t0, 2), target(base, t0.Add(ttl-1), 2)}},
		{"negative name changes nothing", []step{named(2, t0), named(-1, t0), target(base, t0, 2)}},
		{"naming the leader clears", []step{named(2, t0), named(1, t0), target(base, t0, 1)}},
		{"expires after the ttl: back to the leader", []step{
			named(2, t0), target(base, t0.Add(ttl), 1),
			// and stays there until named again
			target(base, t0, 1), named(2, t0.Add(ttl)), target(base, t0.Add(ttl), 2),
		}},
		{"replica left the replica set", []step{named(2, t0),
			target(with(func(p *Placement) { p.Replicas = []int32{1, 3} }), t0, 1),
			target(base, t0, 1)}}, // cleared: not restored by metadata
		{"replica offline", []step{named(2, t0), target(with(func(p *Placement) { p.Offline = []int32{2} }), t0, 1)}},
		{"replica's broker gone", []step{named(2, t0), target(with(func(p *Placement) { p.Known = brokers(1, 3) }), t0, 1)}},
		{"no broker known", []step{named(2, t0), target(with(func(p *Placement) { p.Known = nil }), t0, 1)}},
		{"leader moved to the replica", []step{named(2, t0), target(with(func(p *Placement) { p.Leader, p.LeaderEpoch = 2, 6 }), t0, 2)}},
		{"leader moved elsewhere", []step{named(2, t0), target(with(func(p *Placement) { p.Leader, p.LeaderEpoch = 3, 6 }), t0, 3)}},
		{"new leader epoch, same leader", []step{named(2, t0), target(with(func(p *Placement) { p.LeaderEpoch = 6 }), t0, 1)}},
		{"leader unknown", []step{named(2, t0), target(with(func(p *Placement) { p.Leader = -1 }), t0, -1)}},
		{"replica failed", []step{named(2, t0), failed(2, true), target(base, t0, 1), failed(2, false)}},
		{"another node failed", []step{named(2, t0), failed(1, false), failed(3, false), target(base, t0, 2)}},
		{"failure without preference", []step{failed(2, false), target(base, t0, 1)}},
		{"renamed to another replica", []step{named(2, t0), named(3, t0), target(base, t0, 3)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r ReadReplica
			for i, s := range tc.steps {
				if got, want := s(&r); want != nil && got != want {
					t.Fatalf("step %d: got %v, want %v", i, got, want)
				}
			}
		})
	}
}

func TestReadReplicaNamedReportsChange(t *testing.T) {
	t0 := time.Unix(0, 0)
	var r ReadReplica
	for i, c := range []struct {
		node int32
		want bool
	}{{-1, false}, {1, false}, {2, true}, {2, false}, {3, true}, {-1, false}, {1, true}, {1, false}} {
		if got := r.Named(c.node, 1, 0, t0, time.Second); got != c.want {
			t.Fatalf("%d: Named(%d) = %v, want %v", i, c.node, got, c.want)
		}
	}
	if _, ok := r.Node(); ok {
		t.Fatal("the leader was named last: no preference expected")
	}
	r.Named(2, 1, 0, t0, time.Second)
	if n, ok := r.Node(); !ok || n != 2 {
		t.Fatalf("Node = %d, %v", n, ok)
	}
	if u, ok := r.Until(); !ok || !u.Equal(t0.Add(time.Second)) {
		t.Fatalf("Until = %v, %v", u, ok)
	}
}

func TestReplicaError(t *testing.T) {
	for _, c := range []struct {
		code int16
		want bool
	}{
		{0, false},
		{kafkaerr.OffsetNotAvailable, true},
		{kafkaerr.NotLeaderForPartition, true},
		{kafkaerr.ReplicaNotAvailable, true},
		{kafkaerr.FencedLeaderEpoch, true},
		{kafkaerr.UnknownLeaderEpoch, true},
		{kafkaerr.OffsetOutOfRange, true},
		{kafkaerr.UnknownTopicOrPartition, true},
		{kafkaerr.KafkaStorageError, true},
		{29, false}, // TOPIC_AUTHORIZATION_FAILED: the leader would say the same
		{2, true},   // CORRUPT_MESSAGE: retriable; the leader may have a sound copy
		{76, false}, // UNSUPPORTED_COMPRESSION_TYPE
	} {
		if got := ReplicaError(c.code); got != c.want {
			t.Errorf("ReplicaError(%d) = %v, want %v", c.code, got, c.want)
		}
	}
}
