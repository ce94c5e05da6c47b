package riffle

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// An idempotent producer whose InitProducerId is refused for a missing ACL
// (Kafka answers CLUSTER_AUTHORIZATION_FAILED without IDEMPOTENT_WRITE on
// the cluster or WRITE on a topic) fails the record at once with the typed
// error, not at its delivery timeout without the cause (defect D4 of
// docs/real-kafka.md); a record produced once the ACL is granted asks for
// an id again and is written.
func TestProducerIDAuthorizationFailsRecords(t *testing.T) {
	for _, code := range []*kerr.Error{kerr.ClusterAuthorizationFailed, kerr.TransactionalIDAuthorizationFailed, kerr.TopicAuthorizationFailed} {
		t.Run(code.Message, func(t *testing.T) {
			fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
			denied := fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, Err: code, Count: -1})
			cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), RequestTimeout(5*time.Second))
			// Long, so that failing at the refusal (within a third of
			// it) holds on a loaded machine too.
			const delivery = 45 * time.Second
			p, err := NewProducer(cl, DeliveryTimeout(delivery))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close(context.Background())
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()

			start := time.Now()
			err = p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("denied")})
			took := time.Since(start)
			if !errors.Is(err, ErrAuthorization) || !errors.Is(err, KafkaErrorForCode(int16(code.Code))) {
				t.Fatalf("ProduceSync without the ACL: %v (after %v), want ErrAuthorization and %s", err, took, code.Message)
			}
			if code == kerr.ClusterAuthorizationFailed && !errors.Is(err, ErrClusterAuthorization) {
				t.Fatalf("%v does not match ErrClusterAuthorization", err)
			}
			if errors.Is(err, ErrDeliveryTimeout) || took > delivery/3 {
				t.Fatalf("failed after %v (delivery timeout %v): %v; want it at the refusal", took, delivery, err)
			}
			t.Logf("refused after %v: %v", took, err)

			denied.Remove() // the ACL is granted
			rec := &Record{Topic: "t", Value: []byte("granted")}
			if err := p.ProduceSync(ctx, rec); err != nil {
				t.Fatalf("ProduceSync once granted: %v", err)
			}
			if rec.Offset != 0 {
				t.Fatalf("the granted record is at offset %d, want 0 (the refused one was never written)", rec.Offset)
			}
		})
	}
}

// A record that times out says why it was not sent: the last retriable
// failure, be it the InitProducerId it waited for or its produce answers.
func TestDeliveryTimeoutNamesLastCause(t *testing.T) {
	cases := []struct {
		name  string
		fault kfake.Fault
		code  int16
	}{
		{"waiting for a producer id", kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, Err: kerr.CoordinatorLoadInProgress, Count: -1}, kerr.CoordinatorLoadInProgress.Code},
		{"produce retried", kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotEnoughReplicas, Count: -1}, kerr.NotEnoughReplicas.Code},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
			fake.Fault(c.fault)
			cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), RequestTimeout(500*time.Millisecond))
			p, err := NewProducer(cl, DeliveryTimeout(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close(context.Background())
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("x")})
			if !errors.Is(err, ErrDeliveryTimeout) || !errors.Is(err, KafkaErrorForCode(c.code)) {
				t.Fatalf("ProduceSync: %v, want ErrDeliveryTimeout wrapping %v", err, KafkaErrorForCode(c.code))
			}
			t.Logf("%v", err)
		})
	}
}

// The first InitProducerId on a fresh cluster may get
// COORDINATOR_LOAD_IN_PROGRESS for a moment; the producer retries it
// without a warning (Java logs it at debug), and the record is written.
func TestProducerIDLoadingNotWarned(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	loading := fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, Err: kerr.CoordinatorLoadInProgress, Count: 2})
	buf := &syncWriter{w: new(bytes.Buffer)}
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...),
		Logger(slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	p, err := NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := loading.Hits(); n != 2 {
		t.Fatalf("the fault answered %d InitProducerIds, want 2", n)
	}
	if out := buf.String(); strings.Contains(out, "InitProducerId") {
		t.Fatalf("a loading coordinator was warned about:\n%s", out)
	}
}

// An InitProducerId that keeps failing is warned about once it persisted
// for idWarnAfter, once; earlier attempts log at debug.
func TestProducerIDFailuresWarnWhenPersisting(t *testing.T) {
	buf := &syncWriter{w: new(bytes.Buffer)}
	lg := slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var f idFailures
	t0 := time.Unix(1000, 0)
	err := KafkaErrorForCode(kerr.CoordinatorLoadInProgress.Code)
	for i := 0; i < 5; i++ {
		f.log(lg, err, t0.Add(time.Duration(i)*time.Second))
	}
	if out := buf.String(); out != "" {
		t.Fatalf("warned within %v:\n%s", idWarnAfter, out)
	}
	f.log(lg, err, t0.Add(idWarnAfter))
	f.log(lg, err, t0.Add(idWarnAfter+time.Second))
	if n := strings.Count(buf.String(), "level=WARN"); n != 1 {
		t.Fatalf("%d warnings once the failures persisted, want 1:\n%s", n, buf.String())
	}
	if !strings.Contains(buf.String(), "COORDINATOR_LOAD_IN_PROGRESS") || !strings.Contains(buf.String(), "attempts=6") {
		t.Fatalf("the warning does not say what and how often: %s", buf.String())
	}
}

