package integration_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// javaProtocols are the group protocols of the interop group tests, with
// the Java client's group.protocol for each.
var javaProtocols = []struct {
	name  string
	java  string
	proto riffle.GroupProtocol
}{
	{"classic", "classic", riffle.GroupProtocolClassic},
	{"consumer", "consumer", riffle.GroupProtocolConsumer},
}

// produceTagged writes n records "tag-i" to partition i%parts of topic
// with Riffle and returns them (offsets filled in).
func produceTagged(t *testing.T, cl *riffle.Client, topic string, parts int32, n int, tag string) []*riffle.Record {
	t.Helper()
	recs := make([]*riffle.Record, n)
	for i := range recs {
		recs[i] = &riffle.Record{Topic: topic, Partition: int32(i) % parts, Key: []byte(strconv.Itoa(i)), Value: []byte(tag + "-" + strconv.Itoa(i))}
	}
	if err := riffleProducer(t, cl).ProduceSync(timeout(t, time.Minute), recs...); err != nil {
		t.Fatal(err)
	}
	return recs
}

// bumpLeaderEpochs moves every partition of topic to another leader
// (its replicas rotated, then a preferred election), so that its records'
// leader epoch is above 0 and a commit that dropped or zeroed the epoch
// shows. On a one-node cluster the epochs stay 0.
func bumpLeaderEpochs(t *testing.T, cl *riffle.Client, topic string) {
	t.Helper()
	if rf() < 2 {
		return
	}
	adm := cl.Admin()
	ctx := timeout(t, 2*time.Minute)
	describe := func() ([]riffle.PartitionDetail, error) {
		ds, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return nil, err
		}
		if len(ds) != 1 || ds[0].Err != nil || len(ds[0].Partitions) == 0 {
			return nil, fmt.Errorf("topic %s: %+v", topic, ds)
		}
		for _, pd := range ds[0].Partitions {
			if pd.Leader < 0 || len(pd.ISR) < len(pd.Replicas) {
				return nil, fmt.Errorf("partition %d: leader %d, ISR %v of %v", pd.Partition, pd.Leader, pd.ISR, pd.Replicas)
			}
		}
		return ds[0].Partitions, nil
	}
	var pds []riffle.PartitionDetail
	eventually(t, time.Minute, "the topic's leaders", func() (err error) {
		pds, err = describe()
		return err
	})
	moves := map[riffle.TopicPartition][]int32{}
	var tps []riffle.TopicPartition
	for _, pd := range pds {
		tp := riffle.TopicPartition{Topic: topic, Partition: pd.Partition}
		moves[tp] = append(append([]int32{}, pd.Replicas[1:]...), pd.Replicas[0])
		tps = append(tps, tp)
	}
	if res, err := adm.AlterPartitionReassignments(ctx, moves); err != nil || res.Err() != nil {
		t.Fatalf("AlterPartitionReassignments: %v %v", res, err)
	}
	eventually(t, time.Minute, "the leaders moved", func() error {
		_, _ = adm.ElectLeaders(ctx, riffle.ElectionPreferred, tps...) // ELECTION_NOT_NEEDED once done
		pds, err := describe()
		if err != nil {
			return err
		}
		for _, pd := range pds {
			want := moves[riffle.TopicPartition{Topic: topic, Partition: pd.Partition}][0]
			if pd.Leader != want || pd.LeaderEpoch < 1 {
				return fmt.Errorf("partition %d: leader %d epoch %d, want leader %d", pd.Partition, pd.Leader, pd.LeaderEpoch, want)
			}
		}
		return nil
	})
}

// recordLog is what a Riffle group member handled, safe for its runners.
type recordLog struct {
	mu   sync.Mutex
	recs []*riffle.Record
}

func (l *recordLog) handle(_ context.Context, r *riffle.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r)
	return nil
}

func (l *recordLog) snapshot() []*riffle.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*riffle.Record(nil), l.recs...)
}

