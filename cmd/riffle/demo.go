package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/process"
	"github.com/spf13/cobra"
)

// demo is the state the demo steps share. A step reads what earlier steps
// left here and adds its own results.
type demo struct {
	client *riffle.Client
	out    io.Writer // indented under the step's title
	// raw is the output itself and tty whether it is a terminal: progress
	// is then redrawn in place, past the indentation.
	raw io.Writer
	tty bool
	// newClient returns another client to the cluster: a client carries
	// one group member at most. The caller closes it.
	newClient func() (*riffle.Client, error)
	timeout   time.Duration // --timeout, to bound closing

	// Settings, from the flags.
	topic       string
	partitions  int32
	replication int16 // 0: min(3, brokers), decided by the connect step

	// Results of earlier steps.
	cluster clusterJSON
}

// demoStep is one step of the demo. To add a step, write a function with
// the signature of run and add it to demoSteps at the right place.
type demoStep struct {
	// title is printed before the step runs; it may use earlier results.
	title func(d *demo) string
	// run does the step, printing its results to d.out. Methods of demo
	// fit: (*demo).createTopic.
	run func(d *demo, ctx context.Context) error
}

// demoSteps is the demo, in order.
func demoSteps() []demoStep {
	return []demoStep{
		{
			title: func(*demo) string { return "Connect to the cluster" },
			run:   (*demo).connect,
		},
		{
			title: func(d *demo) string {
				return fmt.Sprintf("Create topic %q with %d partitions, replication factor %d", d.topic, d.partitions, d.replication)
			},
			run: (*demo).createTopic,
		},
		{
			title: func(*demo) string { return "List topics" },
			run:   (*demo).listTopics,
		},
		{
			title: func(d *demo) string { return fmt.Sprintf("Describe topic %q", d.topic) },
			run:   (*demo).describeTopic,
		},
		{
			title: func(d *demo) string {
				return fmt.Sprintf("Produce %d records to %q", demoProduceRecords, d.topic)
			},
			run: (*demo).produce,
		},
		{
			title: func(*demo) string { return "A slow partition does not hold up the others" },
			run:   (*demo).slowPartition,
		},
		{
			title: func(*demo) string {
				return "A slow handler on one partition: one record at a time, or many keys at once"
			},
			run: (*demo).parallel,
		},
		{
			title: func(*demo) string {
				return fmt.Sprintf("Consumer group %q: a member leaves, the other takes over", demoGroup)
			},
			run: (*demo).groupHandover,
		},
		{
			title: func(*demo) string {
				return "Transactions: read_committed readers see a committed one, never an aborted one"
			},
			run: (*demo).transactions,
		},
	}
}

func (d *demo) connect(ctx context.Context) error {
	c, err := describeCluster(ctx, d.client, false)
	if err != nil {
		return err
	}
	d.cluster = c
	if d.replication == 0 {
		d.replication = int16(min(3, len(c.Brokers)))
	}
	printCluster(d.out, c)
	return nil
}

func (d *demo) createTopic(ctx context.Context) error {
	results, err := d.client.Admin().CreateTopics(ctx, riffle.TopicSpec{
		Name: d.topic, Partitions: d.partitions, ReplicationFactor: d.replication,
	})
	if err != nil {
		return err
	}
	switch err := results.Err(); {
	case err == nil:
		fmt.Fprintf(d.out, "created topic %q\n", d.topic)
	case errors.Is(err, riffle.ErrTopicAlreadyExists):
		// Running the demo twice against the same cluster is fine.
		fmt.Fprintf(d.out, "topic %q already exists; using it\n", d.topic)
	default:
		return err
	}
	return nil
}

func (d *demo) listTopics(ctx context.Context) error {
	topics, err := listTopics(ctx, d.client, false)
	if err != nil {
		return err
	}
	printTopicList(d.out, topics)
	for _, t := range topics {
		if t.Name == d.topic {
			return nil
		}
	}
	return fmt.Errorf("topic %q is not in the list", d.topic)
}

