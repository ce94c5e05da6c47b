package riffle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/batch"
	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawTxn drives one transactional id with raw requests, as a
// transactional producer would: InitProducerId on the id's coordinator,
// then per transaction AddPartitionsToTxn, transactional produces to the
// partitions' leaders, and EndTxn.
type rawTxn struct {
	t     testing.TB
	cl    *Client
	id    string
	coord int32
	pid   int64
	epoch int16
	seq   map[TopicPartition]int32
}

const rawTxnTimeout = 45 * time.Second

func (x *rawTxn) request(node int32, cls cluster.Class, req kmsg.Request) kmsg.Response {
	x.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := x.cl.cl.Request(ctx, node, cls, req)
	if err != nil {
		x.t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

// initRawTxn initializes the transactional id id. The client must speak
// AddPartitionsToTxn v3 at most (v4+ is the brokers' batched form).
func initRawTxn(t testing.TB, cl *Client, id string) *rawTxn {
	t.Helper()
	x := &rawTxn{t: t, cl: cl, id: id, seq: map[TopicPartition]int32{}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	node, err := cl.Admin().findCoordinator(ctx, txnCoordinator, id)
	if err != nil {
		t.Fatalf("find coordinator of %q: %v", id, err)
	}
	x.coord = node
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID = &id
	ip.TransactionTimeoutMillis = int32(rawTxnTimeout.Milliseconds())
	ip.ProducerID, ip.ProducerEpoch = -1, -1
	ir := x.request(x.coord, cluster.ClassOther, ip).(*kmsg.InitProducerIDResponse)
	if ir.ErrorCode != 0 {
		t.Fatalf("init producer id: %v", kafkaerr.ForCode(ir.ErrorCode))
	}
	x.pid, x.epoch = ir.ProducerID, ir.ProducerEpoch
	return x
}

// add adds partitions to the transaction, opening it.
func (x *rawTxn) add(tps ...TopicPartition) {
	x.t.Helper()
	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.TransactionalID = x.id
	ap.ProducerID, ap.ProducerEpoch = x.pid, x.epoch
	idx := map[string]int{}
	for _, tp := range tps {
		at := topicEntry(&ap.Topics, idx, tp.Topic, func(topic string) kmsg.AddPartitionsToTxnRequestTopic {
			at := kmsg.NewAddPartitionsToTxnRequestTopic()
			at.Topic = topic
			return at
		})
		at.Partitions = append(at.Partitions, tp.Partition)
	}
	ar := x.request(x.coord, cluster.ClassOther, ap).(*kmsg.AddPartitionsToTxnResponse)
	for _, rt := range ar.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				x.t.Fatalf("add %s[%d] to txn: %v", rt.Topic, rp.Partition, kafkaerr.ForCode(rp.ErrorCode))
			}
		}
	}
}

