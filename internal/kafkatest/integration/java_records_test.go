package integration_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// sameRecords checks that got holds exactly want's records, each at the
// partition and offset want says, byte-identical in key, value, headers
// and timestamp.
func sameRecords(t *testing.T, what string, want, got []*riffle.Record) {
	t.Helper()
	type at struct {
		p int32
		o int64
	}
	by := map[at]*riffle.Record{}
	for _, r := range got {
		k := at{r.Partition, r.Offset}
		if by[k] != nil {
			t.Errorf("%s: %d@%d read twice", what, r.Partition, r.Offset)
		}
		by[k] = r
	}
	bad := 0
	for _, w := range want {
		g := by[at{w.Partition, w.Offset}]
		delete(by, at{w.Partition, w.Offset})
		switch {
		case g == nil:
			t.Errorf("%s: %d@%d (value %s) not read", what, w.Partition, w.Offset, show(w.Value))
			bad++
		case diffRecord(w, g) != "":
			t.Errorf("%s: %d@%d: %s", what, w.Partition, w.Offset, diffRecord(w, g))
			bad++
		}
		if bad > 10 {
			t.Fatalf("%s: too many differences", what)
		}
	}
	for k, g := range by {
		t.Errorf("%s: %d@%d (value %s) read but not expected", what, k.p, k.o, show(g.Value))
	}
}

// flatten is every partition's records in one slice.
func flatten(by map[int32][]*riffle.Record) []*riffle.Record {
	var out []*riffle.Record
	for _, rs := range by {
		out = append(out, rs...)
	}
	return out
}

// javaProduce sends recs to a Java producer and then cmd (flush, commit or
// abort), and fills in each record's offset from the producer's acks.
func javaProduce(t *testing.T, jp *javaProc, cmd string, recs []*riffle.Record) {
	t.Helper()
	for _, r := range recs {
		jp.send(javaRec(r))
	}
	jp.send(cmd)
	acks, done := jp.until(2*time.Minute, func(l javaLine) bool { return l.Done != "" })
	if done.Done != cmd || done.Error != "" {
		t.Fatalf("java %s: %s", cmd, done.raw)
	}
	if len(acks) != len(recs) {
		t.Fatalf("java %s: %d acks for %d records", cmd, len(acks), len(recs))
	}
	for i, a := range acks {
		if a.Ack == nil || a.Error != "" {
			t.Fatalf("java %s: record %d: %s", cmd, i, a.raw)
		}
		if a.P != recs[i].Partition {
			t.Fatalf("java %s: record %d to partition %d, want %d", cmd, i, a.P, recs[i].Partition)
		}
		recs[i].Offset = a.O
	}
}

// javaBegin begins a transaction on a Java transactional producer.
func javaBegin(t *testing.T, jp *javaProc) {
	t.Helper()
	jp.send("begin")
	if l := jp.next(time.Minute); l.Done != "begin" || l.Error != "" {
		t.Fatalf("java begin: %s", l.raw)
	}
}

// javaRead is every record of topic as a Java consumer with props reads
// it, from the start to the end offsets.
func javaRead(t *testing.T, jp *javaProc) []*riffle.Record {
	t.Helper()
	lines, _ := jp.until(2*time.Minute, func(l javaLine) bool { return l.Ev == "end" })
	out := make([]*riffle.Record, 0, len(lines))
	for _, l := range lines {
		if l.Ev != "rec" {
			t.Fatalf("java consume: %s", l.raw)
		}
		if l.TsType != "CreateTime" {
			t.Errorf("java consume: %d@%d timestamp type %s", l.P, l.O, l.TsType)
		}
		out = append(out, recordOf(l))
	}
	return out
}

// The Java producer (idempotent, acks=all, each codec, linger so that
// batches hold many records) writes records with every edge of the format;
// a Riffle consumer reads them byte-identical at the offsets Java's acks
// gave.
func TestJavaProducesRiffleReads(t *testing.T) {
	peer := needJava(t)
	cl := client(t)
	for _, c := range javaCodecs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tp := topic(t, cl, 2, nil)
			recs := interopRecords(tp, 2, 64, "java-"+c.name)
			jp := startJava(t, peer, "produce", "--prop", "enable.idempotence=true", "--prop", "acks=all",
				"--prop", "compression.type="+c.name, "--prop", "linger.ms=50", "--prop", "batch.size=262144")
			javaProduce(t, jp, "flush", recs)
			sameRecords(t, "riffle read_uncommitted", recs, flatten(readAll(t, cl, tp, riffle.ReadUncommitted)))
		})
	}
}