func (d *demo) describeTopic(ctx context.Context) error {
	topics, err := describeTopics(ctx, d.client, []string{d.topic})
	if err != nil {
		return err
	}
	t := topics[0]
	if len(t.errs) > 0 {
		return errors.Join(t.errs...)
	}
	printTopicDescription(d.out, t)
	return nil
}

func (a *app) demoCmd() *cobra.Command {
	d := &demo{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Walk through what riffle can do, step by step",
		Long: `Run a short tour of riffle, printing each step and its result: connect to
the cluster and describe it, create a topic, list the topics, and describe
the new topic's partitions, offsets and configs; then produce 10,000
records to it, show a consumer whose slow partition does not hold up the
others, process one partition with a slow handler one record at a time and
then by key, many keys at once (riffle/process), hand partitions over
between two members of consumer group "riffle-demo" without losing a record,
and write one transaction that aborts and one that commits: a
read_committed reader sees only the committed one, a read_uncommitted
reader both.

Without --brokers the demo runs against an embedded cluster that goes away
when it ends. Against a real cluster the topic is left in place; remove it
with "riffle topic delete". If the topic already exists it is reused. The
last four steps use topics of their own, which they delete when done.`,
		Example: `  riffle demo
  riffle demo --topic tour -p 3
  riffle --brokers localhost:9092 demo`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&d.topic, "topic", "riffle-demo", "`TOPIC` to create")
	cmd.Flags().Int32VarP(&d.partitions, "partitions", "p", 6, "number `N` of partitions of the topic")
	cmd.Flags().Int16VarP(&d.replication, "replication", "r", 0, "replication factor `N` (0: up to 3, as many as there are brokers)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if d.topic == "" {
			return usageErrorf("--topic is empty")
		}
		if d.partitions < 1 {
			return usageErrorf("--partitions must be positive, got %d", d.partitions)
		}
		if d.replication < 0 {
			return usageErrorf("--replication must not be negative, got %d", d.replication)
		}
		cl, err := a.connect()
		if err != nil {
			return err
		}
		d.client = cl
		d.raw, d.tty = a.stdout, isTerminal(a.stdout)
		d.newClient = func() (*riffle.Client, error) { return a.newClient() }
		d.timeout = a.timeout
		return runDemo(a.context(), a.stdout, d, demoSteps())
	}
	return cmd
}

// runDemo runs the steps in order, stopping at the first failure.
func runDemo(ctx context.Context, w io.Writer, d *demo, steps []demoStep) error {
	start := time.Now()
	d.out = newIndentWriter(w, "      ")
	for i, s := range steps {
		title := s.title(d)
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "[%d/%d] %s\n", i+1, len(steps), title)
		t0 := time.Now()
		if err := s.run(d, ctx); err != nil {
			return fmt.Errorf("demo step %d/%d (%s): %w", i+1, len(steps), title, err)
		}
		fmt.Fprintf(d.out, "(%s)\n", roundDuration(time.Since(t0)))
	}
	fmt.Fprintf(w, "\nDemo complete: %d steps in %s.\n", len(steps), roundDuration(time.Since(start)))
	return nil
}

// roundDuration keeps durations readable: 1.234ms, 56ms, 1.2s.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond)
	case d < time.Second:
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(10 * time.Millisecond)
}

// What the produce, slow-partition and group steps do.
const (
	demoProduceRecords  = 10000
	demoProduceRate     = 20000 // records/s: half a second of progress to watch
	demoSlowPerPart     = 100   // records on each of the 3 partitions
	demoSlowDelay       = 20 * time.Millisecond
	demoGroup           = "riffle-demo"
	demoGroupPartitions = 6
	demoGroupRecords    = 3000
	demoGroupRate       = 1500 // records/s: production lasts 2 s
	demoHandoverAfter   = time.Second

	demoTxnRecords = 3 // per transaction

	demoParallelRecords     = 400 // on one partition
	demoParallelKeys        = 32
	demoParallelDelay       = 10 * time.Millisecond
	demoParallelConcurrency = 64
)