// riffleMember is a Riffle member of group (on a client of its own)
// subscribed to topic, handling records into log.
func riffleMember(t *testing.T, group, topic string, proto riffle.GroupProtocol, log *recordLog, opts ...riffle.ConsumerOption) *riffle.Consumer {
	t.Helper()
	all := append([]riffle.ConsumerOption{riffle.ConsumerGroup(group), riffle.SubscribeTopics(topic),
		riffle.WithGroupProtocol(proto), riffle.OffsetReset(riffle.ResetEarliest),
		riffle.HandleRecord(log.handle),
		riffle.OnPartitionError(func(e *riffle.PartitionError) { t.Errorf("partition error: %v", e) })}, opts...)
	c, err := riffle.NewConsumer(client(t), all...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.Close(timeout(t, 30*time.Second)) })
	return c
}

// committedAfter is, per partition of recs, the offset after its last
// record and that record's leader epoch: what a member that consumed recs
// commits.
func committedAfter(recs []*riffle.Record) map[int32]riffle.OffsetAndMetadata {
	out := map[int32]riffle.OffsetAndMetadata{}
	for _, r := range recs {
		if om, ok := out[r.Partition]; !ok || r.Offset+1 > om.Offset {
			out[r.Partition] = riffle.OffsetAndMetadata{Offset: r.Offset + 1, LeaderEpoch: r.LeaderEpoch}
		}
	}
	return out
}

// checkCommitted checks the group's committed offsets and leader epochs
// (OffsetFetch) on topic against want; partitions absent from want have
// no commit or one at 0.
func checkCommitted(t *testing.T, cl *riffle.Client, group, topic string, parts int32, want map[int32]riffle.OffsetAndMetadata, who string) {
	t.Helper()
	got, err := cl.Admin().FetchOffsets(timeout(t, time.Minute), group)
	if err != nil {
		t.Fatal(err)
	}
	for p := range parts {
		g, ok := got[riffle.TopicPartition{Topic: topic, Partition: p}]
		w, wok := want[p]
		switch {
		case !wok:
			if ok && g.Offset != 0 {
				t.Errorf("%s committed %d@%d, nothing consumed there", who, p, g.Offset)
			}
		case !ok:
			t.Errorf("%s committed nothing on %d, want %d (epoch %d)", who, p, w.Offset, w.LeaderEpoch)
		case g.Offset != w.Offset || g.LeaderEpoch != w.LeaderEpoch:
			t.Errorf("%s committed %d@%d epoch %d, want %d epoch %d", who, p, g.Offset, g.LeaderEpoch, w.Offset, w.LeaderEpoch)
		}
	}
}

// firstOffsets is each partition's lowest offset in recs.
func firstOffsets(recs []*riffle.Record) map[int32]int64 {
	out := map[int32]int64{}
	for _, r := range recs {
		if o, ok := out[r.Partition]; !ok || r.Offset < o {
			out[r.Partition] = r.Offset
		}
	}
	return out
}

// exactlyValues checks that recs hold each of want's values once.
func exactlyValues(t *testing.T, who string, want, recs []*riffle.Record) {
	t.Helper()
	seen := map[string]int{}
	for _, r := range recs {
		seen[string(r.Value)]++
	}
	for _, w := range want {
		if n := seen[string(w.Value)]; n != 1 {
			t.Errorf("%s: %s read %d times, want once", who, w.Value, n)
		}
		delete(seen, string(w.Value))
	}
	for v, n := range seen {
		t.Errorf("%s: %s read %d times, not expected", who, v, n)
	}
}