// A Java transactional producer commits, aborts and commits; a Riffle
// read_committed consumer reads exactly the committed records, at their
// offsets, and a read_uncommitted one all three transactions' records.
func TestJavaTransactionsRiffleReadCommitted(t *testing.T) {
	peer := needJava(t)
	cl := client(t)
	tp := topic(t, cl, 2, nil)
	jp := startJava(t, peer, "produce", "--prop", "transactional.id="+name(t, "txn"), "--prop", "compression.type=zstd", "--prop", "linger.ms=20")
	a := interopRecords(tp, 2, 24, "committed-a")
	b := interopRecords(tp, 2, 24, "aborted-b")
	c := interopRecords(tp, 2, 24, "committed-c")
	javaBegin(t, jp)
	javaProduce(t, jp, "commit", a)
	javaBegin(t, jp)
	javaProduce(t, jp, "abort", b)
	javaBegin(t, jp)
	javaProduce(t, jp, "commit", c)
	sameRecords(t, "riffle read_committed", slices.Concat(a, c), flatten(readAll(t, cl, tp, riffle.ReadCommitted)))
	sameRecords(t, "riffle read_uncommitted", slices.Concat(a, b, c), flatten(readAll(t, cl, tp, riffle.ReadUncommitted)))
}

// riffleProducer is an idempotent Riffle producer writing to the
// partition each record names, closed when the test ends.
func riffleProducer(t *testing.T, cl *riffle.Client, opts ...riffle.ProducerOption) *riffle.Producer {
	t.Helper()
	p, err := riffle.NewProducer(cl, append([]riffle.ProducerOption{riffle.WithPartitioner(riffle.ManualPartitioner())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := timeout(t, 30*time.Second)
		_ = p.Close(ctx)
	})
	return p
}

// Riffle's producer (idempotent, acks=all, each codec) writes the same
// records; the Java consumer reads them byte-identical at the offsets
// Riffle reported.
func TestRiffleProducesJavaReads(t *testing.T) {
	peer := needJava(t)
	cl := client(t)
	for _, c := range javaCodecs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tp := topic(t, cl, 2, nil)
			recs := interopRecords(tp, 2, 64, "riffle-"+c.name)
			p := riffleProducer(t, cl, riffle.WithCompression(c.codec), riffle.Linger(50*time.Millisecond))
			if err := p.ProduceSync(timeout(t, time.Minute), recs...); err != nil {
				t.Fatal(err)
			}
			jp := startJava(t, peer, "consume", "--topic", tp)
			sameRecords(t, "java read_uncommitted", recs, javaRead(t, jp))
		})
	}
}

// Riffle's transactional producer commits, aborts and commits; the Java
// consumer under read_committed reads exactly the committed records, under
// read_uncommitted all of them.
func TestRiffleTransactionsJavaReadCommitted(t *testing.T) {
	peer := needJava(t)
	cl := client(t)
	tp := topic(t, cl, 2, nil)
	p := txnProducer(t, cl, name(t, "txn"), riffle.WithPartitioner(riffle.ManualPartitioner()), riffle.WithCompression(riffle.CompressionZstd))
	ctx := timeout(t, 2*time.Minute)
	a := interopRecords(tp, 2, 24, "committed-a")
	b := interopRecords(tp, 2, 24, "aborted-b")
	c := interopRecords(tp, 2, 24, "committed-c")
	for i, batch := range [][]*riffle.Record{a, b, c} {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p.ProduceSync(ctx, batch...); err != nil {
			t.Fatal(err)
		}
		end := p.CommitTransaction
		if i == 1 {
			end = p.AbortTransaction
		}
		if err := end(ctx); err != nil {
			t.Fatal(fmt.Errorf("transaction %d: %w", i, err))
		}
	}
	jc := startJava(t, peer, "consume", "--topic", tp, "--prop", "isolation.level=read_committed")
	sameRecords(t, "java read_committed", slices.Concat(a, c), javaRead(t, jc))
	ju := startJava(t, peer, "consume", "--topic", tp)
	sameRecords(t, "java read_uncommitted", slices.Concat(a, b, c), javaRead(t, ju))
}
