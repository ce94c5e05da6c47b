//go:build unix

package main

// produce: throughput of an idempotent, acks=all producer writing many
// small records, client by client, each against a fresh one-broker kfake
// cluster running in a child process (this binary re-executed with the
// hidden kfake-server subcommand), so that the CPU time and allocations
// measured in this process are the client's alone.
//
// Unix only: client CPU is read with getrusage(RUSAGE_SELF).

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/IBM/sarama"
	"github.com/riffle-go/riffle"
	segkafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register("produce", "idempotent acks=all produce throughput, client CPU and allocations; broker in a child process", runProduce)
	registerHidden("kfake-server", runKfakeServer)
}

// produceLinger is the linger (batch timeout) every client is given.
const produceLinger = 5 * time.Millisecond

// produceSpec is what one client run writes.
type produceSpec struct {
	addr       string // the broker
	topic      string
	records    int
	codec      string // none, lz4 or zstd
	values     valuePool
	keys       *valuePool // nil: no keys
	goroutines int        // producing goroutines (1: the calling one)
}

// key returns record i's key, nil without keys.
func (s produceSpec) key(i int) []byte {
	if s.keys == nil {
		return nil
	}
	return s.keys.at(i)
}

// each calls fn for every record index, from spec.goroutines goroutines
// (goroutine g takes g, g+n, g+2n, ...), and returns when all are done.
func (s produceSpec) each(fn func(i int)) {
	if s.goroutines <= 1 {
		for i := range s.records {
			fn(i)
		}
		return
	}
	var wg sync.WaitGroup
	for g := range s.goroutines {
		wg.Go(func() {
			for i := g; i < s.records; i += s.goroutines {
				fn(i)
			}
		})
	}
	wg.Wait()
}

// produceCounts collects the outcome of every record of one run. Each
// client's callback (or drain goroutine) calls done once per record.
type produceCounts struct {
	ok, failed atomic.Int64
	firstErr   atomic.Pointer[string]
}

func (c *produceCounts) done(err error) {
	if err == nil {
		c.ok.Add(1)
		return
	}
	c.failed.Add(1)
	msg := err.Error()
	c.firstErr.CompareAndSwap(nil, &msg)
}

// doneN records the same outcome for n records.
func (c *produceCounts) doneN(n int, err error) {
	if err == nil {
		c.ok.Add(int64(n))
		return
	}
	c.failed.Add(int64(n))
	msg := err.Error()
	c.firstErr.CompareAndSwap(nil, &msg)
}

// producerUnderTest is one client in produce. run creates the client,
// produces spec.records records asynchronously, waits until every record
// has its outcome (reported to counts), and closes the client. An error
// return means the run itself broke down (construction, flush, close).
type producerUnderTest struct {
	name       string
	module     string
	idempotent bool
	run        func(ctx context.Context, spec produceSpec, counts *produceCounts) error
}

func producersUnderTest() []producerUnderTest {
	return []producerUnderTest{
		{name: "riffle", module: "github.com/riffle-go/riffle", idempotent: true, run: produceRiffle},
		{name: "franz-go", module: "github.com/twmb/franz-go", idempotent: true, run: produceFranz},
		{name: "sarama", module: "github.com/IBM/sarama", idempotent: true, run: produceSarama},
		{name: "kafka-go", module: "github.com/segmentio/kafka-go", idempotent: false, run: produceKafkaGo},
	}
}

