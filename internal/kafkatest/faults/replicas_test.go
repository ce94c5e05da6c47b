package faults_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// produceRequests counts a client's Produce requests answered by node.
type produceRequests struct {
	node int32
	n    atomic.Int64
}

func (p *produceRequests) OnBrokerRequest(b riffle.BrokerInfo, e riffle.RequestEvent) {
	if e.APIKey == 0 && b.NodeID == p.node && e.Err == nil {
		p.n.Add(1)
	}
}

// notEnoughReplicas is NOT_ENOUGH_REPLICAS (19).
var notEnoughReplicas = riffle.KafkaErrorForCode(19)

// A topic of 2 replicas with min.insync.replicas=2 whose follower is down:
// the leader refuses acks=all produces with NOT_ENOUGH_REPLICAS. The
// producer retries them (the error is retriable; the records were not
// written): a record with a short DeliveryTimeout fails with
// ErrDeliveryTimeout naming NOT_ENOUGH_REPLICAS, and records with a long
// one are written once the follower is back in sync. The topic then holds
// exactly those records, once each.
func TestNotEnoughReplicasRetried(t *testing.T) {
	need(t)
	s := steps(t)
	admin := client(t)
	tp, pd := topic(t, admin, 2, map[string]string{"min.insync.replicas": "2"})
	leader := pd.Leader
	follower := pd.Replicas[0]
	if follower == leader {
		follower = pd.Replicas[1]
	}
	s.log("topic %s: replicas %v, leader %d; stopping the follower %d", tp, pd.Replicas, leader, follower)
	if err := env.cluster.Stop(follower); err != nil {
		t.Fatal(err)
	}
	waitPartition(t, admin, tp, time.Minute, func(d riffle.PartitionDetail) error {
		if d.Leader != leader || !slices.Equal(d.ISR, []int32{leader}) {
			return fmt.Errorf("leader %d, ISR %v", d.Leader, d.ISR)
		}
		return nil
	})
	s.log("ISR is [%d]", leader)

	// A short delivery timeout: the record fails, naming why.
	short := client(t, riffle.RequestTimeout(2*time.Second))
	p, err := riffle.NewProducer(short, riffle.DeliveryTimeout(4*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := timeout(t, 2*time.Minute)
	err = p.ProduceSync(ctx, &riffle.Record{Topic: tp, Value: []byte("timed out")})
	s.log("acks=all with a 4s delivery timeout: %v", err)
	if !errors.Is(err, riffle.ErrDeliveryTimeout) {
		t.Errorf("produce while the ISR is below min.insync.replicas: %v, want ErrDeliveryTimeout", err)
	}
	if !errors.Is(err, notEnoughReplicas) || !strings.Contains(fmt.Sprint(err), "NOT_ENOUGH_REPLICAS") {
		t.Errorf("the delivery timeout does not name NOT_ENOUGH_REPLICAS: %v", err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// A long one: retried until the follower is back.
	reqs := &produceRequests{node: leader}
	long := client(t, riffle.WithHooks(reqs))
	p, err = riffle.NewProducer(long, riffle.DeliveryTimeout(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	const n = 50
	var mu sync.Mutex
	var errs []error
	var done atomic.Int32
	for i := range n {
		p.Produce(ctx, &riffle.Record{Topic: tp, Value: fmt.Appendf(nil, "r%02d", i)}, func(_ *riffle.Record, err error) {
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			done.Add(1)
		})
	}
	eventually(t, time.Minute, "the leader refusing the produce again and again", func() error {
		if got := reqs.n.Load(); got < 5 {
			return fmt.Errorf("%d produce requests answered", got)
		}
		if d := done.Load(); d != 0 {
			return fmt.Errorf("%d records have an outcome while the follower is down", d)
		}
		return nil
	})
	s.log("%d produce requests refused, no record done; restarting the follower %d", reqs.n.Load(), follower)
	if err := env.cluster.Restart(ctx, follower); err != nil {
		t.Fatal(err)
	}
	s.log("follower %d is back", follower)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	s.log("%d records written after %d produce requests to the leader", done.Load(), reqs.n.Load())
	mu.Lock()
	for _, err := range errs {
		t.Errorf("produce: %v", err)
	}
	mu.Unlock()
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("r%02d", i)
	}
	if got := readAll(t, admin, tp); !slices.Equal(got, want) {
		t.Errorf("the topic holds %q, want %q", got, want)
	}
}
