package ranges_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/ranges"
	"github.com/riffle-go/riffle/rifftest"
)

// A planner of a topic that appears 1.5 s after Next started plans it with
// the client's default UnknownTopicWait (5 s); a count of 4 metadata
// refreshes, the budget before, passes in well under a second.
func TestPlannerWaitsForTopicToAppear(t *testing.T) {
	c, cl := setup(t, rifftest.Brokers(3))
	const late = 1500 * time.Millisecond
	created := make(chan error, 1)
	timer := time.AfterFunc(late, func() { created <- c.Kfake().CreateTopic("late", 2, nil) })
	t.Cleanup(func() {
		if !timer.Stop() {
			<-created
		}
	})
	pl, err := ranges.NewPlanner(cl, "", []string{"late"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := pl.Next(ctx); err != nil {
		t.Fatalf("Next on a topic appearing after %v: %v (after %v)", late, err, time.Since(start))
	}
	if took := time.Since(start); took < late {
		t.Fatalf("planned after %v, before the topic existed (%v)", took, late)
	}
}

// A topic that never appears fails Next after UnknownTopicWait with
// ErrUnknownTopic naming the time waited.
func TestPlannerUnknownTopicFailsAfterWait(t *testing.T) {
	c := rifftest.New(t)
	const wait = 300 * time.Millisecond
	cl, err := riffle.NewClient(riffle.SeedBrokers(c.Addrs()...), riffle.UnknownTopicWait(wait))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pl, err := ranges.NewPlanner(cl, "", []string{"never"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err = pl.Next(ctx)
	took := time.Since(start)
	if !errors.Is(err, riffle.ErrUnknownTopic) || !strings.Contains(err.Error(), "not in the metadata after") {
		t.Fatalf("Next: %v, want ErrUnknownTopic naming the time waited", err)
	}
	if took < wait || took > wait+2*time.Second {
		t.Fatalf("failed after %v, want about UnknownTopicWait %v", took, wait)
	}
}