func (d *demo) produce(ctx context.Context) error {
	cfg := produceConfig{
		topic: d.topic, count: demoProduceRecords, size: 100, keys: 100, rate: demoProduceRate,
		compression: "lz4", acks: "all", linger: 5 * time.Millisecond, partition: -1,
	}
	opts, err := cfg.producerOptions()
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "%d records of %d bytes over %d keys at %d records/s (--rate), lz4, acks=all (idempotent)\n",
		cfg.count, cfg.size, cfg.keys, demoProduceRate)
	prog := progressSpec{w: d.out, every: 100 * time.Millisecond}
	if d.tty {
		prog = progressSpec{w: d.raw, tty: true, prefix: "      "}
	}
	res, err := produceRecords(ctx, d.client, &cfg, opts, newGeneratedSource(&cfg), prog, d.timeout)
	if res != nil {
		res.print(d.out)
	}
	if err != nil {
		return err
	}
	if res.failed > 0 {
		return fmt.Errorf("%d records failed, first: %s", res.failed, res.firstErrs[0])
	}
	return nil
}

// scratchTopic creates a topic for one step, named after the demo topic,
// and returns a function deleting it. A leftover of an earlier run (a real
// cluster may take a while to delete one) makes it pick a fresh name.
func (d *demo) scratchTopic(ctx context.Context, suffix string, partitions int32) (string, func(), error) {
	name := d.topic + "-" + suffix
	for attempt := 0; ; attempt++ {
		results, err := d.client.Admin().CreateTopics(ctx, riffle.TopicSpec{
			Name: name, Partitions: partitions, ReplicationFactor: d.replication,
		})
		if err != nil {
			return "", nil, err
		}
		err = results.Err()
		if err == nil {
			break
		}
		if !errors.Is(err, riffle.ErrTopicAlreadyExists) || attempt > 0 {
			return "", nil, err
		}
		name = fmt.Sprintf("%s-%s-%s", d.topic, suffix, strconv.FormatInt(time.Now().UnixMilli(), 36))
	}
	fmt.Fprintf(d.out, "created topic %q with %d partitions\n", name, partitions)
	return name, func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		results, err := d.client.Admin().DeleteTopics(dctx, name)
		if err == nil {
			err = results.Err()
		}
		if err != nil {
			fmt.Fprintf(d.out, "could not delete topic %q: %s\n", name, errText(err))
			return
		}
		fmt.Fprintf(d.out, "deleted topic %q\n", name)
	}, nil
}

