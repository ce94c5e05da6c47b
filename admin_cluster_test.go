package riffle

import (
	"context"
	"math"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

func TestACLOperationSet(t *testing.T) {
	none := aclOperationsOf(math.MinInt32)
	if none.Known() || none.Operations() != nil || none.Has(ACLOperationRead) || none.String() != "unknown" {
		t.Fatalf("not provided: %#v %v", none, none)
	}
	empty := aclOperationsOf(0)
	if !empty.Known() || empty.Operations() == nil || len(empty.Operations()) != 0 || empty.String() != "none" {
		t.Fatalf("known empty: %#v %v", empty, empty)
	}
	// UNKNOWN, ANY and ALL are dropped as Java does; READ, DESCRIBE and an
	// operation newer than this client are kept.
	s := aclOperationsOf(1<<0 | 1<<1 | 1<<2 | 1<<3 | 1<<8 | 1<<20)
	if got, want := s.Operations(), []ACLOperation{ACLOperationRead, ACLOperationDescribe, ACLOperation(20)}; !slices.Equal(got, want) {
		t.Fatalf("Operations %v, want %v", got, want)
	}
	if s.String() != "READ,DESCRIBE,ACLOperation(20)" {
		t.Fatalf("String %q", s)
	}
	if !s.Has(ACLOperationRead) || s.Has(ACLOperationAll) || s.Has(ACLOperationWrite) || s.Has(-1) || s.Has(40) {
		t.Fatalf("Has wrong on %v", s)
	}
	// Bit 31 with others is an operation, not "not provided".
	hi := aclOperationsOf(math.MinInt32 | 1<<3)
	if got, want := hi.Operations(), []ACLOperation{ACLOperationRead, ACLOperation(31)}; !hi.Known() || !slices.Equal(got, want) {
		t.Fatalf("bit 31: %v", got)
	}
}

// allClusterOps are the operations kfake reports on the cluster for a
// principal allowed everything.
var allClusterOps = []ACLOperation{ACLOperationRead, ACLOperationWrite, ACLOperationCreate, ACLOperationDelete,
	ACLOperationAlter, ACLOperationDescribe, ACLOperationClusterAction, ACLOperationDescribeConfigs,
	ACLOperationAlterConfigs, ACLOperationIdempotentWrite}

// clusterRequests records the DescribeCluster requests and the Metadata
// requests that ask for the cluster's authorized operations.
type clusterRequests struct {
	mu       sync.Mutex
	describe []bool  // IncludeClusterAuthorizedOperations of each DescribeCluster
	metadata []int16 // versions of Metadata requests asking for cluster operations
}

func watchClusterRequests(fake *kfake.Cluster) *clusterRequests {
	w := &clusterRequests{}
	fake.ControlKey(int16(kmsg.DescribeCluster), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		w.mu.Lock()
		w.describe = append(w.describe, req.(*kmsg.DescribeClusterRequest).IncludeClusterAuthorizedOperations)
		w.mu.Unlock()
		return nil, nil, false
	})
	fake.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if r := req.(*kmsg.MetadataRequest); r.IncludeClusterAuthorizedOperations {
			w.mu.Lock()
			w.metadata = append(w.metadata, r.Version)
			w.mu.Unlock()
		}
		return nil, nil, false
	})
	return w
}

func (w *clusterRequests) get() ([]bool, []int16) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.describe), slices.Clone(w.metadata)
}

func checkBrokers(t *testing.T, fake *kfake.Cluster, info ClusterInfo) {
	t.Helper()
	addrs := fake.ListenAddrs()
	if len(info.Brokers) != len(addrs) || info.ClusterID == "" || info.Controller < 0 || info.Controller >= int32(len(addrs)) {
		t.Fatalf("cluster info %+v", info)
	}
	for i, b := range info.Brokers {
		if b.NodeID != int32(i) || net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) != addrs[i] || b.Rack == "" {
			t.Fatalf("broker %d = %+v, want %s with a rack", i, b, addrs[i])
		}
	}
}

func TestDescribeCluster(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.ClusterID("riffle-test"))
	seen := watchClusterRequests(fake)
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()[0]))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	info, err := cl.Admin().DescribeCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkBrokers(t, fake, info)
	if info.ClusterID != "riffle-test" || info.AuthorizedOperations.Known() {
		t.Fatalf("cluster info %+v", info)
	}
	info, err = cl.Admin().DescribeCluster(ctx, IncludeAuthorizedOperations())
	if err != nil {
		t.Fatal(err)
	}
	checkBrokers(t, fake, info)
	if got := info.AuthorizedOperations.Operations(); !slices.Equal(got, allClusterOps) {
		t.Fatalf("authorized operations %v, want %v", got, allClusterOps)
	}
	if describe, _ := seen.get(); !slices.Equal(describe, []bool{false, true}) {
		t.Fatalf("DescribeCluster requests (IncludeClusterAuthorizedOperations) %v, want [false true]", describe)
	}
}