// produce writes values to tp in the open transaction (add tp first) and
// returns the offset of the first.
func (x *rawTxn) produce(tp TopicPartition, values ...string) int64 {
	t := x.t
	t.Helper()
	b := batch.NewBuilder(batch.BuilderOptions{})
	now := time.Now().UnixMilli()
	for _, v := range values {
		if !b.Add(&batch.Record{Value: []byte(v), Timestamp: now}) {
			t.Fatal("batch full")
		}
	}
	enc, err := b.Finish(batch.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	enc.SetProducer(x.pid, x.epoch, x.seq[tp])
	enc.SetTransactional(true)
	x.seq[tp] += int32(len(values))
	pr := kmsg.NewPtrProduceRequest()
	pr.TransactionID = &x.id
	pr.Acks = -1
	pr.TimeoutMillis = 10000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = tp.Topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition = tp.Partition
	pp.Records = enc.Bytes()
	pt.Partitions = append(pt.Partitions, pp)
	pr.Topics = append(pr.Topics, pt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pm, err := x.cl.cl.Leader(ctx, tp.Topic, tp.Partition)
	if err != nil {
		t.Fatal(err)
	}
	resp := x.request(pm.Leader, cluster.ClassProduce, pr).(*kmsg.ProduceResponse)
	rp := resp.Topics[0].Partitions[0]
	if rp.ErrorCode != 0 {
		t.Fatalf("transactional produce to %s: %v", tp, kafkaerr.ForCode(rp.ErrorCode))
	}
	return rp.BaseOffset
}

// end commits or aborts the open transaction.
func (x *rawTxn) end(commit bool) {
	x.t.Helper()
	et := kmsg.NewPtrEndTxnRequest()
	et.TransactionalID = x.id
	et.ProducerID, et.ProducerEpoch = x.pid, x.epoch
	et.Commit = commit
	er := x.request(x.coord, cluster.ClassOther, et).(*kmsg.EndTxnResponse)
	if er.ErrorCode != 0 {
		x.t.Fatalf("end txn: %v", kafkaerr.ForCode(er.ErrorCode))
	}
	if er.Version >= 5 && er.ProducerEpoch != x.epoch {
		// KIP-890: every transaction ends with an epoch bump, and
		// sequences start over with the new epoch.
		x.pid, x.epoch = er.ProducerID, er.ProducerEpoch
		clear(x.seq)
	}
}

func newTxnAdminClient(t *testing.T, fake *kfake.Cluster, opts ...Option) *Client {
	t.Helper()
	return newTestClient(t, append([]Option{SeedBrokers(fake.ListenAddrs()...),
		MaxVersions(int16(kmsg.AddPartitionsToTxn), 3), UnknownTopicRetries(2)}, opts...)...)
}

func describeTxn(t *testing.T, ctx context.Context, adm *Admin, id string) TransactionDescription {
	t.Helper()
	descs, err := adm.DescribeTransactions(ctx, id)
	if err != nil || len(descs) != 1 {
		t.Fatalf("DescribeTransactions(%q) = %+v, %v", id, descs, err)
	}
	if descs[0].Err != nil {
		t.Fatalf("describing %q: %v", id, descs[0].Err)
	}
	return descs[0]
}

func listTxns(t *testing.T, ctx context.Context, adm *Admin, f TransactionFilters) []TransactionListing {
	t.Helper()
	got, err := adm.ListTransactions(ctx, f)
	if err != nil {
		t.Fatalf("ListTransactions(%+v): %v", f, err)
	}
	return got
}

// A transaction through its life as the admin API sees it: listed and
// described with its partitions while open, its producer on the
// partitions it wrote, and no longer open once committed or aborted.
func TestAdminTransactionsLifecycle(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(3, "t"))
	// Each partition on its own leader (kfake, which answers
	// NOT_LEADER_OR_FOLLOWER elsewhere, checks the routing).
	for p := range int32(3) {
		if err := fake.MoveTopicPartition("t", p, p); err != nil {
			t.Fatal(err)
		}
	}
	cl := newTxnAdminClient(t, fake)
	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0, t1, t2 := TopicPartition{"t", 0}, TopicPartition{"t", 1}, TopicPartition{"t", 2}

	// Another transaction first, so that tx-a's start offset on t[0] is
	// not 0: its two records and its commit marker take offsets 0-2.
	plain := initRawTxn(t, cl, "plain")
	plain.add(t0)
	plain.produce(t0, "p0", "p1")
	plain.end(true)

	a := initRawTxn(t, cl, "tx-a")
	idle := initRawTxn(t, cl, "tx-idle")
	a.add(t0, t2)
	start0 := a.produce(t0, "a", "b", "c")
	start2 := a.produce(t2, "d")
	if start0 != 3 || start2 != 0 {
		t.Fatalf("transaction starts at offsets %d and %d, want 3 and 0", start0, start2)
	}
	openedBy := time.Now()

	// Listed: all, by state, by producer id.
	all := listTxns(t, ctx, adm, TransactionFilters{})
	want := []TransactionListing{
		{"plain", plain.pid, TransactionStateEmpty},
		{"tx-a", a.pid, TransactionStateOngoing},
		{"tx-idle", idle.pid, TransactionStateEmpty},
	}
	if !slices.Equal(all, want) {
		t.Fatalf("ListTransactions = %+v, want %+v", all, want)
	}
	if got := listTxns(t, ctx, adm, TransactionFilters{States: []string{TransactionStateOngoing}}); !slices.Equal(got, want[1:2]) {
		t.Fatalf("ongoing transactions = %+v, want %+v", got, want[1:2])
	}
	if got := listTxns(t, ctx, adm, TransactionFilters{ProducerIDs: []int64{idle.pid, 1 << 40}}); !slices.Equal(got, want[2:]) {
		t.Fatalf("transactions of producer %d = %+v, want %+v", idle.pid, got, want[2:])
	}

	// Described: the open one with its partitions, the idle one without,
	// an unknown id with its own error; repeats collapse.
	descs, err := adm.DescribeTransactions(ctx, "tx-a", "nope", "tx-idle", "tx-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(descs) != 3 {
		t.Fatalf("%d descriptions, want 3: %+v", len(descs), descs)
	}
	d := descs[0]
	if d.TransactionalID != "tx-a" || d.Err != nil || d.State != TransactionStateOngoing ||
		d.ProducerID != a.pid || d.ProducerEpoch != a.epoch || d.Timeout != rawTxnTimeout ||
		d.Coordinator != fake.CoordinatorFor("tx-a") || !slices.Equal(d.Partitions, []TopicPartition{t0, t2}) {
		t.Fatalf("open transaction: %+v", d)
	}
	if d.StartTime.IsZero() || d.StartTime.After(openedBy) || time.Since(d.StartTime) > time.Minute {
		t.Fatalf("open transaction started at %v (opened by %v)", d.StartTime, openedBy)
	}
	if d := descs[1]; d.TransactionalID != "nope" || !errors.Is(d.Err, ErrTransactionalIDNotFound) || d.State != "" ||
		d.Coordinator != fake.CoordinatorFor("nope") || d.ProducerID != -1 {
		t.Fatalf("unknown id: %+v (err %v)", d, d.Err)
	}
	if d := descs[2]; d.TransactionalID != "tx-idle" || d.Err != nil || d.State != TransactionStateEmpty ||
		d.ProducerID != idle.pid || len(d.Partitions) != 0 || !d.StartTime.IsZero() || d.Timeout != rawTxnTimeout {
		t.Fatalf("idle id: %+v", d)
	}

	// Producers: on the partitions the transaction wrote, from their
	// leaders; none on t[1]; errors for partitions that do not exist.
	missingPart, missingTopic := TopicPartition{"t", 7}, TopicPartition{"missing", 0}
	prods, err := adm.DescribeProducers(ctx, t0, t1, missingPart, t2, missingTopic, t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(prods) != 5 {
		t.Fatalf("%d results, want 5: %+v", len(prods), prods)
	}
	for i, tp := range []TopicPartition{t0, t1, missingPart, t2, missingTopic} {
		if prods[i].TopicPartition != tp {
			t.Fatalf("result %d is for %s, want %s", i, prods[i].TopicPartition, tp)
		}
	}
	checkActive := func(pp PartitionProducers, lastSeq int32, start int64) {
		t.Helper()
		if pp.Err != nil || len(pp.Producers) != 1 {
			t.Fatalf("%s: producers %+v, err %v; want tx-a's", pp.TopicPartition, pp.Producers, pp.Err)
		}
		p := pp.Producers[0]
		if p.ProducerID != a.pid || p.ProducerEpoch != a.epoch || p.LastSequence != lastSeq ||
			p.CurrentTxnStartOffset != start || p.LastTimestamp.IsZero() || time.Since(p.LastTimestamp) > time.Minute {
			t.Fatalf("%s: producer %+v, want id %d epoch %d last sequence %d txn start %d", pp.TopicPartition, p, a.pid, a.epoch, lastSeq, start)
		}
	}
	checkActive(prods[0], 2, start0)
	checkActive(prods[3], 0, start2)
	if pp := prods[1]; pp.Err != nil || len(pp.Producers) != 0 {
		t.Fatalf("t[1]: %+v", pp)
	}
	if pp := prods[2]; !errors.Is(pp.Err, ErrUnknownTopicOrPartition) || len(pp.Producers) != 0 {
		t.Fatalf("t[7]: %+v, want ErrUnknownTopicOrPartition", pp)
	}
	if pp := prods[4]; !errors.Is(pp.Err, ErrUnknownTopicOrPartition) || !errors.Is(pp.Err, ErrUnknownTopic) {
		t.Fatalf("missing[0]: %+v, want ErrUnknownTopicOrPartition and ErrUnknownTopic", pp)
	}

	// Committed: no longer open anywhere.
	a.end(true)
	d = describeTxn(t, ctx, adm, "tx-a")
	if (d.State != TransactionStateCompleteCommit && d.State != TransactionStateEmpty) || len(d.Partitions) != 0 || !d.StartTime.IsZero() {
		t.Fatalf("after commit: %+v", d)
	}
	if got := listTxns(t, ctx, adm, TransactionFilters{States: []string{TransactionStateOngoing}}); len(got) != 0 {
		t.Fatalf("ongoing after commit: %+v", got)
	}
	prods, err = adm.DescribeProducers(ctx, t0, t2)
	if err != nil {
		t.Fatal(err)
	}
	for _, pp := range prods {
		for _, p := range pp.Producers {
			if pp.Err != nil || p.CurrentTxnStartOffset != -1 {
				t.Fatalf("%s after commit: %+v, err %v", pp.TopicPartition, p, pp.Err)
			}
		}
	}

	// Another transaction, aborted.
	a.add(t1)
	a.produce(t1, "x")
	if d := describeTxn(t, ctx, adm, "tx-a"); d.State != TransactionStateOngoing || !slices.Equal(d.Partitions, []TopicPartition{t1}) {
		t.Fatalf("second transaction: %+v", d)
	}
	a.end(false)
	d = describeTxn(t, ctx, adm, "tx-a")
	if (d.State != TransactionStateCompleteAbort && d.State != TransactionStateEmpty) || len(d.Partitions) != 0 {
		t.Fatalf("after abort: %+v", d)
	}
	if got := listTxns(t, ctx, adm, TransactionFilters{States: []string{TransactionStateOngoing}}); len(got) != 0 {
		t.Fatalf("ongoing after abort: %+v", got)
	}
}

// The duration filter needs ListTransactions v1; a broker without it
// fails rather than list transactions of every age.
func TestAdminListTransactionsMinDuration(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(2), kfake.SeedTopics(1, "t"))
	cl := newTxnAdminClient(t, fake)
	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	x := initRawTxn(t, cl, "slow")
	x.add(TopicPartition{"t", 0})
	time.Sleep(50 * time.Millisecond)

	if got := listTxns(t, ctx, adm, TransactionFilters{MinDuration: time.Hour}); len(got) != 0 {
		t.Fatalf("open for an hour: %+v", got)
	}
	want := []TransactionListing{{"slow", x.pid, TransactionStateOngoing}}
	if got := listTxns(t, ctx, adm, TransactionFilters{MinDuration: 20 * time.Millisecond}); !slices.Equal(got, want) {
		t.Fatalf("open for 20ms: %+v, want %+v", got, want)
	}
	if _, err := adm.ListTransactions(ctx, TransactionFilters{MinDuration: -time.Second}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("negative duration: %v, want ErrInvalidConfig", err)
	}

	old := newTxnAdminClient(t, fake, MaxVersions(int16(kmsg.ListTransactions), 0))
	got, err := old.Admin().ListTransactions(ctx, TransactionFilters{MinDuration: time.Hour})
	if !errors.Is(err, ErrUnsupported) || got != nil {
		t.Fatalf("duration filter on v0: %+v, %v; want ErrUnsupported", got, err)
	}
	// Without the filter, v0 is fine.
	if got := listTxns(t, ctx, old.Admin(), TransactionFilters{}); !slices.Equal(got, want) {
		t.Fatalf("v0 listing: %+v, want %+v", got, want)
	}
}

// Each coordinator lists only its own transactions (as Kafka does; kfake
// lists all of them everywhere, so the control answers for it): every
// broker must be asked, and a broker that fails leaves its transactions
// out with an error naming it. States the brokers do not know are
// reported.
func TestAdminListTransactionsEveryBroker(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(1, "t"))
	cl := newTxnAdminClient(t, fake, RetryTimeout(2*time.Second))
	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var ids []string
	coordinators := map[int32]int{}
	for i := range 9 {
		id := fmt.Sprintf("txn-%d", i)
		ids = append(ids, id)
		coordinators[fake.CoordinatorFor(id)]++
	}
	if len(coordinators) < 2 {
		t.Fatalf("every id has the same coordinator (%v): the test proves nothing", coordinators)
	}
	var (
		mu         sync.Mutex
		bad        int32 = -1
		askedState []string
	)
	fake.ControlKey(int16(kmsg.ListTransactions), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		node := fake.CurrentNode()
		req := kr.(*kmsg.ListTransactionsRequest)
		askedState = req.StateFilters
		resp := kr.ResponseKind().(*kmsg.ListTransactionsResponse)
		if node == bad {
			resp.ErrorCode = kafkaerr.ClusterAuthorizationFailed
			return resp, nil, true
		}
		for _, s := range req.StateFilters {
			if s != TransactionStateOngoing {
				resp.UnknownStateFilters = append(resp.UnknownStateFilters, s)
			}
		}
		for i, id := range ids {
			if fake.CoordinatorFor(id) == node {
				st := kmsg.NewListTransactionsResponseTransactionState()
				st.TransactionalID, st.ProducerID, st.TransactionState = id, int64(i), TransactionStateOngoing
				resp.TransactionStates = append(resp.TransactionStates, st)
			}
		}
		return resp, nil, true
	})
	got := listTxns(t, ctx, adm, TransactionFilters{})
	var names []string
	for _, l := range got {
		names = append(names, l.TransactionalID)
	}
	if !slices.Equal(names, ids) {
		t.Fatalf("listed %v, want %v", names, ids)
	}

	got, err := adm.ListTransactions(ctx, TransactionFilters{States: []string{"Ongoing", "Bogus"}})
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), `["Bogus"]`) || len(got) != len(ids) {
		t.Fatalf("with an unknown state: %d listed, err %v; want all and ErrInvalidConfig naming Bogus", len(got), err)
	}
	mu.Lock()
	if !slices.Equal(askedState, []string{"Ongoing", "Bogus"}) {
		t.Errorf("state filters sent: %q", askedState)
	}
	bad = 1
	mu.Unlock()
	got, err = adm.ListTransactions(ctx, TransactionFilters{})
	if err == nil || !strings.Contains(err.Error(), "broker 1:") || !strings.Contains(err.Error(), "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("with broker 1 failing: err %v", err)
	}
	if len(got) != len(ids)-coordinators[1] {
		t.Fatalf("listed %d, want the %d not on broker 1", len(got), len(ids)-coordinators[1])
	}
	for _, l := range got {
		if fake.CoordinatorFor(l.TransactionalID) == 1 {
			t.Fatalf("%s of the failed broker listed", l.TransactionalID)
		}
	}
}