// slowPartition is the seed-000 scenario (kafkajs #683) live: one
// partition's handler is slow, and the others still finish at once.
func (d *demo) slowPartition(ctx context.Context) error {
	topic, cleanup, err := d.scratchTopic(ctx, "slow", 3)
	if err != nil {
		return err
	}
	defer cleanup()
	p, err := riffle.NewProducer(d.client, riffle.WithPartitioner(riffle.ManualPartitioner()))
	if err != nil {
		return err
	}
	var recs []*riffle.Record
	for i := 0; i < 3*demoSlowPerPart; i++ {
		recs = append(recs, &riffle.Record{Topic: topic, Partition: int32(i % 3), Value: []byte(fmt.Sprint("record ", i))})
	}
	err = p.ProduceSync(ctx, recs...)
	p.Close(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "produced %d records per partition; the handler takes %v per record on partition 0, nothing on 1 and 2\n\n",
		demoSlowPerPart, demoSlowDelay)

	var done [3]atomic.Int64
	cs, err := riffle.NewConsumer(d.client, riffle.HandleRecord(func(hctx context.Context, r *riffle.Record) error {
		if r.Partition == 0 && !sleepCtx(hctx, demoSlowDelay) {
			return hctx.Err()
		}
		done[r.Partition].Add(1)
		return nil
	}))
	if err != nil {
		return err
	}
	defer func() {
		// Partition 0's handler honours its context: closing does not
		// wait for the rest of its records.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 100*time.Millisecond)
		defer cancel()
		cs.Close(cctx)
	}()
	for part := int32(0); part < 3; part++ {
		if err := cs.Assign(riffle.Assignment{TopicPartition: riffle.TopicPartition{Topic: topic, Partition: part}, Start: riffle.AtEarliest()}); err != nil {
			return err
		}
	}
	start := time.Now()
	row := func() {
		cell := func(p int) string { return fmt.Sprintf("%d/%d", done[p].Load(), demoSlowPerPart) }
		fmt.Fprintf(d.out, "%-9s %-13s %-13s %s\n", roundDuration(time.Since(start)).Round(time.Millisecond), cell(0), cell(1), cell(2))
	}
	fmt.Fprintf(d.out, "%-9s %-13s %-13s %s\n", "ELAPSED", "PARTITION 0", "PARTITION 1", "PARTITION 2")
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	nextRow := start.Add(200 * time.Millisecond)
	deadline := start.Add(10 * time.Second)
	for done[1].Load() < demoSlowPerPart || done[2].Load() < demoSlowPerPart {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case now := <-poll.C:
			if now.After(deadline) {
				return fmt.Errorf("partitions 1 and 2 not consumed within 10s")
			}
			if now.After(nextRow) {
				row()
				nextRow = nextRow.Add(200 * time.Millisecond)
			}
		}
	}
	took := time.Since(start)
	p0 := done[0].Load()
	row()
	fmt.Fprintf(d.out, "\npartitions 1 and 2 finished in %s while partition 0 had done %d of %d records\n(it needs %v at %v a record); stopping the consumer\n",
		roundDuration(took), p0, demoSlowPerPart, demoSlowPerPart*demoSlowDelay, demoSlowDelay)
	return nil
}

// parallel processes one partition whose handler is slow (simulated I/O)
// twice with riffle/process: by partition, one record at a time as a plain
// consumer does, then by key, where records of different keys run at once
// and each key's records still run one at a time, in order.
func (d *demo) parallel(ctx context.Context) error {
	topic, cleanup, err := d.scratchTopic(ctx, "parallel", 1)
	if err != nil {
		return err
	}
	defer cleanup()
	p, err := riffle.NewProducer(d.client, riffle.WithPartitioner(riffle.ManualPartitioner()))
	if err != nil {
		return err
	}
	recs := make([]*riffle.Record, demoParallelRecords)
	for i := range recs {
		recs[i] = &riffle.Record{Topic: topic, Partition: 0,
			Key: fmt.Appendf(nil, "key-%02d", i%demoParallelKeys), Value: []byte(fmt.Sprint("record ", i))}
	}
	err = p.ProduceSync(ctx, recs...)
	p.Close(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "produced %d records over %d keys to its one partition; the handler takes %v per record (simulated I/O)\n\n",
		demoParallelRecords, demoParallelKeys, demoParallelDelay)

	fmt.Fprintf(d.out, "%-10s %-12s %-8s %-9s %s\n", "MODE", "CONCURRENCY", "AT ONCE", "TOOK", "RECORDS/S")
	var took [2]time.Duration
	for i, mode := range []process.Mode{process.ByPartition, process.ByKey} {
		run, err := d.processOnce(ctx, topic, mode)
		if err != nil {
			return fmt.Errorf("%s mode: %w", mode, err)
		}
		took[i] = run.took
		fmt.Fprintf(d.out, "%-10s %-12d %-8d %-9s %.0f\n", mode, demoParallelConcurrency, run.peak,
			roundDuration(run.took).Round(time.Millisecond), float64(demoParallelRecords)/run.took.Seconds())
	}
	fmt.Fprintf(d.out, "\nspeed-up by key: %.1fx. By partition runs one record at a time whatever the concurrency;\n", took[0].Seconds()/took[1].Seconds())
	fmt.Fprintf(d.out, "by key runs all %d keys at once, each key's records in offset order (checked: no overlap, no\nreordering, every record once). Timed from the first record's start to the last one's end.\n",
		demoParallelKeys)
	return nil
}

