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
// reached the brokers), for both mechanisms, and is refused once deleted;
// the super user logs in with PLAIN too.
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

	// A deleted credential no longer logs in; the other one still does.
	res, err := admin.Admin().AlterUserScramCredentials(ctx, riffle.ScramDeletion(user, riffle.ScramSHA256))
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("deleting the SCRAM-SHA-256 credential: %v %v", res, err)
	}
	ping := func(mech riffle.SASLMechanism) error {
		cl, err := riffle.NewClient(riffle.SeedBrokers(env.cluster.SASLAddrs()...), riffle.DialTLS(env.cluster.TLSConfig()),
			riffle.SASL(mech), riffle.Logger(slog.New(slog.DiscardHandler)))
		if err != nil {
			return err
		}
		defer cl.Close()
		return cl.Ping(timeout(t, 20*time.Second))
	}
	eventually(t, time.Minute, "the deleted credential refused", func() error {
		if err := ping(riffle.SASLScramSHA256(user, "pw-"+riffle.ScramSHA256.String())); !errors.Is(err, riffle.ErrSASLAuthentication) {
			return fmt.Errorf("logging in: %v, want ErrSASLAuthentication", err)
		}
		return nil
	})
	if err := ping(riffle.SASLScramSHA512(user, "pw-"+riffle.ScramSHA512.String())); err != nil {
		t.Errorf("SCRAM-SHA-512 after the SCRAM-SHA-256 deletion: %v", err)
	}
	creds, err = admin.Admin().DescribeUserScramCredentials(ctx, user)
	if err != nil || len(creds) != 1 || creds[0].Err != nil || len(creds[0].Credentials) != 1 || creds[0].Credentials[0].Mechanism != riffle.ScramSHA512 {
		t.Errorf("DescribeUserScramCredentials after the deletion: %+v %v", creds, err)
	}
}

// errTxnIDAuthorization is TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53):
// riffle has no sentinel of its own for it (riffle.ErrAuthorization
// matches it with the other authorization codes); KafkaErrorForCode
// matches the broker's typed error.
var errTxnIDAuthorization = riffle.KafkaErrorForCode(53)

// newScramUser makes a SCRAM-SHA-512 user with no ACLs and returns a client
// logged in as it, once the credential reached the brokers.
func newScramUser(t *testing.T, admin *riffle.Client) (string, *riffle.Client) {
	t.Helper()
	user, pw := name(t, "u"), "pw"
	ctx := timeout(t, time.Minute)
	res, err := admin.Admin().AlterUserScramCredentials(ctx, riffle.ScramUpsertion(user, riffle.ScramSHA512, 0, pw))
	if err != nil || res[0].Err != nil {
		t.Fatalf("AlterUserScramCredentials: %v %v", res, err)
	}
	eventually(t, time.Minute, user+" logging in", func() error {
		cl, err := riffle.NewClient(riffle.SeedBrokers(env.cluster.SASLAddrs()...), riffle.DialTLS(env.cluster.TLSConfig()),
			riffle.SASL(riffle.SASLScramSHA512(user, pw)), riffle.Logger(slog.New(slog.DiscardHandler)))
		if err != nil {
			return err
		}
		defer cl.Close()
		return cl.Ping(timeout(t, 20*time.Second))
	})
	return user, saslClient(t, riffle.SASLScramSHA512(user, pw), riffle.RetryTimeout(5*time.Second))
}

