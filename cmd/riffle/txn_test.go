package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/rifftest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cliTxn drives a transactional id with raw requests, as a transactional
// producer would. Its cluster has one broker, the coordinator and leader
// of everything, so Client.Request reaches the right broker.
type cliTxn struct {
	t     *testing.T
	cl    *riffle.Client
	id    string
	pid   int64
	epoch int16
	seq   map[int32]int32
}

func (x *cliTxn) request(req kmsg.Request) kmsg.Response {
	x.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := x.cl.Request(ctx, req)
	if err != nil {
		x.t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

func newCLITxn(t *testing.T, c *rifftest.Cluster, id string) *cliTxn {
	t.Helper()
	// AddPartitionsToTxn v4+ is the brokers' batched form: speak v3.
	cl := newGroupClient(t, c, riffle.MaxVersions(int16(kmsg.AddPartitionsToTxn), 3))
	x := &cliTxn{t: t, cl: cl, id: id, seq: map[int32]int32{}}
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID = &id
	ip.TransactionTimeoutMillis = 30000
	ip.ProducerID, ip.ProducerEpoch = -1, -1
	ir := x.request(ip).(*kmsg.InitProducerIDResponse)
	if ir.ErrorCode != 0 {
		t.Fatalf("init producer id: %v", riffle.KafkaErrorForCode(ir.ErrorCode))
	}
	x.pid, x.epoch = ir.ProducerID, ir.ProducerEpoch
	return x
}

// write adds topic/partition to the transaction and writes one record
// there.
func (x *cliTxn) write(topic string, partition int32, value string) {
	t := x.t
	t.Helper()
	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.TransactionalID = x.id
	ap.ProducerID, ap.ProducerEpoch = x.pid, x.epoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = topic, []int32{partition}
	ap.Topics = append(ap.Topics, at)
	for _, rt := range x.request(ap).(*kmsg.AddPartitionsToTxnResponse).Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				t.Fatalf("add partition to txn: %v", riffle.KafkaErrorForCode(rp.ErrorCode))
			}
		}
	}
	pr := kmsg.NewPtrProduceRequest()
	pr.TransactionID = &x.id
	pr.Acks, pr.TimeoutMillis = -1, 10000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition = partition
	pp.Records = txnBatch(x.pid, x.epoch, x.seq[partition], value)
	x.seq[partition]++
	pt.Partitions = append(pt.Partitions, pp)
	pr.Topics = append(pr.Topics, pt)
	if c := x.request(pr).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("transactional produce: %v", riffle.KafkaErrorForCode(c))
	}
}

func (x *cliTxn) end(commit bool) {
	x.t.Helper()
	et := kmsg.NewPtrEndTxnRequest()
	et.TransactionalID = x.id
	et.ProducerID, et.ProducerEpoch = x.pid, x.epoch
	et.Commit = commit
	if c := x.request(et).(*kmsg.EndTxnResponse).ErrorCode; c != 0 {
		x.t.Fatalf("end txn: %v", riffle.KafkaErrorForCode(c))
	}
}

