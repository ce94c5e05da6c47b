package cluster

import (
	"context"
	"testing"
	"time"
)

// TestFetchClass: a class from NewFetchClass has its own connection per
// broker (not the shared fetch one, not another caller's), Loads counts
// it, and ReleaseClass closes it while the shared one stays open.
func TestFetchClass(t *testing.T) {
	fake, _ := newKfake(t)
	c := newTestCluster(t, Config{Seeds: fake.ListenAddrs()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.RefreshMetadata(ctx); err != nil {
		t.Fatal(err)
	}
	node := c.Snapshot().Brokers[0].NodeID
	a, b := c.NewFetchClass(), c.NewFetchClass()
	if a == b || a == ClassFetch || a.String() == b.String() {
		t.Fatalf("classes not distinct: %v %v", a, b)
	}
	shared, err := c.Conn(ctx, node, ClassFetch)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := c.Conn(ctx, node, a)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := c.Conn(ctx, node, b)
	if err != nil {
		t.Fatal(err)
	}
	if ca == shared || cb == shared || ca == cb {
		t.Fatal("a class of its own shares a connection")
	}
	if again, _ := c.Conn(ctx, node, a); again != ca {
		t.Fatal("a second Conn of the class dialed again")
	}
	if c.OpenConn(node, a) != ca {
		t.Fatal("OpenConn does not find the class's connection")
	}
	c.ReleaseClass(a)
	select {
	case <-ca.Done():
	case <-ctx.Done():
		t.Fatal("ReleaseClass did not close the class's connection")
	}
	if c.OpenConn(node, a) != nil {
		t.Fatal("a released class still has a connection")
	}
	if shared.Err() != nil || cb.Err() != nil {
		t.Fatal("ReleaseClass closed another class's connection")
	}
}