// processRun is one pass of the parallel step.
type processRun struct {
	took time.Duration // from the first record's start to the last one's end
	peak int           // records running at once, at most
}

// processOnce handles every record of partition 0 of topic with a
// processor in mode, checking the ordering the mode promises: one record
// at a time in partition mode, one per key in key mode, in offset order.
func (d *demo) processOnce(ctx context.Context, topic string, mode process.Mode) (processRun, error) {
	var (
		mu          sync.Mutex
		first, last time.Time
		running     int
		run         processRun
		finished    int
		busy        = map[string]bool{}
		next        = map[string]int64{} // the offset after the last one started, per ordering key
		seen        = map[int64]bool{}
		problem     error
		allDone     = make(chan struct{})
		orderingKey = func(r *riffle.Record) string { return string(r.Key) }
	)
	if mode == process.ByPartition {
		orderingKey = func(*riffle.Record) string { return "" }
	}
	pr, err := process.New(d.client, func(hctx context.Context, r *riffle.Record) error {
		k := orderingKey(r)
		mu.Lock()
		if first.IsZero() {
			first = time.Now()
		}
		switch {
		case seen[r.Offset]:
			problem = errors.Join(problem, fmt.Errorf("record %d handled twice", r.Offset))
		case busy[k] || r.Offset < next[k]:
			problem = errors.Join(problem, fmt.Errorf("record %d started out of order", r.Offset))
		}
		seen[r.Offset], busy[k], next[k] = true, true, r.Offset+1
		running++
		run.peak = max(run.peak, running)
		mu.Unlock()
		slept := sleepCtx(hctx, demoParallelDelay)
		mu.Lock()
		defer mu.Unlock()
		running--
		delete(busy, k)
		if !slept {
			return hctx.Err()
		}
		finished++
		if finished == demoParallelRecords {
			last = time.Now()
			close(allDone)
		}
		return nil
	}, process.Ordering(mode), process.Concurrency(demoParallelConcurrency))
	if err != nil {
		return run, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.timeout)
		defer cancel()
		pr.Close(cctx)
	}()
	if err := pr.Assign(riffle.Assignment{TopicPartition: riffle.TopicPartition{Topic: topic, Partition: 0}, Start: riffle.AtEarliest()}); err != nil {
		return run, err
	}
	limit := time.NewTimer(demoParallelRecords*demoParallelDelay + 10*time.Second)
	defer limit.Stop()
	select {
	case <-ctx.Done():
		return run, ctx.Err()
	case <-limit.C:
		mu.Lock()
		defer mu.Unlock()
		return run, fmt.Errorf("%d of %d records handled in time", finished, demoParallelRecords)
	case <-allDone:
	}
	mu.Lock()
	defer mu.Unlock()
	run.took = last.Sub(first)
	return run, problem
}

// handover is the shared state of the group step.
type handover struct {
	out   io.Writer
	start time.Time

	mu       sync.Mutex // guards out, handled, byMember, owned
	handled  map[[2]int64]int
	byMember map[string]int
	owned    map[string]map[int32]bool
}

func (h *handover) log(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.logLocked(format, args...)
}

func (h *handover) logLocked(format string, args ...any) {
	fmt.Fprintf(h.out, "%6.2fs  %s\n", time.Since(h.start).Seconds(), fmt.Sprintf(format, args...))
}