// txnBatch encodes a transactional record batch (v2) of one record.
func txnBatch(pid int64, epoch int16, seq int32, value string) []byte {
	rec := kmsg.Record{Value: []byte(value)}
	body := rec.AppendTo(nil)[1:] // Length 0 takes one byte
	records := binary.AppendVarint(nil, int64(len(body)))
	records = append(records, body...)
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: 0x10, // transactional
		FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq,
		NumRecords: 1, Records: records,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

func TestTxnCommands(t *testing.T) {
	t.Parallel()
	c := rifftest.New(t, rifftest.Brokers(1), rifftest.Topic("pay", 3))
	open := newCLITxn(t, c, "pay-tx")
	idle := newCLITxn(t, c, "idle-tx")
	open.write("pay", 0, "a")
	open.write("pay", 2, "b")

	// list: a table, a filter, JSON
	r := on(t, c, "txn", "list")
	r.wantCode(t, 0)
	rows := tableRows(t, r.stdout, "TRANSACTIONAL-ID")
	want := [][]string{{"idle-tx", "Empty", fmt.Sprint(idle.pid)}, {"pay-tx", "Ongoing", fmt.Sprint(open.pid)}}
	if fmt.Sprintf("%q", rows) != fmt.Sprintf("%q", want) {
		t.Fatalf("list rows = %q, want %q", rows, want)
	}
	var list []txnListingJSON
	decode(t, on(t, c, "txn", "list", "--state", "Ongoing", "-o", "json"), &list)
	if len(list) != 1 || list[0] != (txnListingJSON{TransactionalID: "pay-tx", State: "Ongoing", ProducerID: open.pid}) {
		t.Fatalf("list --state Ongoing JSON = %+v", list)
	}
	var byPID []txnListingJSON
	decode(t, on(t, c, "txn", "list", "--producer-id", fmt.Sprint(idle.pid), "-o", "json"), &byPID)
	if len(byPID) != 1 || byPID[0].TransactionalID != "idle-tx" {
		t.Fatalf("list --producer-id JSON = %+v", byPID)
	}

	// describe: the open transaction with its partitions; an unknown id
	// fails on its own.
	r = on(t, c, "txn", "describe", "pay-tx", "nope")
	r.wantCode(t, 1)
	for _, w := range []string{
		"Transactional id:  pay-tx\n", "State:             Ongoing\n",
		fmt.Sprintf("Producer:          id %d, epoch %d\n", open.pid, open.epoch),
		"Coordinator:       0\n", "Timeout:           30s\n", "Partitions:        pay:0,2\n",
	} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("describe output lacks %q", w)
		}
	}
	if strings.Contains(r.stdout, "nope") || !strings.Contains(r.stdout, " ago)\n") {
		t.Errorf("describe stdout = %q", r.stdout)
	}
	if !strings.HasPrefix(r.stderr, `riffle: transactional id "nope": TRANSACTIONAL_ID_NOT_FOUND`) || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("describe stderr = %q", r.stderr)
	}
	var descs []txnDescriptionJSON
	decode(t, on(t, c, "txn", "describe", "pay-tx", "idle-tx", "-o", "json"), &descs)
	if len(descs) != 2 {
		t.Fatalf("describe JSON = %+v", descs)
	}
	d := descs[0]
	if d.TransactionalID != "pay-tx" || d.State != "Ongoing" || d.ProducerID != open.pid || d.TimeoutMS != 30000 ||
		d.Coordinator != 0 || d.StartTime == nil || fmt.Sprint(d.Partitions) != "map[pay:[0 2]]" || d.Error != "" {
		t.Fatalf("open transaction JSON = %+v", d)
	}
	if d := descs[1]; d.State != "Empty" || d.StartTime != nil || len(d.Partitions) != 0 || d.Partitions == nil {
		t.Fatalf("idle id JSON = %+v", d)
	}

	// producers: rows for the partitions the transaction wrote
	r = on(t, c, "txn", "producers", "pay")
	r.wantCode(t, 0)
	rows = tableRows(t, r.stdout, "TOPIC")
	if len(rows) != 2 {
		t.Fatalf("producer rows = %q, want 2", rows)
	}
	for i, p := range []string{"0", "2"} {
		if row := rows[i]; len(row) != 7 || row[0] != "pay" || row[1] != p || row[2] != fmt.Sprint(open.pid) ||
			row[3] != fmt.Sprint(open.epoch) || row[4] != "0" || row[6] != "0" {
			t.Errorf("producer row %d = %q", i, row)
		}
	}
	var prods []partitionProducersJSON
	decode(t, on(t, c, "txn", "producers", "pay", "-p", "2,1", "-o", "json"), &prods)
	if len(prods) != 2 || prods[0].Partition != 1 || len(prods[0].Producers) != 0 || prods[0].Producers == nil ||
		prods[1].Partition != 2 || len(prods[1].Producers) != 1 {
		t.Fatalf("producers JSON = %+v", prods)
	}
	if p := prods[1].Producers[0]; p.ProducerID != open.pid || p.LastSequence != 0 || p.TxnStartOffset == nil ||
		*p.TxnStartOffset != 0 || p.LastTimestamp == nil {
		t.Fatalf("producer JSON = %+v", p)
	}
	r = on(t, c, "txn", "producers", "pay", "-p", "9")
	r.wantCode(t, 1)
	if !strings.HasPrefix(r.stderr, "riffle: pay[9]: UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("producers of a missing partition: stderr %q", r.stderr)
	}

	r = on(t, c, "txn", "producers", "nope")
	r.wantCode(t, 1)
	if !strings.HasPrefix(r.stderr, `riffle: topic "nope": UNKNOWN_TOPIC_OR_PARTITION`) || r.stdout != "" {
		t.Errorf("producers of a missing topic: stdout %q, stderr %q", r.stdout, r.stderr)
	}

	// Committed: no longer open.
	open.end(true)
	var after []txnDescriptionJSON
	decode(t, on(t, c, "txn", "describe", "pay-tx", "-o", "json"), &after)
	if d := after[0]; len(after) != 1 || d.State == "Ongoing" || d.StartTime != nil || len(d.Partitions) != 0 {
		t.Fatalf("after commit: %+v", d)
	}
	var ongoing []txnListingJSON
	decode(t, on(t, c, "txn", "list", "--state", "Ongoing", "-o", "json"), &ongoing)
	if len(ongoing) != 0 {
		t.Fatalf("ongoing after commit: %+v", list)
	}
}

func TestTxnUsageErrors(t *testing.T) {
	t.Parallel()
	dead := "127.0.0.1:1" // a usage error must be found before dialing
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"txn", "lst"}, `unknown command "lst" for "riffle txn" (did you mean "list"?)`},
		{[]string{"txn", "list", "extra"}, `unknown command "extra"`},
		{[]string{"txn", "list", "--min-duration", "-1s"}, "--min-duration must not be negative"},
		{[]string{"txn", "list", "--producer-id", "x"}, `invalid argument "x" for "--producer-id"`},
		{[]string{"txn", "list", "--state", ""}, "--state is empty"},
		{[]string{"txn", "describe"}, "requires at least 1 arg"},
		{[]string{"txn", "describe", "a", "a"}, `transactional id "a" given twice`},
		{[]string{"txn", "describe", ""}, "empty transactional id"},
		{[]string{"txn", "producers"}, "accepts 1 arg(s), received 0"},
		{[]string{"txn", "producers", "t", "-p", "-1"}, "-p -1: partitions are not negative"},
		{[]string{"txn", "producers", "t", "-o", "yaml"}, "want table or json"},
	} {
		r := runRiffle(t, append([]string{"--brokers", dead, "--timeout", "5s"}, tc.args...)...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, "riffle: ") || !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, "--help' for usage.") || r.stdout != "" {
			t.Errorf("riffle %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, r.code, r.stdout, r.stderr, tc.want)
		}
	}
}