// produceRiffle: NewProducer with its defaults (idempotent, acks=all) and
// an explicit 5 ms linger; asynchronous Produce, then Flush and Close.
func produceRiffle(ctx context.Context, spec produceSpec, counts *produceCounts) error {
	codec, err := riffleCodec(spec.codec)
	if err != nil {
		return err
	}
	cl, err := riffle.NewClient(riffle.SeedBrokers(spec.addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	p, err := riffle.NewProducer(cl, riffle.Linger(produceLinger), riffle.WithCompression(codec))
	if err != nil {
		return err
	}
	cb := func(_ *riffle.Record, err error) { counts.done(err) }
	spec.each(func(i int) {
		p.Produce(ctx, &riffle.Record{Topic: spec.topic, Key: spec.key(i), Value: spec.values.at(i)}, cb)
	})
	ferr := p.Flush(ctx)
	cerr := p.Close(ctx)
	return errors.Join(ferr, cerr)
}

// riffleCodec maps a -compression value to Riffle's codec.
func riffleCodec(name string) (riffle.Compression, error) {
	switch name {
	case "none":
		return riffle.CompressionNone, nil
	case "lz4":
		return riffle.CompressionLZ4, nil
	case "zstd":
		return riffle.CompressionZstd, nil
	}
	return 0, fmt.Errorf("-compression %q: want none, lz4 or zstd", name)
}

// produceFranz: kgo defaults (idempotent, acks=all) with a 5 ms linger.
// The codec is always set, since kgo's default is snappy.
func produceFranz(ctx context.Context, spec produceSpec, counts *produceCounts) error {
	var codec kgo.CompressionCodec
	switch spec.codec {
	case "none":
		codec = kgo.NoCompression()
	case "lz4":
		codec = kgo.Lz4Compression()
	case "zstd":
		codec = kgo.ZstdCompression()
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(spec.addr),
		kgo.ProducerLinger(produceLinger),
		kgo.ProducerBatchCompression(codec),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	cb := func(_ *kgo.Record, err error) { counts.done(err) }
	spec.each(func(i int) {
		cl.Produce(ctx, &kgo.Record{Topic: spec.topic, Key: spec.key(i), Value: spec.values.at(i)}, cb)
	})
	return cl.Flush(ctx)
}

// produceSarama: AsyncProducer, idempotent, which sarama only allows with
// acks=all and one open request per broker connection; 5 ms flush
// frequency; successes and errors drained by two goroutines. AsyncClose
// flushes, and closes both channels once every message has its outcome.
func produceSarama(ctx context.Context, spec produceSpec, counts *produceCounts) error {
	cfg := sarama.NewConfig()
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Flush.Frequency = produceLinger
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	switch spec.codec {
	case "none":
		cfg.Producer.Compression = sarama.CompressionNone
	case "lz4":
		cfg.Producer.Compression = sarama.CompressionLZ4
	case "zstd":
		cfg.Producer.Compression = sarama.CompressionZSTD
	}
	p, err := sarama.NewAsyncProducer([]string{spec.addr}, cfg)
	if err != nil {
		return err
	}
	var drained sync.WaitGroup
	drained.Add(2)
	go func() {
		defer drained.Done()
		for range p.Successes() {
			counts.done(nil)
		}
	}()
	go func() {
		defer drained.Done()
		for e := range p.Errors() {
			counts.done(e.Err)
		}
	}()
	var sentN atomic.Int64
	spec.each(func(i int) {
		if ctx.Err() != nil {
			return
		}
		msg := &sarama.ProducerMessage{Topic: spec.topic, Value: sarama.ByteEncoder(spec.values.at(i))}
		if k := spec.key(i); k != nil {
			msg.Key = sarama.ByteEncoder(k)
		}
		select {
		case p.Input() <- msg:
			sentN.Add(1)
		case <-ctx.Done():
		}
	})
	if unsent := spec.records - int(sentN.Load()); unsent > 0 {
		counts.doneN(unsent, fmt.Errorf("not handed to the producer: %w", ctx.Err()))
	}
	p.AsyncClose()
	return waitCtx(ctx, drained.Wait)
}

// produceKafkaGo: a Writer with acks=all, a 5 ms batch timeout and its
// other defaults (batches of at most 100 messages, round-robin balancer),
// in async mode with a Completion callback. kafka-go has no idempotent
// producer. Close flushes and waits for every Completion call.
func produceKafkaGo(ctx context.Context, spec produceSpec, counts *produceCounts) error {
	var codec segkafka.Compression
	switch spec.codec {
	case "lz4":
		codec = segkafka.Lz4
	case "zstd":
		codec = segkafka.Zstd
	}
	tr := &segkafka.Transport{}
	defer tr.CloseIdleConnections()
	w := &segkafka.Writer{
		Addr:         segkafka.TCP(spec.addr),
		Topic:        spec.topic,
		RequiredAcks: segkafka.RequireAll,
		BatchTimeout: produceLinger,
		Async:        true,
		Compression:  codec,
		Transport:    tr,
		Completion: func(msgs []segkafka.Message, err error) {
			counts.doneN(len(msgs), err)
		},
	}
	if spec.keys != nil {
		w.Balancer = &segkafka.Hash{} // by key, as the other clients' defaults do
	}
	spec.each(func(i int) {
		if err := w.WriteMessages(ctx, segkafka.Message{Key: spec.key(i), Value: spec.values.at(i)}); err != nil {
			counts.done(fmt.Errorf("WriteMessages: %w", err))
		}
	})
	var closeErr error
	if err := waitCtx(ctx, func() { closeErr = w.Close() }); err != nil {
		return err
	}
	return closeErr
}

// waitCtx runs fn and waits for it, or for ctx to end.
func waitCtx(ctx context.Context, fn func()) error {
	done := make(chan struct{})
	go func() { fn(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the last outcomes: %w", ctx.Err())
	}
}

// valuePool holds the record values: n distinct values of size bytes each,
// laid out in one buffer, so producing allocates nothing for payloads and
// the allocation count is the client's. Each value is JSON-like text, a
// sequence number, user and timestamp field then random hex digits, so
// compression has something realistic to work on (repeated field names,
// similar numbers) but cannot collapse a batch to nothing.
type valuePool struct {
	buf  []byte
	size int
	n    int
}

// newKeyPool returns n distinct keys, "key-0000000" and on, in one buffer.
func newKeyPool(n int) valuePool {
	const size = 11
	buf := make([]byte, 0, size*n)
	for i := range n {
		buf = fmt.Appendf(buf, "key-%07d", i)
	}
	return valuePool{buf: buf, size: size, n: n}
}

func newValuePool(size, n int) valuePool {
	rng := rand.New(rand.NewPCG(1, 2))
	const hex = "0123456789abcdef"
	buf := make([]byte, 0, size*n)
	ts := int64(1_760_000_000_000)
	for i := range n {
		v := fmt.Appendf(nil, `{"seq":%08d,"user":"u%05d","ts":%d,"data":"`, i, rng.IntN(100000), ts+int64(i)*7)
		for len(v) < size-2 {
			v = append(v, hex[rng.IntN(16)])
		}
		v = append(v, `"}`...)
		buf = append(buf, v[:size]...)
	}
	return valuePool{buf: buf, size: size, n: n}
}

// at returns record i's value (shared, read-only; capacity capped so an
// append by a client could not write into the neighbour).
func (p valuePool) at(i int) []byte {
	off := (i % p.n) * p.size
	return p.buf[off : off+p.size : off+p.size]
}

// cpuTime is this process's user+system CPU time so far. The broker is a
// child process, so its CPU is not in here (RUSAGE_SELF excludes
// children).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAvg returns /proc/loadavg's three averages, or "?" where unavailable.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// produceResult is one timed run of one client.
type produceResult struct {
	wall       time.Duration
	cpu        time.Duration // this process, user+sys
	brokerCPU  time.Duration // the kfake child, user+sys, over its lifetime
	allocBytes uint64
	ok, failed int64
	missing    int64 // records that never got an outcome
	// onBroker is how far the broker's offsets advanced over the run (the
	// sum of the partitions' high watermarks, read after Close): the
	// records it appended. It must equal ok; more means duplicates.
	onBroker    int64
	onBrokerErr error
	firstErr    string
	runErr      error
}

func (r produceResult) valid() bool {
	return r.runErr == nil && r.failed == 0 && r.missing == 0 && r.onBrokerErr == nil && r.onBroker == r.ok
}

func (r produceResult) recsPerSec(records int) float64 {
	return float64(records) / r.wall.Seconds()
}

// produceOnce starts a fresh broker process, runs one client against it and
// measures the run.
func produceOnce(ctx context.Context, p producerUnderTest, spec produceSpec, partitions int, blackhole bool, timeout time.Duration, cpuProfile string) (produceResult, error) {
	srv, err := startKfakeServer(ctx, spec.topic, partitions, blackhole)
	if err != nil {
		return produceResult{}, err
	}
	spec.addr = srv.addr

	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0 := cpuTime()
	start := time.Now()

	var counts produceCounts
	rctx, cancel := context.WithTimeout(ctx, timeout)
	stopProfile := profiling(cpuProfile)
	runErr := p.run(rctx, spec, &counts)
	stopProfile()
	cancel()

	wall := time.Since(start)
	cpu1 := cpuTime()
	runtime.ReadMemStats(&m1)

	res := produceResult{
		wall:       wall,
		cpu:        cpu1 - cpu0,
		allocBytes: m1.TotalAlloc - m0.TotalAlloc,
		ok:         counts.ok.Load(),
		failed:     counts.failed.Load(),
		runErr:     runErr,
	}
	res.missing = int64(spec.records) - res.ok - res.failed
	if res.missing < 0 {
		// More outcomes than records: a client reported some twice.
		// That is as wrong as a lost one.
		res.runErr = errors.Join(res.runErr, fmt.Errorf("%d more outcomes than records", -res.missing))
		res.missing = 0
	}
	if e := counts.firstErr.Load(); e != nil {
		res.firstErr = *e
	}
	res.onBroker, res.onBrokerErr = brokerRecords(ctx, srv.addr, spec.topic, partitions)
	res.brokerCPU, err = srv.stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "produce: %s: stopping the broker: %v\n", p.name, err)
	}
	// Let the client's leftovers (closing connections, timers) settle
	// before the next client is measured.
	runtime.GC()
	time.Sleep(200 * time.Millisecond)
	return res, nil
}

// brokerRecords returns the sum of the topic's high watermarks: with a
// fresh broker, the number of records it appended (kfake's
// BlackholeProduce still advances offsets).
func brokerRecords(ctx context.Context, addr, topic string, partitions int) (int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = int32(p)
		rp.Timestamp = -1 // latest: the high watermark
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, fmt.Errorf("listing offsets: %w", err)
	}
	var sum int64
	seen := 0
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return 0, fmt.Errorf("listing offsets of %s[%d]: %w", t.Topic, p.Partition, err)
			}
			sum += p.Offset
			seen++
		}
	}
	if seen != partitions {
		return 0, fmt.Errorf("listing offsets: %d partitions answered, want %d", seen, partitions)
	}
	return sum, nil
}