// A principal without ACLs gets the authorizer's typed errors from every
// kind of Admin call (cluster, topic, group and transactional id
// resources); with ACLs granted, DescribeCluster, DescribeTopics and
// DescribeGroups report the operations it may perform (KIP-430), the
// implied ones included, and a super user's are all of them.
func TestAdminAuthorization(t *testing.T) {
	needSASL(t)
	admin := client(t) // PLAINTEXT: ANONYMOUS, a super user
	ctx := timeout(t, 3*time.Minute)
	tp := topic(t, admin, 1, nil)
	p0 := riffle.TopicPartition{Topic: tp, Partition: 0}
	group, txnID := name(t, "g"), name(t, "txn")
	if err := admin.Admin().AlterGroupOffsets(ctx, group, map[riffle.TopicPartition]int64{p0: 0}); err != nil {
		t.Fatal(err)
	}
	user, cl := newScramUser(t, admin)
	adm := cl.Admin()

	// Cluster resources.
	if _, err := adm.DescribeACLs(ctx, riffle.ACLFilter{ResourceType: riffle.ACLResourceAny}); !errors.Is(err, riffle.ErrClusterAuthorization) {
		t.Errorf("DescribeACLs: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	if bcs, err := adm.DescribeBrokerConfigs(ctx, 1); err != nil || !errors.Is(bcs[0].Err, riffle.ErrClusterAuthorization) {
		t.Errorf("DescribeBrokerConfigs: %v %v, want CLUSTER_AUTHORIZATION_FAILED", bcs, err)
	}
	lvl := "INFO"
	if res, err := adm.IncrementalAlterBrokerLoggers(ctx, riffle.BrokerConfigChange{Broker: 1, Name: "root", Value: &lvl}); err != nil || !errors.Is(res.Err(), riffle.ErrClusterAuthorization) {
		t.Errorf("IncrementalAlterBrokerLoggers: %v %v, want CLUSTER_AUTHORIZATION_FAILED", res, err)
	}
	if dirs, err := adm.DescribeLogDirs(ctx, 1); err != nil || !errors.Is(dirs[0].Err, riffle.ErrClusterAuthorization) {
		t.Errorf("DescribeLogDirs: %+v %v, want CLUSTER_AUTHORIZATION_FAILED", dirs, err)
	}
	if res, err := adm.AlterClientQuotas(ctx, riffle.ClientQuotaAlteration{Entity: []riffle.QuotaEntityComponent{{Type: riffle.QuotaEntityUser, Name: user}},
		Ops: []riffle.QuotaOp{{Key: "producer_byte_rate", Value: 1}}}); !errors.Is(err, riffle.ErrClusterAuthorization) && (len(res) != 1 || !errors.Is(res[0].Err, riffle.ErrClusterAuthorization)) {
		t.Errorf("AlterClientQuotas: %v %v, want CLUSTER_AUTHORIZATION_FAILED", res, err)
	}
	if creds, err := adm.DescribeUserScramCredentials(ctx, user); !errors.Is(err, riffle.ErrClusterAuthorization) && (len(creds) != 1 || !errors.Is(creds[0].Err, riffle.ErrClusterAuthorization)) {
		t.Errorf("DescribeUserScramCredentials: %+v %v, want CLUSTER_AUTHORIZATION_FAILED", creds, err)
	}
	if res, err := adm.AlterPartitionReassignments(ctx, map[riffle.TopicPartition][]int32{p0: {1}}); !errors.Is(err, riffle.ErrClusterAuthorization) && !errors.Is(res.Err(), riffle.ErrClusterAuthorization) {
		t.Errorf("AlterPartitionReassignments: %v %v, want CLUSTER_AUTHORIZATION_FAILED", res, err)
	}
	if res, err := adm.ElectLeaders(ctx, riffle.ElectionPreferred, p0); !errors.Is(err, riffle.ErrClusterAuthorization) && !errors.Is(res.Err(), riffle.ErrClusterAuthorization) {
		t.Errorf("ElectLeaders: %v %v, want CLUSTER_AUTHORIZATION_FAILED", res, err)
	}
	if res, err := adm.AlterReplicaLogDirs(ctx, map[riffle.TopicPartitionReplica]string{{TopicPartition: p0, Broker: 1}: "/no/such/dir"}); err != nil || len(res) != 1 || !errors.Is(res[0].Err, riffle.ErrClusterAuthorization) {
		t.Errorf("AlterReplicaLogDirs: %v %v, want CLUSTER_AUTHORIZATION_FAILED", res, err)
	}
	if res, err := adm.ValidateOnly().UpdateFeatures(ctx, map[string]riffle.FeatureUpdate{"transaction.version": {MaxVersionLevel: 1, UpgradeType: riffle.FeatureSafeDowngrade}}); err != nil || len(res) != 1 || !errors.Is(res[0].Err, riffle.ErrClusterAuthorization) {
		t.Errorf("UpdateFeatures (validate only): %v %v, want CLUSTER_AUTHORIZATION_FAILED", res, err)
	}
	// The leader lookup (Metadata) is refused before WriteTxnMarkers.
	if err := adm.AbortTransaction(ctx, riffle.AbortTransactionSpec{TopicPartition: p0, ProducerID: 1}); !errors.Is(err, riffle.ErrTopicAuthorization) {
		t.Errorf("AbortTransaction: %v, want ErrTopicAuthorization (DESCRIBE on the topic, for its leader)", err)
	}
	// Topic, group and transactional id resources.
	if ds, err := adm.DescribeTopics(ctx, []string{tp}, riffle.IncludeAuthorizedOperations()); err != nil || !errors.Is(ds[0].Err, riffle.ErrTopicAuthorization) {
		t.Errorf("DescribeTopics: %+v %v, want ErrTopicAuthorization", ds, err)
	}
	if res, err := adm.CreatePartitions(ctx, 2, tp); err != nil || !errors.Is(res.Err(), riffle.ErrTopicAuthorization) {
		t.Errorf("CreatePartitions: %v %v, want ErrTopicAuthorization", res, err)
	}
	if dels, err := adm.DeleteRecords(ctx, map[riffle.TopicPartition]int64{p0: 0}); err != nil || !errors.Is(dels[0].Err, riffle.ErrTopicAuthorization) {
		t.Errorf("DeleteRecords: %v %v, want ErrTopicAuthorization", dels, err)
	}
	if gs, err := adm.DescribeGroups(ctx, group); err != nil || !errors.Is(gs[0].Err, riffle.ErrGroupAuthorization) {
		t.Errorf("DescribeGroups: %+v %v, want ErrGroupAuthorization", gs, err)
	}
	if _, err := adm.FetchOffsets(ctx, group); !errors.Is(err, riffle.ErrGroupAuthorization) {
		t.Errorf("FetchOffsets: %v, want ErrGroupAuthorization", err)
	}
	if gs, err := adm.ListGroups(ctx); err != nil || slices.ContainsFunc(gs, func(g riffle.GroupListing) bool { return g.Group == group }) {
		t.Errorf("ListGroups lists a group the user may not describe: %v", err)
	}
	if ds, err := adm.DescribeTransactions(ctx, txnID); err != nil || !errors.Is(ds[0].Err, errTxnIDAuthorization) || !errors.Is(ds[0].Err, riffle.ErrAuthorization) {
		t.Errorf("DescribeTransactions: %+v %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", ds, err)
	}
	info, err := adm.DescribeCluster(ctx, riffle.IncludeAuthorizedOperations())
	if err != nil || !info.AuthorizedOperations.Known() || len(info.AuthorizedOperations.Operations()) != 0 {
		t.Errorf("DescribeCluster authorized operations without ACLs: %v %v, want known and empty", info.AuthorizedOperations, err)
	}

	// Granted: DESCRIBE on the cluster, ALTER on the topic (which implies
	// DESCRIBE), READ on the group.
	principal := "User:" + user
	acls := []riffle.ACLBinding{
		{ResourceType: riffle.ACLResourceCluster, ResourceName: "kafka-cluster", Principal: principal, Operation: riffle.ACLOperationDescribe, Permission: riffle.ACLPermissionAllow},
		{ResourceType: riffle.ACLResourceTopic, ResourceName: tp, Principal: principal, Operation: riffle.ACLOperationAlter, Permission: riffle.ACLPermissionAllow},
		{ResourceType: riffle.ACLResourceGroup, ResourceName: group, Principal: principal, Operation: riffle.ACLOperationRead, Permission: riffle.ACLPermissionAllow},
	}
	created, err := admin.Admin().CreateACLs(ctx, acls...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range created {
		if r.Err != nil {
			t.Fatalf("CreateACLs %v: %v", r.ACL, r.Err)
		}
	}
	t.Cleanup(func() {
		_, _ = admin.Admin().DeleteACLs(timeout(t, 30*time.Second), riffle.ACLFilter{ResourceType: riffle.ACLResourceAny, Principal: principal})
	})
	eventually(t, time.Minute, "the granted operations reported", func() error {
		info, err := adm.DescribeCluster(ctx, riffle.IncludeAuthorizedOperations())
		if err != nil {
			return err
		}
		if ops := info.AuthorizedOperations; !ops.Has(riffle.ACLOperationDescribe) || ops.Has(riffle.ACLOperationAlter) {
			return fmt.Errorf("cluster operations %v", ops)
		}
		ds, err := adm.DescribeTopics(ctx, []string{tp}, riffle.IncludeAuthorizedOperations())
		if err != nil || ds[0].Err != nil {
			return fmt.Errorf("DescribeTopics: %+v %v", ds, err)
		}
		if ops := ds[0].AuthorizedOperations; !slices.Equal(ops.Operations(), []riffle.ACLOperation{riffle.ACLOperationAlter, riffle.ACLOperationDescribe}) {
			return fmt.Errorf("topic operations %v, want ALTER and the DESCRIBE it implies", ops)
		}
		return nil
	})
	if ds, err := adm.DescribeTopics(ctx, []string{tp}); err != nil || ds[0].AuthorizedOperations.Known() {
		t.Errorf("DescribeTopics without IncludeAuthorizedOperations: %+v %v, want operations not Known", ds, err)
	}
	if dirs, err := adm.DescribeLogDirs(ctx, 1); err != nil || dirs[0].Err != nil {
		t.Errorf("DescribeLogDirs with DESCRIBE on the cluster: %+v %v", dirs, err)
	}
	if _, err := adm.FetchOffsets(ctx, group); !errors.Is(err, riffle.ErrTopicAuthorization) && err != nil {
		t.Errorf("FetchOffsets with READ on the group: %v", err)
	}
	if gs, err := adm.DescribeGroups(ctx, group); err != nil || gs[0].Err != nil ||
		!slices.Equal(gs[0].AuthorizedOperations.Operations(), []riffle.ACLOperation{riffle.ACLOperationRead, riffle.ACLOperationDescribe}) {
		t.Errorf("DescribeGroups with READ on the group: %+v %v, want operations READ and the DESCRIBE it implies", gs, err)
	}
	// Kafka's group operations (AclEntry.supportedOperations).
	allGroupOps := []riffle.ACLOperation{riffle.ACLOperationRead, riffle.ACLOperationDelete, riffle.ACLOperationDescribe,
		riffle.ACLOperationDescribeConfigs, riffle.ACLOperationAlterConfigs}
	if is39() {
		allGroupOps = allGroupOps[:3] // no group configs on Kafka 3.9
	}
	if gs, err := admin.Admin().DescribeGroups(ctx, group); err != nil || gs[0].Err != nil || !slices.Equal(gs[0].AuthorizedOperations.Operations(), allGroupOps) {
		t.Errorf("the super user's DescribeGroups: %+v %v, want operations %v", gs, err, allGroupOps)
	}
	// The topic's leader found, WriteTxnMarkers needs CLUSTER_ACTION.
	if err := adm.AbortTransaction(ctx, riffle.AbortTransactionSpec{TopicPartition: p0, ProducerID: 1}); !errors.Is(err, riffle.ErrClusterAuthorization) {
		t.Errorf("AbortTransaction with DESCRIBE on the topic: %v, want CLUSTER_AUTHORIZATION_FAILED (CLUSTER_ACTION)", err)
	}
	// WRITE on the topic is still missing.
	if dels, err := adm.DeleteRecords(ctx, map[riffle.TopicPartition]int64{p0: 0}); err != nil || !errors.Is(dels[0].Err, riffle.ErrTopicAuthorization) {
		t.Errorf("DeleteRecords without DELETE: %v %v, want ErrTopicAuthorization", dels, err)
	}

	super, err := admin.Admin().DescribeCluster(ctx, riffle.IncludeAuthorizedOperations())
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []riffle.ACLOperation{riffle.ACLOperationAlter, riffle.ACLOperationDescribe, riffle.ACLOperationClusterAction,
		riffle.ACLOperationCreate, riffle.ACLOperationAlterConfigs, riffle.ACLOperationIdempotentWrite} {
		if !super.AuthorizedOperations.Has(op) {
			t.Errorf("the super user's cluster operations %v lack %v", super.AuthorizedOperations, op)
		}
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
