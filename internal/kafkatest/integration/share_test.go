package integration_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// A share group (KIP-932) member in explicit mode releases every record the
// first time and rejects every fifth: released records come back with
// delivery count 2 and are accepted, rejected ones never come back, and the
// group's start offset ends past every record.
func TestShareGroupAcceptReleaseReject(t *testing.T) {
	need(t)
	if !supportsShare(t) {
		return
	}
	cl := client(t)
	tp := topic(t, cl, 2, nil)
	group := name(t, "sg")
	ctx := timeout(t, 3*time.Minute)
	shareGroupConfigs(t, cl, group, "share.auto.offset.reset", "earliest")
	const n = 40
	p, err := riffle.NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	var recs []*riffle.Record
	for i := range n {
		recs = append(recs, &riffle.Record{Topic: tp, Key: []byte(strconv.Itoa(i)), Value: []byte(strconv.Itoa(i))})
	}
	if err := p.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	p.Close(ctx)

	var mu sync.Mutex
	deliveries := map[string][]int16{} // value: delivery counts seen
	accepted := map[string]int{}
	done := make(chan struct{})
	var sc *riffle.ShareConsumer
	ready := make(chan struct{})
	sc, err = riffle.NewShareConsumer(client(t),
		riffle.ShareGroup(group), riffle.SubscribeTopics(tp),
		riffle.ShareAcknowledgementMode(riffle.ShareAckExplicit),
		riffle.HandleRecord(func(_ context.Context, r *riffle.Record) error {
			<-ready
			v := string(r.Value)
			i, _ := strconv.Atoi(v)
			mu.Lock()
			deliveries[v] = append(deliveries[v], r.DeliveryCount)
			mu.Unlock()
			ack := riffle.AckAccept
			switch {
			case r.DeliveryCount == 1 && i%5 == 0:
				ack = riffle.AckReject
			case r.DeliveryCount == 1:
				ack = riffle.AckRelease
			}
			if err := sc.Acknowledge(r, ack); err != nil {
				t.Errorf("Acknowledge %s %v: %v", v, ack, err)
			}
			if ack == riffle.AckAccept {
				mu.Lock()
				accepted[v]++
				if len(accepted) == n-n/5 {
					close(done)
				}
				mu.Unlock()
			}
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	close(ready)
	waitFor(t, 2*time.Minute, "every record but the rejected accepted", done)

	// Every record is acknowledged or archived: the group's lag is 0 in
	// every partition. (Kafka 4.4 reports the persisted start offset,
	// which stays where it was before the last acknowledgements, with the
	// acknowledged records above it in the persisted state: Lag, not
	// StartOffset, says the partition is done. docs/real-kafka.md.)
	end := endOffsets(t, cl, tp)
	eventually(t, time.Minute, "the share group's lag at 0", func() error {
		offs, err := cl.Admin().DescribeShareGroupOffsets(ctx, group, tp)
		if err != nil {
			return err
		}
		if len(offs) != len(end) {
			return fmt.Errorf("offsets %v", offs)
		}
		for _, o := range offs {
			if o.Err != nil || o.Lag != 0 || o.StartOffset < 0 || o.StartOffset > end[o.Partition] {
				return fmt.Errorf("%v, end %d", o, end[o.Partition])
			}
		}
		return nil
	})
	ds, err := cl.Admin().DescribeShareGroups(ctx, group)
	if err != nil || len(ds) != 1 || ds[0].Err != nil || len(ds[0].Members) != 1 {
		t.Errorf("DescribeShareGroups: %+v %v", ds, err)
	}
	st := sc.Stats()
	if err := sc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		v := strconv.Itoa(i)
		want := []int16{1, 2}
		if i%5 == 0 {
			want = []int16{1}
		}
		if fmt.Sprint(deliveries[v]) != fmt.Sprint(want) {
			t.Errorf("record %s: delivery counts %v, want %v", v, deliveries[v], want)
		}
		if i%5 != 0 && accepted[v] != 1 {
			t.Errorf("record %s accepted %d times", v, accepted[v])
		}
	}
	t.Logf("stats: accepted %d released %d rejected %d expired %d redelivered %d ackErrors %d, lock %v",
		st.Accepted, st.Released, st.Rejected, st.Expired, st.Redelivered, st.AckErrors, st.LockTimeout)

}