// TestDescribeClusterMetadataFallback: brokers without DescribeCluster
// (Kafka 2.7) are asked with Metadata, which carries the cluster's
// authorized operations from v8; before (Kafka 2.2, Metadata v7) the set
// is not Known. A client that does not use DescribeCluster against a new
// broker must send Metadata at v10 at most, the last with the field.
func TestDescribeClusterMetadataFallback(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fake      []kfake.Opt
		client    []Option
		wantKnown bool
	}{
		{"kafka 2.7", []kfake.Opt{kfake.MaxVersions(kversion.V2_7_0())}, nil, true},
		{"kafka 2.2", []kfake.Opt{kfake.MaxVersions(kversion.V2_2_0())}, nil, false},
		{"DescribeCluster capped away", nil, []Option{MaxVersions(int16(kmsg.DescribeCluster), -1)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFake(t, append([]kfake.Opt{kfake.NumBrokers(2)}, tc.fake...)...)
			seen := watchClusterRequests(fake)
			cl := newTestClient(t, append([]Option{SeedBrokers(fake.ListenAddrs()...)}, tc.client...)...)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()

			info, err := cl.Admin().DescribeCluster(ctx, IncludeAuthorizedOperations())
			if err != nil {
				t.Fatal(err)
			}
			checkBrokers(t, fake, info)
			if info.AuthorizedOperations.Known() != tc.wantKnown {
				t.Fatalf("authorized operations %v, known %v, want %v", info.AuthorizedOperations, info.AuthorizedOperations.Known(), tc.wantKnown)
			}
			if tc.wantKnown && !slices.Equal(info.AuthorizedOperations.Operations(), allClusterOps) {
				t.Fatalf("authorized operations %v", info.AuthorizedOperations)
			}
			// Metadata v7 has no field to ask with.
			describe, metadata := seen.get()
			if len(describe) != 0 || (tc.wantKnown && (len(metadata) != 1 || metadata[0] > 10)) || (!tc.wantKnown && len(metadata) != 0) {
				t.Fatalf("DescribeCluster requests %v, Metadata versions asking for cluster operations %v", describe, metadata)
			}
		})
	}
}

// TestAuthorizedOperationsACLs decodes what a principal with a few ACLs
// may do, on the cluster (DescribeCluster) and on topics (Metadata).
func TestAuthorizedOperationsACLs(t *testing.T) {
	allow := func(res kmsg.ACLResourceType, name string, op kmsg.ACLOperation) kfake.ACL {
		return kfake.ACL{Resource: res, Name: name, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: true}
	}
	fake := newFake(t, kfake.NumBrokers(2), kfake.SeedTopics(1, "t", "u"), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser("PLAIN", "admin", "admin-pw"),
		kfake.User("PLAIN", "alice", "alice-pw",
			allow(kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLOperationDescribe),
			allow(kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLOperationAlterConfigs),
			allow(kmsg.ACLResourceTypeTopic, "t", kmsg.ACLOperationRead),
			allow(kmsg.ACLResourceTypeTopic, "t", kmsg.ACLOperationDescribe),
			allow(kmsg.ACLResourceTypeTopic, "u", kmsg.ACLOperationDescribe),
		))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	alice := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), SASL(SASLPlain("alice", "alice-pw"))).Admin()
	info, err := alice.DescribeCluster(ctx, IncludeAuthorizedOperations())
	if err != nil {
		t.Fatal(err)
	}
	// ALTER_CONFIGS implies DESCRIBE_CONFIGS, as in Kafka.
	if got, want := info.AuthorizedOperations.Operations(), []ACLOperation{ACLOperationDescribe, ACLOperationDescribeConfigs, ACLOperationAlterConfigs}; !slices.Equal(got, want) {
		t.Fatalf("alice's cluster operations %v, want %v", got, want)
	}
	topics, err := alice.DescribeTopics(ctx, []string{"t", "u"}, IncludeAuthorizedOperations())
	if err != nil || len(topics) != 2 || topics[0].Err != nil || topics[1].Err != nil {
		t.Fatalf("describe topics: %+v %v", topics, err)
	}
	if got, want := topics[0].AuthorizedOperations.Operations(), []ACLOperation{ACLOperationRead, ACLOperationDescribe}; !slices.Equal(got, want) {
		t.Fatalf("alice's operations on t: %v, want %v", got, want)
	}
	if got, want := topics[1].AuthorizedOperations.Operations(), []ACLOperation{ACLOperationDescribe}; !slices.Equal(got, want) {
		t.Fatalf("alice's operations on u: %v, want %v", got, want)
	}
	// Without the option (and through ListTopics) nothing is reported.
	topics, err = alice.DescribeTopics(ctx, []string{"t"})
	if err != nil || topics[0].AuthorizedOperations.Known() {
		t.Fatalf("operations reported without the option: %+v %v", topics, err)
	}
	topics, err = alice.ListTopics(ctx, "t")
	if err != nil || topics[0].AuthorizedOperations.Known() {
		t.Fatalf("ListTopics reports operations: %+v %v", topics, err)
	}

	admin := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), SASL(SASLPlain("admin", "admin-pw"))).Admin()
	info, err = admin.DescribeCluster(ctx, IncludeAuthorizedOperations())
	if err != nil || !slices.Equal(info.AuthorizedOperations.Operations(), allClusterOps) {
		t.Fatalf("superuser's cluster operations %v, %v", info.AuthorizedOperations, err)
	}
}

