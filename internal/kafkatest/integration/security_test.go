package integration_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/internal/kafkatest"
)

// needSASL is need for tests of the harness's SASL_SSL listener, which a
// cluster given by RIFFLE_KAFKA_BROKERS does not have.
func needSASL(t *testing.T) {
	t.Helper()
	need(t)
	if env.cluster == nil || env.cluster.SASLAddrs() == nil {
		t.Skip("needs the harness's SASL_SSL listener: run with " + kafkatest.EnvVersion + "=" + kafkatest.Version)
	}
}

// saslClient is a client of the SASL_SSL listener.
func saslClient(t *testing.T, mech riffle.SASLMechanism, opts ...riffle.Option) *riffle.Client {
	t.Helper()
	return client(t, append([]riffle.Option{riffle.SeedBrokers(env.cluster.SASLAddrs()...),
		riffle.DialTLS(env.cluster.TLSConfig()), riffle.SASL(mech)}, opts...)...)
}

// denied: TOPIC_AUTHORIZATION_FAILED, or CLUSTER_AUTHORIZATION_FAILED (an
// idempotent producer's InitProducerId needs IDEMPOTENT_WRITE on the cluster
// or WRITE on some topic).
func denied(err error) bool {
	return errors.Is(err, riffle.ErrTopicAuthorization) || errors.Is(err, riffle.KafkaErrorForCode(31))
}

// produceAs produces one record to topic as user over SASL_SSL (SCRAM-SHA-512),
// from a client of its own (no metadata cached from an earlier attempt).
// requestTimeout, when not zero, is the client's RequestTimeout.
func produceAs(t *testing.T, user, password, topic string, requestTimeout time.Duration, popts ...riffle.ProducerOption) error {
	copts := []riffle.Option{riffle.SeedBrokers(env.cluster.SASLAddrs()...), riffle.DialTLS(env.cluster.TLSConfig()),
		riffle.SASL(riffle.SASLScramSHA512(user, password)), riffle.Logger(slog.New(slog.DiscardHandler))}
	if requestTimeout > 0 {
		copts = append(copts, riffle.RequestTimeout(requestTimeout))
	}
	cl, err := riffle.NewClient(copts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx := timeout(t, time.Minute)
	p, err := riffle.NewProducer(cl, popts...)
	if err != nil {
		return err
	}
	defer p.Close(ctx)
	return p.ProduceSync(ctx, &riffle.Record{Topic: topic, Value: []byte("from " + user)})
}

func allow(t *testing.T, admin *riffle.Client, topic string, ops ...riffle.ACLOperation) {
	t.Helper()
	var acls []riffle.ACLBinding
	for _, op := range ops {
		acls = append(acls, riffle.ACLBinding{ResourceType: riffle.ACLResourceTopic, ResourceName: topic,
			Principal: "User:" + kafkatest.User, Operation: op, Permission: riffle.ACLPermissionAllow})
	}
	res, err := admin.Admin().CreateACLs(timeout(t, time.Minute), acls...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("CreateACLs %v: %v", r.ACL, r.Err)
		}
	}
}