func runProduce(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	records := fs.Int("records", 1_000_000, "records to produce per client")
	size := fs.Int("size", 100, "value bytes per record (no key)")
	compression := fs.String("compression", "none", "codec: none, lz4 or zstd")
	only := fs.String("clients", "", "comma-separated clients to run (default all); riffle is always run")
	blackhole := fs.Bool("blackhole", true, "kfake BlackholeProduce: the broker acknowledges records and discards them (use -blackhole=false to store them)")
	partitions := fs.Int("partitions", 12, "partitions of the topic")
	rounds := fs.Int("rounds", 3, "runs per client, in rounds; the run with the median throughput is shown")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up on one client run after this long")
	goroutines := fs.Int("goroutines", 1, "goroutines producing at once (records are dealt out round-robin)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of riffle's runs (only) to this file (file, file.2, ... per run)")
	keys := fs.Int("keys", 0, "distinct record keys (0: no keys); keyed records go to their key's partition by each client's default hash partitioner")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *records < 1 || *size < 1 || *partitions < 1 || *rounds < 1 || *timeout <= 0 || *goroutines < 1 || *keys < 0:
		return errors.New("-records, -size, -partitions, -rounds, -timeout and -goroutines must be positive, -keys not negative")
	case *compression != "none" && *compression != "lz4" && *compression != "zstd":
		return fmt.Errorf("-compression %q: want none, lz4 or zstd", *compression)
	}

	all := producersUnderTest()
	var selected []producerUnderTest
	if *only == "" {
		selected = all
	} else {
		want := map[string]bool{"riffle": true}
		for n := range strings.SplitSeq(*only, ",") {
			want[strings.TrimSpace(n)] = true
		}
		for _, p := range all {
			if want[p.name] {
				selected = append(selected, p)
				delete(want, p.name)
			}
		}
		for n := range want {
			return fmt.Errorf("unknown client %q", n)
		}
	}

	spec := produceSpec{
		topic:   "bench",
		records: *records,
		codec:   *compression,
		// 10007 distinct values (a prime, so the cycle does not line up
		// with partitions or batches), fewer for big values: at most 16 MiB.
		values:     newValuePool(*size, min(10007, max(1, (16<<20) / *size))),
		goroutines: *goroutines,
	}
	keyDesc := "no key"
	if *keys > 0 {
		kp := newKeyPool(*keys)
		spec.keys = &kp
		keyDesc = fmt.Sprintf("%d distinct keys", *keys)
	}
	storage := "BlackholeProduce on: records are validated (CRC, idempotent sequences) and acknowledged, then discarded"
	if !*blackhole {
		storage = "BlackholeProduce off: kfake stores every record in memory"
	}
	fmt.Printf("produce: %d records of %d bytes (%s) to %q, %d partitions, from %d goroutine(s); acks=all, linger %s, compression %s\n",
		*records, *size, keyDesc, spec.topic, *partitions, *goroutines, fmtDur(produceLinger), *compression)
	fmt.Printf("broker: 1 kfake broker in a child process, fresh for every client run; %s\n", storage)
	fmt.Printf("measured in this process from client construction to Close: wall time, CPU (getrusage RUSAGE_SELF), bytes allocated (TotalAlloc)\n")
	fmt.Printf("GOMAXPROCS %d, %d CPUs; load average before: %s\n\n", runtime.GOMAXPROCS(0), runtime.NumCPU(), loadAvg())

	results := map[string][]produceResult{}
	for r := range *rounds {
		for _, p := range selected {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			prof := ""
			if p.name == "riffle" {
				prof = *cpuProfile
			}
			res, err := produceOnce(ctx, p, spec, *partitions, *blackhole, *timeout, prof)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, p.name, err)
			}
			results[p.name] = append(results[p.name], res)
		}
	}

	// Per client, the run with the median throughput; errors over all runs.
	type row struct {
		res             produceResult
		failed, missing int64
		invalid         bool
		runs            []string // records/s of every run, in order
		note            string
	}
	rows := map[string]row{}
	for _, p := range selected {
		rs := slices.Clone(results[p.name])
		slices.SortFunc(rs, func(a, b produceResult) int { return cmp.Compare(a.wall, b.wall) })
		rw := row{res: rs[len(rs)/2]}
		var notes []string
		for _, x := range results[p.name] { // in run order
			mark := ""
			if !x.valid() {
				mark = "!"
			}
			rw.runs = append(rw.runs, fmt.Sprintf("%.0fk%s", x.recsPerSec(*records)/1000, mark))
			rw.failed += x.failed
			rw.missing += x.missing
			if !x.valid() {
				rw.invalid = true
			}
			if x.runErr != nil {
				notes = append(notes, "run error: "+oneLine(x.runErr, 80))
			}
			if x.firstErr != "" {
				notes = append(notes, "first error: "+oneLine(errors.New(x.firstErr), 80))
			}
			switch {
			case x.onBrokerErr != nil:
				notes = append(notes, "broker count: "+oneLine(x.onBrokerErr, 80))
			case x.onBroker != x.ok:
				notes = append(notes, fmt.Sprintf("broker appended %d records, client acknowledged %d", x.onBroker, x.ok))
			}
		}
		if !p.idempotent {
			notes = append([]string{"NOT idempotent (kafka-go has no idempotent producer)"}, notes...)
		}
		var uniq []string
		for _, n := range notes {
			if !slices.Contains(uniq, n) {
				uniq = append(uniq, n)
			}
		}
		rw.note = strings.Join(uniq, "; ")
		rows[p.name] = rw
	}

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "client\tversion\tidempotent\twall\trecords/s\tMB/s\tclient CPU\tCPU µs/rec\talloc B/rec\tbroker CPU\terrors\tmissing\ton broker\tall runs rec/s\t  note")
	mb := float64(*records) * float64(*size) / 1e6
	for _, p := range selected {
		rw := rows[p.name]
		r := rw.res
		rate := fmt.Sprintf("%.0f", r.recsPerSec(*records))
		mbs := fmt.Sprintf("%.1f", mb/r.wall.Seconds())
		if rw.invalid {
			rate, mbs = "invalid", "invalid"
		}
		idem := "yes"
		if !p.idempotent {
			idem = "NO"
		}
		onBroker := strconv.FormatInt(r.onBroker, 10)
		if r.onBrokerErr != nil {
			onBroker = "?"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.2fs\t%.2f\t%.0f\t%.2fs\t%d\t%d\t%s\t%s\t  %s\n",
			p.name, modVersion(p.module), idem, fmtDur(r.wall), rate, mbs,
			r.cpu.Seconds(), float64(r.cpu.Microseconds())/float64(*records),
			float64(r.allocBytes)/float64(*records), r.brokerCPU.Seconds(),
			rw.failed, rw.missing, onBroker, strings.Join(rw.runs, " "), rw.note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Println()
	if *rounds > 1 {
		fmt.Printf("%d rounds; each row is the client's run with the median wall time; errors and missing are summed over all runs;\n", *rounds)
		fmt.Println("all runs rec/s lists every run in order (k = thousand records/s, ! = that run was invalid).")
	}
	fmt.Println("MB/s counts value bytes. client CPU and alloc include building each client's record structs (one per record, as each API needs).")
	fmt.Println("errors: records whose callback reported an error; missing: records that never got an outcome; on broker: records the broker appended")
	fmt.Println("(sum of high watermarks after Close), which must equal the records acknowledged. Any error, missing outcome or mismatch in any run")
	fmt.Println("marks the client's throughput invalid. broker CPU is the kfake process's, from start to exit.")
	fmt.Printf("load average after: %s\n", loadAvg())

	rate := func(name string) (float64, string) {
		rw, ok := rows[name]
		switch {
		case !ok:
			return 0, name + " not run"
		case rw.invalid:
			return 0, name + " invalid (errors, missing outcomes or a broker count mismatch)"
		}
		return rw.res.recsPerSec(*records), ""
	}
	riffleRate, riffleWhy := rate("riffle")

	best, bestRate := "", 0.0
	for _, p := range selected {
		if p.name == "riffle" {
			continue
		}
		if r, why := rate(p.name); why == "" && r > bestRate {
			best, bestRate = p.name, r
		}
	}
	switch {
	case best == "":
		fmt.Println("best peer: none (no valid peer run)")
	case riffleWhy != "":
		fmt.Printf("best peer: %s at %.0f records/s; riffle/%s throughput ratio: n/a (%s)\n", best, bestRate, best, riffleWhy)
	default:
		extra := ""
		if p := slices.IndexFunc(selected, func(p producerUnderTest) bool { return p.name == best }); !selected[p].idempotent {
			extra = " (not idempotent)"
		}
		fmt.Printf("best peer: %s%s at %.0f records/s; riffle/%s throughput ratio: %.2f\n", best, extra, bestRate, best, riffleRate/bestRate)
	}

	franzRate, franzWhy := rate("franz-go")
	medianCPU := func(name string) time.Duration {
		var cs []time.Duration
		for _, r := range results[name] {
			cs = append(cs, r.cpu)
		}
		return median(cs)
	}
	switch {
	case riffleWhy != "":
		fmt.Printf("produce riffle/franz-go throughput ratio: n/a (%s)\n", riffleWhy)
		fmt.Printf("produce riffle/franz-go cpu ratio: n/a (%s)\n", riffleWhy)
	case franzWhy != "":
		fmt.Printf("produce riffle/franz-go throughput ratio: n/a (%s)\n", franzWhy)
		fmt.Printf("produce riffle/franz-go cpu ratio: n/a (%s)\n", franzWhy)
	default:
		fmt.Printf("produce riffle/franz-go throughput ratio: %.2f\n", riffleRate/franzRate)
		fmt.Printf("produce riffle/franz-go cpu ratio: %.2f\n", medianCPU("riffle").Seconds()/medianCPU("franz-go").Seconds())
	}
	return nil
}

// kfakeServer is a running kfake-server child process.
type kfakeServer struct {
	addr  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startKfakeServer re-executes this binary as "kfake-server" and waits for
// the broker address it prints.
func startKfakeServer(ctx context.Context, topic string, partitions int, blackhole bool) (*kfakeServer, error) {
	return startKfakeServerArgs(ctx, topic, partitions, blackhole)
}

// startKfakeServerArgs is startKfakeServer with more kfake-server flags
// (e.g. "-max-message-bytes", "2097152").
func startKfakeServerArgs(ctx context.Context, topic string, partitions int, blackhole bool, extra ...string) (*kfakeServer, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this binary to start the broker: %w", err)
	}
	args := append([]string{"kfake-server",
		"-topic", topic,
		"-partitions", strconv.Itoa(partitions),
		"-blackhole=" + strconv.FormatBool(blackhole)}, extra...)
	cmd := exec.Command(exe, args...)
	return startServerProcess(ctx, cmd)
}

// startServerProcess starts a broker subprocess and waits for the
// "addr host:port" line it prints once listening.
func startServerProcess(ctx context.Context, cmd *exec.Cmd) (*kfakeServer, error) {
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the broker process: %w", err)
	}
	srv := &kfakeServer{cmd: cmd, stdin: stdin}
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		if s.Scan() {
			line <- s.Text()
		}
		close(line)
		io.Copy(io.Discard, stdout)
	}()
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case l, ok := <-line:
		if ok && strings.HasPrefix(l, "addr ") {
			srv.addr = strings.TrimPrefix(l, "addr ")
			return srv, nil
		}
		srv.stop()
		return nil, fmt.Errorf("broker process printed %q, want \"addr host:port\"", l)
	case <-t.C:
		srv.stop()
		return nil, errors.New("broker process did not print its address within 30s")
	case <-ctx.Done():
		srv.stop()
		return nil, ctx.Err()
	}
}

