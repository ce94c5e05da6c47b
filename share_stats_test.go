package riffle

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestShareExpiredNotOverrides: acknowledgements a handler made itself
// are not expiries. Records of even offset are rejected by the handler
// (overriding the implicit accept), those of odd offset released by it
// before it returns an error, and accepted when delivered again; no lock
// ends (5 minutes), so Expired stays 0. It used to count every override:
// Expired equalled Rejected plus Released.
func TestShareExpiredNotOverrides(t *testing.T) {
	fake := newShareFake(t, 1, 5*time.Minute)
	pcl := shareClient(t, fake)
	const n = 40
	produceN(t, pcl, "t", 1, n)
	shareFromEarliest(t, pcl, "g")
	s := newSeen(n)
	var scp atomic.Pointer[ShareConsumer]
	ready := make(chan struct{})
	sc := newShareMember(t, fake, HandleRecord(func(_ context.Context, r *Record) error {
		<-ready
		sc := scp.Load()
		switch {
		case r.Offset%2 == 0:
			s.add(r)
			return sc.Acknowledge(r, AckReject)
		case r.DeliveryCount == 1:
			if err := sc.Acknowledge(r, AckRelease); err != nil {
				return err
			}
			return errors.New("released, then failed")
		default:
			s.add(r)
			return nil
		}
	}))
	scp.Store(sc)
	close(ready)
	waitDone(t, s.done, "every record rejected or accepted")
	closeShare(t, sc)
	st := sc.Stats()
	if st.Expired != 0 || st.Rejected != n/2 || st.Released != n/2 || st.Accepted != n/2 {
		t.Fatalf("want Expired 0, Rejected, Released and Accepted %d each: %+v", n/2, st)
	}
	assertShareDrained(t, pcl, "g", "t", 1, n)
}

// TestShareExpiredCountsEndedLocks: a handler that runs past its lock
// (renewal off) loses the record, which is counted once as expired and
// delivered again.
func TestShareExpiredCountsEndedLocks(t *testing.T) {
	fake := newShareFake(t, 1, time.Second)
	pcl := shareClient(t, fake)
	produceN(t, pcl, "t", 1, 1)
	shareFromEarliest(t, pcl, "g")
	s := newSeen(1)
	sc := newShareMember(t, fake, Runners(1), ShareAutoRenew(false), HandleRecord(func(ctx context.Context, r *Record) error {
		if r.DeliveryCount == 1 {
			select {
			case <-time.After(2 * time.Second): // past the 1 s lock
			case <-ctx.Done():
				return ctx.Err()
			}
			return nil
		}
		s.add(r)
		return nil
	}))
	waitDone(t, s.done, "the record delivered again")
	closeShare(t, sc)
	if st := sc.Stats(); st.Expired != 1 || st.Accepted != 1 || st.Redelivered != 1 {
		t.Fatalf("want one expired lock, one accept, one redelivery: %+v", st)
	}
}