// StandardAuthorizer enforces ACLs: a user without any gets typed
// authorization errors, gets through once granted, and is refused again
// once the ACLs are deleted. ACL changes reach the brokers asynchronously.
func TestACLsEnforced(t *testing.T) {
	needSASL(t)
	admin := client(t) // PLAINTEXT: ANONYMOUS, a super user
	tp := topic(t, admin, 1, nil)
	ctx := timeout(t, 3*time.Minute)
	alice := saslClient(t, riffle.SASLScramSHA512(kafkatest.User, kafkatest.UserPassword))

	res, err := alice.Admin().CreateTopics(ctx, riffle.TopicSpec{Name: name(t, "denied"), Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); !denied(err) {
		t.Errorf("CreateTopics without ACLs: %v, want TOPIC_AUTHORIZATION_FAILED or CLUSTER_AUTHORIZATION_FAILED", err)
	}
	if err := produceAs(t, kafkatest.User, kafkatest.UserPassword, tp, 0); !denied(err) {
		t.Fatalf("produce without ACLs: %v, want TOPIC_ or CLUSTER_AUTHORIZATION_FAILED", err)
	}

	allow(t, admin, tp, riffle.ACLOperationWrite, riffle.ACLOperationDescribe)
	// The broker asked may not have replayed the new ACLs yet.
	eventually(t, time.Minute, "DescribeACLs listing the new ACLs", func() error {
		got, err := admin.Admin().DescribeACLs(ctx, riffle.ACLFilter{ResourceType: riffle.ACLResourceTopic, ResourceName: tp})
		if err != nil || len(got) != 2 {
			return fmt.Errorf("DescribeACLs: %v %v", got, err)
		}
		return nil
	})
	eventually(t, time.Minute, "alice producing once granted", func() error {
		return produceAs(t, kafkatest.User, kafkatest.UserPassword, tp, 0)
	})

	if _, err := admin.Admin().DeleteACLs(ctx, riffle.ACLFilter{ResourceType: riffle.ACLResourceTopic, ResourceName: tp, PatternType: riffle.ACLPatternLiteral}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "alice refused once the ACLs are gone", func() error {
		if err := produceAs(t, kafkatest.User, kafkatest.UserPassword, tp, 0); !denied(err) {
			return fmt.Errorf("produce: %v", err)
		}
		return nil
	})
}

// A user who may describe a topic but not write it: the idempotent
// producer's InitProducerId gets CLUSTER_AUTHORIZATION_FAILED (it needs
// IDEMPOTENT_WRITE on the cluster or WRITE on a topic), and the record
// fails with that typed error, as Java's send fails with a
// ClusterAuthorizationException.
func TestProduceWithoutWriteACL(t *testing.T) {
	needSASL(t)
	admin := client(t)
	tp := topic(t, admin, 1, nil)
	allow(t, admin, tp, riffle.ACLOperationDescribe)
	var err error
	eventually(t, time.Minute, "alice seeing the topic", func() error {
		err = produceAs(t, kafkatest.User, kafkatest.UserPassword, tp, 3*time.Second,
			riffle.ProduceRequestTimeout(3*time.Second), riffle.DeliveryTimeout(10*time.Second))
		if errors.Is(err, riffle.ErrTopicAuthorization) { // DESCRIBE not there yet
			return err
		}
		return nil
	})
	if errors.Is(err, riffle.ErrDeliveryTimeout) && !denied(err) {
		defect(t, "D4", "the authorization error is lost: %v", err)
	}
	if !denied(err) {
		t.Fatalf("produce without WRITE: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
}

// A SCRAM credential made with AlterUserScramCredentials logs in (once it
// reached the brokers), for both mechanisms; the super user logs in with
// PLAIN too.
func TestScramCredentialsLogIn(t *testing.T) {
	needSASL(t)
	admin := saslClient(t, riffle.SASLPlain(kafkatest.SuperUser, kafkatest.SuperPassword))
	ctx := timeout(t, 2*time.Minute)
	user := name(t, "u")
	for _, m := range []struct {
		mech riffle.ScramMechanism
		sasl func(u, p string) riffle.SASLMechanism
	}{{riffle.ScramSHA256, riffle.SASLScramSHA256}, {riffle.ScramSHA512, riffle.SASLScramSHA512}} {
		res, err := admin.Admin().AlterUserScramCredentials(ctx, riffle.ScramUpsertion(user, m.mech, 0, "pw-"+m.mech.String()))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("AlterUserScramCredentials %v: %v", m.mech, r.Err)
			}
		}
		eventually(t, time.Minute, "logging in with "+m.mech.String(), func() error {
			cl, err := riffle.NewClient(riffle.SeedBrokers(env.cluster.SASLAddrs()...), riffle.DialTLS(env.cluster.TLSConfig()),
				riffle.SASL(m.sasl(user, "pw-"+m.mech.String())), riffle.Logger(slog.New(slog.DiscardHandler)))
			if err != nil {
				return err
			}
			defer cl.Close()
			return cl.Ping(timeout(t, 20*time.Second))
		})
	}
	creds, err := admin.Admin().DescribeUserScramCredentials(ctx, user)
	if err != nil || len(creds) != 1 || creds[0].Err != nil || len(creds[0].Credentials) != 2 {
		t.Errorf("DescribeUserScramCredentials: %+v %v", creds, err)
	}
	if !slices.ContainsFunc(creds[0].Credentials, func(c riffle.ScramCredentialInfo) bool { return c.Mechanism == riffle.ScramSHA512 }) {
		t.Errorf("credentials %+v lack SCRAM-SHA-512", creds[0].Credentials)
	}
}

// countingSASL is a mechanism that counts its re-authentications (KIP-368)
// per broker.
type countingSASL struct {
	riffle.SASLMechanism
	mu      sync.Mutex
	reauths map[int32]int
}

func (c *countingSASL) Authenticate(ctx context.Context, b riffle.SASLBroker) (riffle.SASLSession, []byte, error) {
	if b.Reauthentication {
		c.mu.Lock()
		c.reauths[b.NodeID]++
		c.mu.Unlock()
	}
	return c.SASLMechanism.Authenticate(ctx, b)
}

func (c *countingSASL) counts() (map[int32]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	total := 0
	for _, n := range c.reauths {
		total += n
	}
	return maps.Clone(c.reauths), total
}

// disconnects records the connections a client lost, with their reasons.
type disconnects struct {
	mu   sync.Mutex
	errs []string
}

func (d *disconnects) OnBrokerDisconnect(b riffle.BrokerInfo, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.errs = append(d.errs, fmt.Sprintf("node %d (%s): %v", b.NodeID, b.Addr, err))
}

func (d *disconnects) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.errs)
}

