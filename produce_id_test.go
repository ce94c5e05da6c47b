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