// member returns the options of group member name.
func (h *handover) member(name, topic string) []riffle.ConsumerOption {
	change := func(verb string, add bool) func(context.Context, []riffle.TopicPartition) {
		return func(_ context.Context, tps []riffle.TopicPartition) {
			h.mu.Lock()
			defer h.mu.Unlock()
			for _, tp := range tps {
				if add {
					h.owned[name][tp.Partition] = true
				} else {
					delete(h.owned[name], tp.Partition)
				}
			}
			h.logLocked("member %s %s partitions %s (owns %s)", name, verb, tpList(tps), h.ownedLocked(name))
		}
	}
	return []riffle.ConsumerOption{
		riffle.ConsumerGroup(demoGroup), riffle.SubscribeTopics(topic),
		riffle.OffsetReset(riffle.ResetEarliest),
		// Quick heartbeats so the survivor hears of the rebalance at once.
		riffle.SessionTimeout(10 * time.Second), riffle.HeartbeatInterval(100 * time.Millisecond),
		riffle.AutoCommitInterval(200 * time.Millisecond),
		riffle.OnPartitionsAssigned(change("assigned", true)),
		riffle.OnPartitionsRevoked(change("revoked", false)),
		riffle.OnPartitionsLost(change("LOST", false)),
		riffle.HandleRecord(func(ctx context.Context, r *riffle.Record) error {
			if !sleepCtx(ctx, time.Millisecond) {
				return ctx.Err()
			}
			h.mu.Lock()
			h.handled[[2]int64{int64(r.Partition), r.Offset}]++
			h.byMember[name]++
			h.mu.Unlock()
			return nil
		}),
	}
}

func (h *handover) ownedLocked(name string) string {
	var ps []string
	for p := int32(0); p < demoGroupPartitions; p++ {
		if h.owned[name][p] {
			ps = append(ps, strconv.Itoa(int(p)))
		}
	}
	if len(ps) == 0 {
		return "none"
	}
	return strings.Join(ps, ",")
}

