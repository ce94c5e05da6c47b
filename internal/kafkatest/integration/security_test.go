package integration_test

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
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
	return errors.Is(err, riffle.ErrTopicAuthorization) || errors.Is(err, riffle.ErrClusterAuthorization)
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
	got, err := admin.Admin().DescribeACLs(ctx, riffle.ACLFilter{ResourceType: riffle.ACLResourceTopic, ResourceName: tp})
	if err != nil || len(got) != 2 {
		t.Errorf("DescribeACLs: %v %v", got, err)
	}
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
// fails at once with that typed error, as Java's send fails with a
// ClusterAuthorizationException, not at its delivery timeout (defect D4,
// fixed).
func TestProduceWithoutWriteACL(t *testing.T) {
	needSASL(t)
	admin := client(t)
	tp := topic(t, admin, 1, nil)
	allow(t, admin, tp, riffle.ACLOperationDescribe)
	const delivery = 10 * time.Second
	var err error
	var took time.Duration
	eventually(t, time.Minute, "alice seeing the topic", func() error {
		start := time.Now()
		err = produceAs(t, kafkatest.User, kafkatest.UserPassword, tp, 3*time.Second,
			riffle.ProduceRequestTimeout(3*time.Second), riffle.DeliveryTimeout(delivery))
		took = time.Since(start)
		if errors.Is(err, riffle.ErrTopicAuthorization) { // DESCRIBE not there yet
			return err
		}
		return nil
	})
	if !errors.Is(err, riffle.ErrClusterAuthorization) || !errors.Is(err, riffle.ErrAuthorization) {
		t.Fatalf("produce without WRITE: %v, want ErrClusterAuthorization (CLUSTER_AUTHORIZATION_FAILED) matching ErrAuthorization", err)
	}
	if errors.Is(err, riffle.ErrDeliveryTimeout) || took >= delivery {
		t.Fatalf("produce without WRITE failed after %v (delivery timeout %v): %v; want it at the refusal", took, delivery, err)
	}
	t.Logf("refused after %v: %v", took, err)
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