// TestDescribeGroupsAuthorizedOperations: DescribeGroups reports what the
// principal may do with a classic and a KIP-848 group (KIP-430), the
// implied operations included, and every group operation for a super user.
func TestDescribeGroupsAuthorizedOperations(t *testing.T) {
	allow := func(res kmsg.ACLResourceType, name string, op kmsg.ACLOperation) kfake.ACL {
		return kfake.ACL{Resource: res, Name: name, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: true}
	}
	fake := newFake(t, kfake.NumBrokers(2), kfake.SeedTopics(2, "t"), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.BrokerConfigs(map[string]string{"group.consumer.heartbeat.interval.ms": "100"}),
		kfake.Superuser("PLAIN", "admin", "admin-pw"),
		kfake.User("PLAIN", "alice", "alice-pw",
			allow(kmsg.ACLResourceTypeTopic, "t", kmsg.ACLOperationDescribe),
			allow(kmsg.ACLResourceTypeGroup, "classic", kmsg.ACLOperationRead),
			allow(kmsg.ACLResourceTypeGroup, "g848", kmsg.ACLOperationDescribe),
		))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addrs := fake.ListenAddrs()
	admin := newTestClient(t, SeedBrokers(addrs...), SASL(SASLPlain("admin", "admin-pw")))
	if _, err := admin.Admin().ResetOffsets(ctx, "classic", AtOffset(0), "t"); err != nil {
		t.Fatal(err)
	}
	member := newTestClient(t, SeedBrokers(addrs...), SASL(SASLPlain("admin", "admin-pw")))
	cs, err := NewConsumer(member, ConsumerGroup("g848"), SubscribeTopics("t"), WithGroupProtocol(GroupProtocolConsumer),
		HandleRecord(func(context.Context, *Record) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cs.Close(ctx)
	})
	alice := newTestClient(t, SeedBrokers(addrs...), SASL(SASLPlain("alice", "alice-pw"))).Admin()
	var ds []GroupDescription
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ds, err = alice.DescribeGroups(ctx, "classic", "g848")
		if err != nil {
			t.Fatal(err)
		}
		if ds[1].Type == "consumer" && len(ds[1].Members) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the KIP-848 group: %+v", ds[1])
		}
	}
	if got, want := ds[0].AuthorizedOperations.Operations(), []ACLOperation{ACLOperationRead, ACLOperationDescribe}; ds[0].Err != nil || !slices.Equal(got, want) {
		t.Errorf("alice's operations on the classic group: %v (%v), want %v", got, ds[0].Err, want)
	}
	if got, want := ds[1].AuthorizedOperations.Operations(), []ACLOperation{ACLOperationDescribe}; ds[1].Err != nil || !slices.Equal(got, want) {
		t.Errorf("alice's operations on the KIP-848 group: %v (%v), want %v", got, ds[1].Err, want)
	}
	sup, err := admin.Admin().DescribeGroups(ctx, "classic", "g848")
	if err != nil {
		t.Fatal(err)
	}
	// Kafka's group operations also have DESCRIBE_CONFIGS and
	// ALTER_CONFIGS (TestAdminAuthorization in the integration suite);
	// kfake's do not (docs/real-kafka.md).
	for _, d := range sup {
		ops := d.AuthorizedOperations
		if d.Err != nil || !ops.Has(ACLOperationRead) || !ops.Has(ACLOperationDelete) || !ops.Has(ACLOperationDescribe) || ops.Has(ACLOperationWrite) {
			t.Errorf("the super user's operations on %s: %v (%v), want READ, DELETE, DESCRIBE and no WRITE", d.Group, ops, d.Err)
		}
	}
}