// A coordinator that moved answers NOT_COORDINATOR, a leader that moved
// NOT_LEADER_OR_FOLLOWER: the calls look again and retry.
func TestAdminTransactionsRetryMoved(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(2, "t"))
	cl := newTxnAdminClient(t, fake)
	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	x := initRawTxn(t, cl, "moving")
	tp := TopicPartition{"t", 1}
	x.add(tp)
	x.produce(tp, "v")

	var mu sync.Mutex
	refused := map[int16]int{}
	var keyTypes []int8
	fake.ControlKey(int16(kmsg.FindCoordinator), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		keyTypes = append(keyTypes, kr.(*kmsg.FindCoordinatorRequest).CoordinatorType)
		return nil, nil, false
	})
	fake.ControlKey(int16(kmsg.DescribeTransactions), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		defer mu.Unlock()
		refused[kr.Key()]++
		resp := kr.ResponseKind().(*kmsg.DescribeTransactionsResponse)
		for _, id := range kr.(*kmsg.DescribeTransactionsRequest).TransactionalIDs {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.ErrorCode = id, kafkaerr.NotCoordinator
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
		return resp, nil, true
	})
	fake.ControlKey(int16(kmsg.DescribeProducers), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		defer mu.Unlock()
		refused[kr.Key()]++
		resp := kr.ResponseKind().(*kmsg.DescribeProducersResponse)
		for _, rt := range kr.(*kmsg.DescribeProducersRequest).Topics {
			st := kmsg.NewDescribeProducersResponseTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewDescribeProducersResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p, kafkaerr.NotLeaderForPartition
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	d := describeTxn(t, ctx, adm, "moving")
	if d.State != TransactionStateOngoing || !slices.Equal(d.Partitions, []TopicPartition{tp}) {
		t.Fatalf("after NOT_COORDINATOR: %+v", d)
	}
	prods, err := adm.DescribeProducers(ctx, tp)
	if err != nil || prods[0].Err != nil || len(prods[0].Producers) != 1 || prods[0].Producers[0].ProducerID != x.pid {
		t.Fatalf("after NOT_LEADER: %+v, %v", prods, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if refused[int16(kmsg.DescribeTransactions)] != 1 || refused[int16(kmsg.DescribeProducers)] != 1 {
		t.Fatalf("refusals: %v, want one of each", refused)
	}
	// Two lookups (before and after NOT_COORDINATOR), both of the
	// transaction coordinator (key type 1), not the group one.
	if !slices.Equal(keyTypes, []int8{1, 1}) {
		t.Fatalf("FindCoordinator key types %v, want [1 1]", keyTypes)
	}
}

// Admin.AbortTransaction writes an abort marker for the spec's producer on
// the partition's leader: the records of the hanging transaction are
// aborted and the last stable offset moves to the end. The request names
// the producer, epoch and coordinator epoch with Committed false; a moved
// leader is followed; the partition's errors come back typed; a
// partition the metadata lacks fails without a request.
func TestAdminAbortTransaction(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(2, "t"))
	cl := newTxnAdminClient(t, fake)
	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tp := TopicPartition{"t", 1}
	x := initRawTxn(t, cl, "hanging")
	x.add(tp)
	start := x.produce(tp, "a", "b")

	lso := func() (committed, end int64) {
		t.Helper()
		for _, iso := range []IsolationLevel{ReadCommitted, ReadUncommitted} {
			los, err := adm.ListOffsetsIsolated(ctx, iso, OffsetLatest, "t")
			if err != nil {
				t.Fatal(err)
			}
			for _, lo := range los {
				if lo.Partition != tp.Partition {
					continue
				}
				if iso == ReadCommitted {
					committed = lo.Offset
				} else {
					end = lo.Offset
				}
			}
		}
		return
	}
	if c, e := lso(); c != start || e != start+2 {
		t.Fatalf("with the transaction open: read_committed %d, end %d, want %d and %d", c, e, start, start+2)
	}
	prods, err := adm.DescribeProducers(ctx, tp)
	if err != nil || prods[0].Err != nil || len(prods[0].Producers) != 1 || prods[0].Producers[0].CurrentTxnStartOffset != start {
		t.Fatalf("DescribeProducers: %+v %v", prods, err)
	}
	ps := prods[0].Producers[0]
	spec := AbortTransactionSpec{TopicPartition: tp, ProducerID: ps.ProducerID, ProducerEpoch: ps.ProducerEpoch, CoordinatorEpoch: 7}

	var mu sync.Mutex
	var sent []*kmsg.WriteTxnMarkersRequest
	var to []int32
	fake.ControlKey(int16(kmsg.WriteTxnMarkers), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, kr.(*kmsg.WriteTxnMarkersRequest))
		to = append(to, fake.CurrentNode())
		return nil, nil, false
	})

	// Refusals come back typed and abort nothing.
	for _, c := range []struct {
		code *kerr.Error
		want error
	}{
		{kerr.InvalidProducerEpoch, ErrInvalidProducerEpoch},
		{kerr.TransactionCoordinatorFenced, ErrTransactionCoordinatorFenced},
		{kerr.ClusterAuthorizationFailed, ErrClusterAuthorization},
	} {
		fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.WriteTxnMarkers}, Topic: "t", Partitions: []int32{1}, Err: c.code})
		if err := adm.AbortTransaction(ctx, spec); !errors.Is(err, c.want) || !strings.Contains(err.Error(), "t[1]") {
			t.Errorf("refused with %v: %v", c.code, err)
		}
	}
	if c, _ := lso(); c != start {
		t.Fatalf("a refused abort moved the last stable offset to %d", c)
	}

	// The leader moves after the client learned it: NOT_LEADER, then the
	// new leader.
	old := fake.LeaderFor("t", 1)
	if err := fake.MoveTopicPartition("t", 1, (old+1)%3); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	sent, to = nil, nil
	mu.Unlock()
	if err := adm.AbortTransaction(ctx, spec); err != nil {
		t.Fatalf("AbortTransaction(%v): %v", spec, err)
	}
	if c, e := lso(); c != e || e != start+3 { // the marker at start+2
		t.Fatalf("after the abort: read_committed %d, end %d, want both %d", c, e, start+3)
	}
	mu.Lock()
	// Retries may go to the old leader until the refreshed metadata
	// names the new one.
	if n := len(to); n < 2 || slices.ContainsFunc(to[:n-1], func(b int32) bool { return b != old }) || to[n-1] != (old+1)%3 {
		t.Fatalf("WriteTxnMarkers to brokers %v (leader %d, then %d)", to, old, (old+1)%3)
	}
	if m := sent[len(sent)-1].Markers; len(m) != 1 || m[0].ProducerID != ps.ProducerID || m[0].ProducerEpoch != ps.ProducerEpoch ||
		m[0].CoordinatorEpoch != 7 || m[0].Committed || len(m[0].Topics) != 1 || m[0].Topics[0].Topic != "t" ||
		!slices.Equal(m[0].Topics[0].Partitions, []int32{1}) {
		t.Fatalf("the marker sent: %+v", m)
	}
	sent = nil
	mu.Unlock()

	missing := spec
	missing.TopicPartition = TopicPartition{"t", 5}
	if err := adm.AbortTransaction(ctx, missing); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Errorf("a partition that does not exist: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 0 {
		t.Errorf("sent %d WriteTxnMarkers for a partition that does not exist", len(sent))
	}
}