// bumpFault makes fake answer a producer's epoch bumps (InitProducerId
// naming its current id) with code, count times (-1: until removed), and
// its next produce INVALID_PRODUCER_EPOCH, which asks for a bump.
func bumpFault(fake *kfake.Cluster, code *kerr.Error, count int) *kfake.FaultHandle {
	fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "t", Err: kerr.InvalidProducerEpoch})
	return fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, Err: code, Count: count,
		When: func(r kmsg.Request) bool { return r.(*kmsg.InitProducerIDRequest).ProducerID >= 0 }})
}

// An epoch bump refused for a missing ACL fails the records waiting for
// it at once with the typed error, as the first id's refusal does
// (TestProducerIDAuthorizationFailsRecords), not at their delivery
// timeout; once the ACL is granted the next record bumps the epoch and is
// written.
func TestProducerEpochBumpAuthorizationFailsRecords(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), RequestTimeout(5*time.Second))
	const delivery = 15 * time.Second
	p, err := NewProducer(cl, DeliveryTimeout(delivery))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("first")}); err != nil {
		t.Fatal(err)
	}
	before := p.currentIdentity()
	denied := bumpFault(fake, kerr.ClusterAuthorizationFailed, -1)

	start := time.Now()
	err = p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("denied")})
	took := time.Since(start)
	if !errors.Is(err, ErrClusterAuthorization) || !errors.Is(err, ErrAuthorization) {
		t.Fatalf("ProduceSync while the bump is refused: %v (after %v), want ErrClusterAuthorization", err, took)
	}
	if errors.Is(err, ErrDeliveryTimeout) || took > delivery/3 {
		t.Fatalf("failed after %v (delivery timeout %v): %v; want it at the refusal", took, delivery, err)
	}
	if denied.Hits() == 0 {
		t.Fatal("no epoch bump was refused")
	}
	t.Logf("refused after %v: %v", took, err)

	denied.Remove() // the ACL is granted
	rec := &Record{Topic: "t", Value: []byte("granted")}
	if err := p.ProduceSync(ctx, rec); err != nil {
		t.Fatalf("ProduceSync once granted: %v", err)
	}
	// kfake answers a bump of an idempotent producer with a new id,
	// Kafka with the next epoch: either replaces the identity.
	if after := p.currentIdentity(); after == before {
		t.Fatalf("identity %+v unchanged: no bump", after)
	}
	if rec.Offset != 1 {
		t.Fatalf("the granted record is at offset %d, want 1 (the refused one was never written)", rec.Offset)
	}
}

// Retriable epoch bump failures log at Debug while young, as the first
// id's do (TestProducerIDLoadingNotWarned): the bump used to warn at each
// attempt, every second.
func TestProducerEpochBumpFailuresNotWarned(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	buf := &syncWriter{w: new(bytes.Buffer)}
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...),
		Logger(slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	p, err := NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("first")}); err != nil {
		t.Fatal(err)
	}
	before := p.currentIdentity()
	loading := bumpFault(fake, kerr.CoordinatorLoadInProgress, 2)
	if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("bumped")}); err != nil {
		t.Fatal(err)
	}
	if n := loading.Hits(); n != 2 {
		t.Fatalf("the fault answered %d bumps, want 2", n)
	}
	if after := p.currentIdentity(); after == before {
		t.Fatalf("identity %+v unchanged: no bump", after)
	}
	if out := buf.String(); strings.Contains(out, "bump") {
		t.Fatalf("young bump failures were warned about:\n%s", out)
	}
}

// Persisting epoch bump failures warn once, named as bumps, and their end
// is logged at Info.
func TestProducerEpochBumpFailuresWarnWhenPersisting(t *testing.T) {
	buf := &syncWriter{w: new(bytes.Buffer)}
	lg := slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	f := idFailures{what: "producer epoch bump"}
	t0 := time.Unix(1000, 0)
	err := KafkaErrorForCode(kerr.CoordinatorNotAvailable.Code)
	for i := 0; i <= int(idWarnAfter/time.Second)+2; i++ {
		f.log(lg, err, t0.Add(time.Duration(i)*time.Second))
	}
	f.recovered(lg)
	out := buf.String()
	if n := strings.Count(out, "level=WARN"); n != 1 || !strings.Contains(out, `msg="producer epoch bump keeps failing; retrying"`) {
		t.Fatalf("want one warning naming the bump:\n%s", out)
	}
	if !strings.Contains(out, `level=INFO msg="producer epoch bump succeeded again" after_attempts=13`) {
		t.Fatalf("the recovery is not logged at Info:\n%s", out)
	}
}