// With connections.max.reauth.ms on the SASL_SSL listener (suiteReauth), a
// producer and a consumer working over SCRAM-SHA-512 for several session
// lifetimes re-authenticate their connections before the sessions end
// (KIP-368): the broker closes none of them, no record is lost or fails,
// and no partition error reaches the consumer.
func TestReauthenticationKeepsConnections(t *testing.T) {
	needSASL(t)
	if env.reauth <= 0 {
		t.Skip("the cluster's SASL_SSL listener does not limit sessions")
	}
	admin := client(t)
	tp := topic(t, admin, 3, nil)
	mech := &countingSASL{SASLMechanism: riffle.SASLScramSHA512(kafkatest.SuperUser, kafkatest.SuperPassword), reauths: map[int32]int{}}
	lost := &disconnects{}
	cl := saslClient(t, mech, riffle.WithHooks(lost))
	ctx := timeout(t, 3*time.Minute)

	var mu sync.Mutex
	got := map[string]int{}
	c, err := riffle.NewConsumer(cl,
		riffle.HandleRecord(func(_ context.Context, r *riffle.Record) error {
			mu.Lock()
			got[string(r.Value)]++
			mu.Unlock()
			return nil
		}),
		riffle.OnPartitionError(func(e *riffle.PartitionError) { t.Errorf("consumer: %v", e) }))
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		if err := c.Assign(riffle.Assignment{TopicPartition: riffle.TopicPartition{Topic: tp, Partition: p}, Start: riffle.AtEarliest()}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := riffle.NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	run := 5 * env.reauth
	began := time.Now()
	var sent int
	var produceErrs []error
	var perrMu sync.Mutex
	for time.Since(began) < run {
		v := fmt.Sprintf("r%05d", sent)
		sent++
		p.Produce(ctx, &riffle.Record{Topic: tp, Value: []byte(v)}, func(_ *riffle.Record, err error) {
			if err != nil {
				perrMu.Lock()
				produceErrs = append(produceErrs, err)
				perrMu.Unlock()
			}
		})
		time.Sleep(20 * time.Millisecond)
	}
	if err := p.Flush(ctx); err != nil {
		t.Errorf("Flush: %v", err)
	}
	eventually(t, time.Minute, "consuming every record", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(got) < sent {
			return fmt.Errorf("%d of %d records", len(got), sent)
		}
		return nil
	})
	byNode, reauths := mech.counts()
	gone := lost.list()
	t.Logf("%d records over %v with sessions of %v: %d re-authentications %v, %d connections lost",
		sent, time.Since(began).Round(time.Second), env.reauth, reauths, byNode, len(gone))
	perrMu.Lock()
	for _, err := range produceErrs {
		t.Errorf("produce: %v", err)
	}
	perrMu.Unlock()
	for _, g := range gone {
		t.Errorf("connection lost: %s", g)
	}
	mu.Lock()
	for v, n := range got {
		if n != 1 {
			t.Errorf("record %s consumed %d times", v, n)
		}
	}
	mu.Unlock()
	// A connection open for the whole run re-authenticated at least
	// every 95% of a session.
	if want := int(run / env.reauth); reauths < want {
		t.Errorf("%d re-authentications in %v, want at least %d", reauths, run, want)
	}
	if err := p.Close(ctx); err != nil {
		t.Error(err)
	}
	if _, err := c.Close(ctx); err != nil {
		t.Error(err)
	}
}