// groupHandover runs two members of a group (each on its own client, as
// separate processes would) while records are produced, closes one after
// a second, and checks the other took over without losing a record.
func (d *demo) groupHandover(ctx context.Context) error {
	topic, cleanup, err := d.scratchTopic(ctx, "group", demoGroupPartitions)
	if err != nil {
		return err
	}
	defer cleanup()
	fmt.Fprintf(d.out, "producing %d records at %d/s while members A and B consume them (1 ms a record);\nmember A leaves after %v\n\n",
		demoGroupRecords, demoGroupRate, demoHandoverAfter)

	h := &handover{
		out: d.out, start: time.Now(),
		handled: map[[2]int64]int{}, byMember: map[string]int{},
		owned: map[string]map[int32]bool{"A": {}, "B": {}},
	}
	members := map[string]*riffle.Consumer{}
	var clients []*riffle.Client
	defer func() {
		// Members still open (after a failure) close before their clients.
		for _, cs := range members {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.timeout)
			cs.Close(cctx)
			cancel()
		}
		for _, cl := range clients {
			cl.Close()
		}
	}()
	for _, name := range []string{"A", "B"} {
		cl, err := d.newClient()
		if err != nil {
			return err
		}
		clients = append(clients, cl)
		cs, err := riffle.NewConsumer(cl, h.member(name, topic)...)
		if err != nil {
			return err
		}
		members[name] = cs
	}

	// Produce in the background, remembering where every record went.
	produced := map[[2]int64]bool{}
	var produceErr error
	var pmu sync.Mutex
	prodDone := make(chan struct{})
	p, err := riffle.NewProducer(d.client, riffle.WithPartitioner(riffle.RoundRobinPartitioner()))
	if err != nil {
		return err
	}
	pctx, pcancel := context.WithCancel(ctx)
	go func() {
		defer close(prodDone)
		start := time.Now()
		for i := 0; i < demoGroupRecords && pctx.Err() == nil; i++ {
			sleepCtx(pctx, time.Until(start.Add(time.Duration(i)*time.Second/demoGroupRate)))
			p.Produce(pctx, &riffle.Record{Topic: topic, Value: []byte(fmt.Sprint("record ", i))}, func(r *riffle.Record, err error) {
				pmu.Lock()
				defer pmu.Unlock()
				if err != nil {
					produceErr = errors.Join(produceErr, err)
					return
				}
				produced[[2]int64{int64(r.Partition), r.Offset}] = true
			})
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.timeout)
		defer cancel()
		if err := p.Close(cctx); err != nil {
			pmu.Lock()
			produceErr = errors.Join(produceErr, err)
			pmu.Unlock()
		}
	}()
	defer func() {
		pcancel() // on failure, stop producing
		<-prodDone
	}()

	// After a second, once both members have partitions, A leaves.
	if !waitFor(ctx, 10*time.Second, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return time.Since(h.start) >= demoHandoverAfter && len(h.owned["A"]) > 0 && len(h.owned["B"]) > 0
	}) {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fmt.Errorf("the members did not share the partitions within 10s")
	}
	h.mu.Lock()
	h.logLocked("member A leaves the group (owns %s, handled %d records so far)", h.ownedLocked("A"), h.byMember["A"])
	h.mu.Unlock()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.timeout)
	_, err = members["A"].Close(cctx)
	cancel()
	delete(members, "A")
	if err != nil {
		return fmt.Errorf("closing member A: %w", err)
	}
	h.log("member A closed: its offsets are committed and it left the group")

	// B takes over; wait until every produced record was handled.
	<-prodDone
	pmu.Lock()
	perr, want := produceErr, len(produced)
	pmu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if perr != nil {
		return fmt.Errorf("producing: %w", perr)
	}
	allHandled := waitFor(ctx, 10*time.Second, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		for id := range produced {
			if h.handled[id] == 0 {
				return false
			}
		}
		return true
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	if allHandled {
		h.log("all records handled; member B leaves")
	} else {
		h.log("some records still not handled after 10s; member B leaves")
	}
	cctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), d.timeout)
	_, err = members["B"].Close(cctx)
	cancel()
	delete(members, "B")
	if err != nil {
		return fmt.Errorf("closing member B: %w", err)
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	total, lost := 0, 0
	for _, n := range h.handled {
		total += n
	}
	for id := range produced {
		if h.handled[id] == 0 {
			lost++
		}
	}
	fmt.Fprintf(d.out, "\nproduced %d records; member A handled %d, member B %d\n", want, h.byMember["A"], h.byMember["B"])
	fmt.Fprintf(d.out, "records: %d, distinct: %d, lost: %d, duplicates: %d\n", total, len(h.handled), lost, total-len(h.handled))
	if lost > 0 {
		return fmt.Errorf("%d of %d records were never handled", lost, want)
	}
	return nil
}

// waitFor polls cond every 10 ms until it holds (true), or until max has
// passed or ctx ended (false).
func waitFor(ctx context.Context, max time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(max)
	for !cond() {
		if time.Now().After(deadline) || !sleepCtx(ctx, 10*time.Millisecond) {
			return false
		}
	}
	return true
}