// stop closes the child's stdin, which makes it exit, killing it if it has
// not within 5 s, and returns the CPU time it used.
func (s *kfakeServer) stop() (time.Duration, error) {
	s.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		err = fmt.Errorf("did not exit within 5s of stdin closing; killed (%v)", <-done)
	}
	if s.cmd.ProcessState == nil {
		return 0, err
	}
	return s.cmd.ProcessState.UserTime() + s.cmd.ProcessState.SystemTime(), err
}

// runKfakeServer is the child process: one kfake broker with the topic
// seeded, its address printed as "addr host:port" on stdout, running until
// stdin reaches EOF (the parent closed it or died) or a signal arrives.
func runKfakeServer(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("kfake-server", flag.ContinueOnError)
	topic := fs.String("topic", "bench", "topic to create")
	partitions := fs.Int("partitions", 12, "its partitions")
	blackhole := fs.Bool("blackhole", true, "kfake.BlackholeProduce: acknowledge produced records, store nothing")
	maxMessage := fs.Int("max-message-bytes", 0, "if positive: the broker's message.max.bytes and the topic's max.message.bytes (kfake's default is 1048588)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts := []kfake.Opt{kfake.NumBrokers(1)}
	if *maxMessage <= 0 {
		opts = append(opts, kfake.SeedTopics(int32(*partitions), *topic))
	} else {
		// The topic is created with its own max.message.bytes: kfake
		// reports a broker-level message.max.bytes in DescribeConfigs
		// under the broker's name only, so a client reading the topic's
		// max.message.bytes (Riffle's producer does) would see the
		// default.
		opts = append(opts, kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(*maxMessage)}))
	}
	if *blackhole {
		opts = append(opts, kfake.BlackholeProduce())
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	if *maxMessage > 0 {
		if err := c.CreateTopic(*topic, int32(*partitions), map[string]string{"max.message.bytes": strconv.Itoa(*maxMessage)}); err != nil {
			return fmt.Errorf("creating %s: %w", *topic, err)
		}
	}
	addrs := c.ListenAddrs()
	if len(addrs) != 1 {
		return fmt.Errorf("kfake listens on %d addresses, want 1", len(addrs))
	}
	fmt.Printf("addr %s\n", addrs[0])

	eof := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGHUP)
	defer stop()
	select {
	case <-eof:
	case <-ctx.Done():
	}
	return nil
}
