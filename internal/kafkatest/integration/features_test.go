package integration_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// What the suite's cluster can do, read once by TestMain from its
// finalized feature levels (DescribeFeatures): Kafka 4.4 finalizes
// group.version 1, share.version 2 and transaction.version 2 at format
// time; Kafka 3.9 finalizes none of them (only metadata.version), and has
// no share groups, no KIP-848 groups by default and no transactions v2.
type clusterFeatures struct {
	levels map[string]int16
}

// kip848 says whether KIP-848 consumer groups run (group.version 1+).
func (f clusterFeatures) kip848() bool { return f.levels["group.version"] >= 1 }

// share says whether share groups run (share.version 1+).
func (f clusterFeatures) share() bool { return f.levels["share.version"] >= 1 }

// txnV2 says whether transactions are v2 (KIP-890 part 2).
func (f clusterFeatures) txnV2() bool { return f.levels["transaction.version"] >= 2 }

func readFeatures(ctx context.Context) (clusterFeatures, error) {
	cl, err := riffle.NewClient(riffle.SeedBrokers(env.addrs...))
	if err != nil {
		return clusterFeatures{}, err
	}
	defer cl.Close()
	fm, err := cl.Admin().DescribeFeatures(ctx)
	if err != nil {
		return clusterFeatures{}, err
	}
	f := clusterFeatures{levels: map[string]int16{}}
	for name, r := range fm.Finalized {
		f.levels[name] = r.Max
	}
	return f, nil
}

// unsupportedBy checks that err is Riffle's typed error for a feature the
// cluster lacks: it matches ErrUnsupported and says the KIP and the Kafka
// release needed.
func unsupportedBy(t *testing.T, err error, kip, kafka string) {
	t.Helper()
	var ue *riffle.UnsupportedError
	if !errors.Is(err, riffle.ErrUnsupported) || !errors.As(err, &ue) {
		t.Fatalf("%v: want an *UnsupportedError (ErrUnsupported)", err)
	}
	if ue.KIP != kip || ue.Kafka != kafka || !strings.Contains(err.Error(), kip) || !strings.Contains(err.Error(), "Kafka "+kafka+"+") {
		t.Fatalf("%v: want it to name %s and Kafka %s+", err, kip, kafka)
	}
}

// failsAtOnce is how long a member may take to report a feature the
// cluster lacks: one round trip to the coordinator, on a loaded machine.
const failsAtOnce = 10 * time.Second

// supports848 is for the KIP-848 case of a test: on a cluster with KIP-848
// groups it returns true and the test goes on; on one without (Kafka 3.9),
// it checks that a GroupProtocolConsumer member fails at once with the
// typed error naming KIP-848 and Kafka 4.0, and stops (one error, a quick
// Close), and returns false: the test returns. Any other protocol: true.
func supports848(t *testing.T, p riffle.GroupProtocol) bool {
	t.Helper()
	if p != riffle.GroupProtocolConsumer || env.features.kip848() {
		return true
	}
	cl := client(t)
	tp := topic(t, cl, 1, nil)
	errs := make(chan error, 10)
	began := time.Now()
	c, err := riffle.NewConsumer(client(t), riffle.ConsumerGroup(name(t, "g")), riffle.SubscribeTopics(tp),
		riffle.WithGroupProtocol(riffle.GroupProtocolConsumer),
		riffle.OnGroupError(func(err error) { errs <- err }),
		riffle.HandleRecord(func(context.Context, *riffle.Record) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-errs:
	case <-time.After(failsAtOnce):
		t.Fatalf("a KIP-848 member on a cluster without KIP-848 groups: no error after %v", failsAtOnce)
	}
	took := time.Since(began)
	unsupportedBy(t, err, "KIP-848", "4.0")
	if !errors.Is(c.Stats().GroupErr, riffle.ErrUnsupported) {
		t.Fatalf("Stats().GroupErr %v", c.Stats().GroupErr)
	}
	ctx := timeout(t, 10*time.Second)
	closed := time.Now()
	if _, err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case again := <-errs:
		t.Fatalf("a second group error (retrying?): %v", again)
	default:
	}
	t.Logf("no KIP-848 groups on this cluster: the member failed in %v, closed in %v: %v",
		took.Round(time.Millisecond), time.Since(closed).Round(time.Millisecond), err)
	return false
}

// supportsShare is supports848 for share groups: on a cluster without
// them (Kafka 3.9) it checks that a ShareConsumer fails at once with the
// typed error naming KIP-932 and Kafka 4.2, and returns false.
func supportsShare(t *testing.T) bool {
	t.Helper()
	if env.features.share() {
		return true
	}
	cl := client(t)
	tp := topic(t, cl, 1, nil)
	errs := make(chan error, 10)
	began := time.Now()
	sc, err := riffle.NewShareConsumer(client(t), riffle.ShareGroup(name(t, "sg")), riffle.SubscribeTopics(tp),
		riffle.OnGroupError(func(err error) { errs <- err }),
		riffle.HandleRecord(func(context.Context, *riffle.Record) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-errs:
	case <-time.After(failsAtOnce):
		t.Fatalf("a share consumer on a cluster without share groups: no error after %v", failsAtOnce)
	}
	took := time.Since(began)
	unsupportedBy(t, err, "KIP-932", "4.2")
	if !errors.Is(sc.Stats().Err, riffle.ErrUnsupported) {
		t.Fatalf("Stats().Err %v", sc.Stats().Err)
	}
	ctx := timeout(t, 10*time.Second)
	if err := sc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case again := <-errs:
		t.Fatalf("a second group error (retrying?): %v", again)
	default:
	}
	// The share-group admin calls fail at once the same way.
	adm := cl.Admin()
	actx := timeout(t, 10*time.Second)
	_, err = adm.DescribeShareGroupOffsets(actx, name(t, "sg"), tp)
	unsupportedBy(t, err, "KIP-932", "4.2")
	t.Logf("no share groups on this cluster: the share consumer failed in %v: %v", took.Round(time.Millisecond), err)
	return false
}

// is39 says whether the suite runs against Kafka 3.x: a cluster it
// started of that version or, with RIFFLE_KAFKA_BROKERS, one that
// finalizes none of Kafka 4's default features.
func is39() bool {
	if env.version != "" {
		return strings.HasPrefix(env.version, "3.")
	}
	return !env.features.kip848() && !env.features.share() && !env.features.txnV2()
}