// transactions writes two transactions to a one-partition topic, the
// first aborted after its records were written to the log, the second
// committed, and reads the partition at both isolation levels: the
// aborted records are in the log (read_uncommitted reads them), but
// read_committed skips them; the committed ones reach both.
func (d *demo) transactions(ctx context.Context) error {
	topic, cleanup, err := d.scratchTopic(ctx, "txn", 1)
	if err != nil {
		return err
	}
	defer cleanup()
	id := d.topic + "-txn"
	p, err := riffle.NewProducer(d.client, riffle.TransactionalID(id))
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.timeout)
		defer cancel()
		p.Close(cctx)
	}()
	if err := p.InitTransactions(ctx); err != nil {
		return fmt.Errorf("InitTransactions: %w", err)
	}
	fmt.Fprintf(d.out, "transactional producer %q ready (InitTransactions fences any earlier producer with this id)\n", id)

	// write runs one transaction of records named after it, written to
	// the log (ProduceSync) before the transaction ends.
	write := func(name string, commit bool) ([]string, int64, int64, error) {
		if err := p.BeginTransaction(); err != nil {
			return nil, 0, 0, err
		}
		var names []string
		var recs []*riffle.Record
		for i := 1; i <= demoTxnRecords; i++ {
			v := fmt.Sprintf("%s-%d", name, i)
			names = append(names, v)
			recs = append(recs, &riffle.Record{Topic: topic, Partition: 0, Value: []byte(v)})
		}
		err := p.ProduceSync(ctx, recs...)
		switch {
		case err != nil:
			if aerr := p.AbortTransaction(ctx); aerr != nil {
				err = errors.Join(err, aerr)
			}
		case commit:
			err = p.CommitTransaction(ctx)
		default:
			err = p.AbortTransaction(ctx)
		}
		if err != nil {
			return nil, 0, 0, fmt.Errorf("%s transaction: %w", name, err)
		}
		return names, recs[0].Offset, recs[len(recs)-1].Offset, nil
	}
	aborted, aLo, aHi, err := write("aborted", false)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "transaction 1: wrote %s at offsets %d-%d, then AbortTransaction\n", strings.Join(aborted, " "), aLo, aHi)
	committed, cLo, cHi, err := write("committed", true)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "transaction 2: wrote %s at offsets %d-%d, then CommitTransaction\n", strings.Join(committed, " "), cLo, cHi)
	if cLo == aHi+2 {
		fmt.Fprintf(d.out, "(offset %d is the abort marker, %d the commit marker)\n", aHi+1, cHi+1)
	}

	fmt.Fprintf(d.out, "\n%-17s %-8s %s\n", "ISOLATION", "RECORDS", "VALUES")
	readers := []struct {
		name string
		iso  riffle.IsolationLevel
		want []string
	}{
		{"read_uncommitted", riffle.ReadUncommitted, append(slices.Clone(aborted), committed...)},
		{"read_committed", riffle.ReadCommitted, committed},
	}
	var problems []error
	for _, r := range readers {
		got, err := d.readThrough(ctx, topic, r.iso, cHi)
		if err != nil {
			return fmt.Errorf("reading %s: %w", r.name, err)
		}
		fmt.Fprintf(d.out, "%-17s %-8d %s\n", r.name, len(got), strings.Join(got, " "))
		if !slices.Equal(got, r.want) {
			problems = append(problems, fmt.Errorf("%s read %q, want %q", r.name, got, r.want))
		}
	}
	if len(problems) > 0 {
		return errors.Join(problems...)
	}
	fmt.Fprintf(d.out, "\nthe aborted transaction's records are in the log, and read_uncommitted reads them;\n"+
		"read_committed skips them. The committed transaction's records reach both.\n")
	return nil
}

// readThrough reads partition 0 of topic from the earliest offset at the
// isolation level until it has handled the record at offset last, and
// returns the values read. Records arrive in offset order, so everything
// before last has been read, or skipped, by then.
func (d *demo) readThrough(ctx context.Context, topic string, iso riffle.IsolationLevel, last int64) ([]string, error) {
	var (
		mu   sync.Mutex
		got  []string
		done = make(chan struct{})
	)
	cs, err := riffle.NewConsumer(d.client, riffle.Isolation(iso),
		riffle.HandleRecord(func(_ context.Context, r *riffle.Record) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, string(r.Value))
			if r.Offset == last {
				close(done)
			}
			return nil
		}))
	if err != nil {
		return nil, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.timeout)
		defer cancel()
		cs.Close(cctx)
	}()
	if err := cs.Assign(riffle.Assignment{TopicPartition: riffle.TopicPartition{Topic: topic, Partition: 0}, Start: riffle.AtEarliest()}); err != nil {
		return nil, err
	}
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-done:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
		mu.Lock()
		defer mu.Unlock()
		return nil, fmt.Errorf("offset %d not reached within 10s (read %q)", last, got)
	}
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(got), nil
}