// A Java member commits (commitSync, with the consumed records' leader
// epochs) part-way through a topic and leaves; a Riffle member of the same
// group resumes at exactly the committed offsets: together they read every
// record once. The commits either side makes carry the offset after the
// last record and that record's leader epoch (OffsetFetch). Classic and
// KIP-848 groups.
func TestJavaCommitsRiffleResumes(t *testing.T) {
	peer := needJava(t)
	cl := client(t)
	for _, pr := range javaProtocols {
		t.Run(pr.name, func(t *testing.T) {
			t.Parallel()
			if !supports848(t, pr.proto) {
				return
			}
			const parts, n, javaTakes = 3, 60, 25
			tp := topic(t, cl, parts, nil)
			group := name(t, "g")
			bumpLeaderEpochs(t, cl, tp)
			recs := produceTagged(t, cl, tp, parts, n, "v")

			jp := startJava(t, peer, "group", "--group", group, "--topic", tp, "--max", strconv.Itoa(javaTakes),
				"--prop", "group.protocol="+pr.java)
			lines, _ := jp.until(2*time.Minute, func(l javaLine) bool { return l.Ev == "closed" })
			var javaRecs []*riffle.Record
			for _, l := range lines {
				if l.Ev == "rec" {
					javaRecs = append(javaRecs, recordOf(l))
				}
			}
			if len(javaRecs) != javaTakes {
				t.Fatalf("java read %d records, want %d", len(javaRecs), javaTakes)
			}
			for _, r := range javaRecs {
				if rf() > 1 && r.LeaderEpoch < 1 {
					t.Fatalf("java read %d@%d with leader epoch %d, want it above 0 after the leader moved", r.Partition, r.Offset, r.LeaderEpoch)
				}
			}
			javaCommit := committedAfter(javaRecs)
			checkCommitted(t, cl, group, tp, parts, javaCommit, "java")

			log := &recordLog{}
			c := riffleMember(t, group, tp, pr.proto, log)
			eventually(t, 2*time.Minute, "riffle reading the rest", func() error {
				if got := len(log.snapshot()); got < n-javaTakes {
					return fmt.Errorf("%d of %d", got, n-javaTakes)
				}
				return nil
			})
			if _, err := c.Close(timeout(t, 30*time.Second)); err != nil {
				t.Fatal(err)
			}
			riffleRecs := log.snapshot()
			for p, o := range firstOffsets(riffleRecs) {
				want := int64(0)
				if om, ok := javaCommit[p]; ok {
					want = om.Offset
				}
				if o != want {
					t.Errorf("riffle resumed %d at %d, java committed %d", p, o, want)
				}
			}
			exactlyValues(t, "java then riffle", recs, append(javaRecs, riffleRecs...))
			checkCommitted(t, cl, group, tp, parts, committedAfter(recs2(riffleRecs, javaRecs)), "riffle")
		})
	}
}

// recs2 is every record of a and b.
func recs2(a, b []*riffle.Record) []*riffle.Record {
	return append(append([]*riffle.Record(nil), a...), b...)
}

// A Riffle member reads a topic, commits and leaves; records are added; a
// Java member of the same group resumes at Riffle's committed offsets and
// reads exactly the new records. Classic and KIP-848 groups.
func TestRiffleCommitsJavaResumes(t *testing.T) {
	peer := needJava(t)
	cl := client(t)
	for _, pr := range javaProtocols {
		t.Run(pr.name, func(t *testing.T) {
			t.Parallel()
			if !supports848(t, pr.proto) {
				return
			}
			const parts, n = 3, 30
			tp := topic(t, cl, parts, nil)
			group := name(t, "g")
			bumpLeaderEpochs(t, cl, tp)
			first := produceTagged(t, cl, tp, parts, n, "first")

			log := &recordLog{}
			c := riffleMember(t, group, tp, pr.proto, log)
			eventually(t, 2*time.Minute, "riffle reading the first records", func() error {
				if got := len(log.snapshot()); got < n {
					return fmt.Errorf("%d of %d", got, n)
				}
				return nil
			})
			if _, err := c.Close(timeout(t, 30*time.Second)); err != nil {
				t.Fatal(err)
			}
			riffleRecs := log.snapshot()
			exactlyValues(t, "riffle", first, riffleRecs)
			riffleCommit := committedAfter(riffleRecs)
			checkCommitted(t, cl, group, tp, parts, riffleCommit, "riffle")

			second := produceTagged(t, cl, tp, parts, n, "second")
			jp := startJava(t, peer, "group", "--group", group, "--topic", tp, "--max", strconv.Itoa(n),
				"--prop", "group.protocol="+pr.java)
			lines, _ := jp.until(2*time.Minute, func(l javaLine) bool { return l.Ev == "closed" })
			var javaRecs []*riffle.Record
			for _, l := range lines {
				if l.Ev == "rec" {
					javaRecs = append(javaRecs, recordOf(l))
				}
			}
			for p, o := range firstOffsets(javaRecs) {
				if o != riffleCommit[p].Offset {
					t.Errorf("java resumed %d at %d, riffle committed %d", p, o, riffleCommit[p].Offset)
				}
			}
			exactlyValues(t, "java after riffle", second, javaRecs)
			checkCommitted(t, cl, group, tp, parts, committedAfter(recs2(riffleRecs, javaRecs)), "java")
		})
	}
}
