package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/riffle-go/riffle"
	"github.com/spf13/cobra"
)

// consumeConfig is what "riffle consume" runs with.
type consumeConfig struct {
	topic      string
	partitions []int32 // nil: all
	from       string
	to         string // "", "end" or an offset
	count      int64  // 0: no limit
	group      string
	format     string
	keySep     string
}

// Output formats of consume.
const (
	formatValue = "value"
	formatKV    = "kv"
	formatJSON  = "json"
)

// errStop is what the handler returns for a record past --to or --count:
// the partition stops before it, so the record is neither printed nor
// counted as processed (and a group does not commit it).
var errStop = errors.New("--count or --to reached")

// plainProgressEvery is how often progress is printed when stderr is not a
// terminal.
const plainProgressEvery = 2 * time.Second

func (a *app) consumeCmd() *cobra.Command {
	cfg := consumeConfig{}
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print the records of a topic",
		Long: `Print the records of TOPIC on stdout, one per line: the value (--format
value), key and value separated by --key-separator (--format kv), or a JSON
object with topic, partition, offset, timestamp, key, value and headers
(--format json; keys and values that are not valid UTF-8 are base64, with
"key_encoding" or "value_encoding" set to "base64"; null stays null).

Without --group riffle reads the partitions given by --partitions (default
all) from --from: earliest (the default), latest, an offset, or an RFC 3339
time (the first record at or after it). --to stops each partition before
that offset ("end": the partition's end when consume starts) and --count
stops after that many records in all; riffle exits when they are reached.
Without either it follows the topic until Ctrl-C, then closes cleanly.

With --group riffle joins the consumer group and consumes the partitions
the group assigns it, from the group's committed offsets (--from earliest or
latest says where to start without one). The offsets of the printed records
are committed as it goes and on exit, so the next run resumes after them.

Progress and a summary (records, records/s, last offset per partition) go
to stderr. --timeout bounds the command only when given explicitly.`,
		Example: `  # Everything in the topic so far, then exit
  riffle consume orders --to end

  # Follow partitions 0 and 1 from now on, as JSON
  riffle consume orders --partitions 0,1 --from latest --format json

  # Records since a point in time, at most 100
  riffle consume orders --from 2025-01-31T09:00:00Z --count 100 --format kv

  # As a member of group "billing": resumes where the last run stopped
  riffle consume orders --group billing --count 1000`,
		Args: cobra.ExactArgs(1),
	}
	f := cmd.Flags()
	f.Int32SliceVar(&cfg.partitions, "partitions", nil, "partitions to read, comma-separated (default all; not with --group)")
	f.StringVar(&cfg.from, "from", "earliest", "where to start: earliest, latest, an offset or an RFC 3339 time (the library's riffle.OffsetReset defaults to latest instead)")
	f.StringVar(&cfg.to, "to", "", "stop each partition before this `OFFSET`, or at its current end (end)")
	f.Int64Var(&cfg.count, "count", 0, "stop after `N` records in all (default: no limit)")
	f.StringVar(&cfg.group, "group", "", "consume as a member of consumer group `G`, committing offsets")
	f.StringVar(&cfg.format, "format", formatValue, "output: value, kv or json")
	f.StringVar(&cfg.keySep, "key-separator", "\t", "what separates key and value with --format kv")

	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		cfg.topic = args[0]
		start, reset, err := cfg.validate(cmd)
		if err != nil {
			return err
		}
		cl, err := a.connect()
		if err != nil {
			return err
		}
		return a.consume(cmd, cl, &cfg, start, reset)
	}
	return cmd
}

// validate checks the flags and returns the start offset and reset policy
// they ask for.
func (c *consumeConfig) validate(cmd *cobra.Command) (riffle.StartOffset, riffle.ResetPolicy, error) {
	var zero riffle.StartOffset
	switch c.format = strings.ToLower(c.format); {
	case c.topic == "":
		return zero, 0, usageErrorf("the topic name is empty")
	case c.format != formatValue && c.format != formatKV && c.format != formatJSON:
		return zero, 0, usageErrorf("--format %q: want value, kv or json", c.format)
	case c.count < 0 || (c.count == 0 && cmd.Flags().Changed("count")):
		return zero, 0, usageErrorf("--count must be positive, got %d", c.count)
	}
	seen := map[int32]bool{}
	for _, p := range c.partitions {
		switch {
		case p < 0:
			return zero, 0, usageErrorf("--partitions: %d is negative", p)
		case seen[p]:
			return zero, 0, usageErrorf("--partitions: %d given twice", p)
		}
		seen[p] = true
	}
	if cmd.Flags().Changed("partitions") && len(c.partitions) == 0 {
		return zero, 0, usageErrorf("--partitions is empty (omit it for all partitions)")
	}
	if c.to != "" && c.to != "end" {
		if n, err := strconv.ParseInt(c.to, 10, 64); err != nil || n < 0 {
			return zero, 0, usageErrorf("--to %q: want an offset or end", c.to)
		}
	}
	start, reset, symbolic, err := parseFrom(c.from)
	if err != nil {
		return zero, 0, err
	}
	if c.group != "" {
		switch {
		case len(c.partitions) > 0:
			return zero, 0, usageErrorf("--partitions cannot be used with --group: the group assigns the partitions")
		case c.to != "":
			return zero, 0, usageErrorf("--to cannot be used with --group (use --count)")
		case !symbolic:
			return zero, 0, usageErrorf("--from with --group takes earliest or latest: the group resumes from its committed offsets")
		}
	}
	return start, reset, nil
}

// parseFrom parses --from; symbolic is true for earliest and latest.
func parseFrom(s string) (start riffle.StartOffset, reset riffle.ResetPolicy, symbolic bool, err error) {
	switch strings.ToLower(s) {
	case "earliest", "beginning":
		return riffle.AtEarliest(), riffle.ResetEarliest, true, nil
	case "latest", "end":
		return riffle.AtLatest(), riffle.ResetLatest, true, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return start, 0, false, usageErrorf("--from %d: offsets are not negative", n)
		}
		return riffle.AtOffset(n), riffle.ResetLatest, false, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return riffle.AtTime(t), riffle.ResetLatest, false, nil
	}
	return start, 0, false, usageErrorf("--from %q: want earliest, latest, an offset or an RFC 3339 time (2006-01-02T15:04:05Z)", s)
}

// consumeRun is the state of one consume command, shared by the handler
// (on the consumer's goroutines) and the command's goroutine.
type consumeRun struct {
	cfg    *consumeConfig
	stopAt map[int32]int64 // --to, per partition; nil without it
	stderr io.Writer

	seen      atomic.Int64 // records printed
	outFailed atomic.Bool  // writing stdout failed: stop
	wake      chan struct{}
	prog      *progress // notes and errors are printed around its line

	mu    sync.Mutex // guards out and parts
	out   *bufio.Writer
	enc   *json.Encoder
	parts map[int32]*partCount

	errMu   sync.Mutex // guards failed and nFailed
	failed  map[int32]bool
	nFailed int
}

type partCount struct {
	records int64
	last    int64
}

func (a *app) consume(cmd *cobra.Command, cl *riffle.Client, cfg *consumeConfig, start riffle.StartOffset, reset riffle.ResetPolicy) error {
	setupCtx := a.context()
	topics, err := cl.Admin().ListTopics(setupCtx, cfg.topic)
	if err != nil {
		return fmt.Errorf("looking up topic %q: %w", cfg.topic, err)
	}
	i := slices.IndexFunc(topics, func(t riffle.TopicDetail) bool { return t.Name == cfg.topic })
	if i < 0 {
		return fmt.Errorf("topic %q: %w", cfg.topic, riffle.ErrUnknownTopicOrPartition)
	}
	if err := topics[i].Err; err != nil {
		return fmt.Errorf("topic %q: %w", cfg.topic, err)
	}
	nParts := int32(len(topics[i].Partitions))
	parts := cfg.partitions
	if len(parts) == 0 {
		for p := int32(0); p < nParts; p++ {
			parts = append(parts, p)
		}
	}
	for _, p := range parts {
		if p >= nParts {
			return fmt.Errorf("topic %q has %d partitions: there is no partition %d", cfg.topic, nParts, p)
		}
	}

	run := &consumeRun{
		cfg: cfg, stderr: a.stderr, wake: make(chan struct{}, 1),
		out: bufio.NewWriterSize(a.stdout, 64<<10), parts: map[int32]*partCount{},
		failed: map[int32]bool{},
	}
	run.enc = json.NewEncoder(run.out)
	run.enc.SetEscapeHTML(false)
	prog := progressSpec{w: a.stderr, tty: isTerminal(a.stderr), every: plainProgressEvery}
	if prog.tty && isTerminal(a.stdout) {
		// The records scroll by on the same terminal: they are the
		// progress, and a line redrawn under them would garble them.
		prog.w = nil
	}
	if cfg.to != "" {
		run.stopAt = map[int32]int64{}
		if cfg.to == "end" {
			offs, err := cl.Admin().ListOffsets(setupCtx, riffle.OffsetLatest, cfg.topic)
			if err != nil {
				return fmt.Errorf("listing the end offsets of %q: %w", cfg.topic, err)
			}
			for _, o := range offs {
				if o.Err != nil {
					return fmt.Errorf("end offset of %s[%d]: %w", cfg.topic, o.Partition, o.Err)
				}
				if slices.Contains(parts, o.Partition) {
					run.stopAt[o.Partition] = o.Offset
				}
			}
		} else {
			n, _ := strconv.ParseInt(cfg.to, 10, 64)
			for _, p := range parts {
				run.stopAt[p] = n
			}
		}
	}

	// Progress starts before the consumer, whose callbacks print around it.
	began := time.Now()
	run.prog = prog.start(func() string {
		n := run.seen.Load()
		return fmt.Sprintf("%d records, %.0f records/s", n, float64(n)/time.Since(began).Seconds())
	})
	opts := []riffle.ConsumerOption{
		riffle.HandleRecord(run.handle),
		riffle.OnPartitionError(run.partitionError),
		riffle.OffsetReset(reset),
	}
	if cfg.group != "" {
		opts = append(opts, riffle.ConsumerGroup(cfg.group), riffle.SubscribeTopics(cfg.topic),
			riffle.OnPartitionsAssigned(func(_ context.Context, tps []riffle.TopicPartition) {
				run.note("group %q assigned partitions %s", cfg.group, tpList(tps))
			}),
			riffle.OnPartitionsRevoked(func(_ context.Context, tps []riffle.TopicPartition) {
				run.note("group %q revoked partitions %s", cfg.group, tpList(tps))
			}),
			riffle.OnPartitionsLost(func(_ context.Context, tps []riffle.TopicPartition) {
				run.note("group %q: partitions %s lost (not committed)", cfg.group, tpList(tps))
			}),
			riffle.OnGroupError(func(err error) { run.note("%s", errText(err)) }),
		)
	}
	cs, err := riffle.NewConsumer(cl, opts...)
	if err != nil {
		run.prog.stop()
		return err
	}
	if cfg.group == "" {
		var as []riffle.Assignment
		for _, p := range parts {
			as = append(as, riffle.Assignment{TopicPartition: riffle.TopicPartition{Topic: cfg.topic, Partition: p}, Start: start})
		}
		if err := cs.Assign(as...); err != nil {
			cs.Close(context.Background())
			run.prog.stop()
			return err
		}
	}

	ctx := a.runContext(cmd)
	done := run.wait(ctx, cs)
	elapsed := time.Since(began)
	run.mu.Lock()
	run.out.Flush() // before a group commits on close; errors are sticky
	run.mu.Unlock()

	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.timeout)
	defer cancel()
	positions, closeErr := cs.Close(cctx)
	// Stopped partitions were reported as they stopped (OnPartitionError:
	// failures, or this run's own --count/--to stops).
	closeErr = dropStopped(closeErr)
	run.prog.stop()
	run.mu.Lock()
	flushErr := run.out.Flush()
	run.mu.Unlock()
	run.summary(a.stderr, elapsed, positions)

	switch {
	case flushErr != nil:
		return fmt.Errorf("writing the records: %w", flushErr)
	case closeErr != nil:
		return fmt.Errorf("closing the consumer: %w", closeErr)
	case run.failures() > 0:
		return errReported
	case !done && (cfg.count > 0 || run.stopAt != nil):
		// Asked for an end that was not reached.
		return fmt.Errorf("stopped after %d records: %w", run.seen.Load(), context.Cause(ctx))
	}
	return nil
}

// dropStopped removes the *riffle.StoppedPartitionsError from an error
// Consumer.Close returned, keeping any other failure.
func dropStopped(err error) error {
	var se *riffle.StoppedPartitionsError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se) && err == error(se):
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return err
	}
	var keep []error
	for _, e := range j.Unwrap() {
		if _, stopped := e.(*riffle.StoppedPartitionsError); !stopped {
			keep = append(keep, e)
		}
	}
	return errors.Join(keep...)
}

// wait flushes the output as records arrive until --count or --to are
// reached (true) or ctx ends (false).
func (r *consumeRun) wait(ctx context.Context, cs *riffle.Consumer) bool {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if r.finished(cs) {
			return true
		}
		if r.outFailed.Load() {
			return false
		}
		select {
		case <-ctx.Done():
			return r.finished(cs)
		case <-r.wake:
		case <-tick.C:
			r.mu.Lock()
			r.out.Flush()
			r.mu.Unlock()
		}
	}
}

// finished reports whether --count or --to are reached.
func (r *consumeRun) finished(cs *riffle.Consumer) bool {
	if r.cfg.count > 0 && r.seen.Load() >= r.cfg.count {
		return true
	}
	if r.stopAt == nil {
		return false
	}
	processed := map[int32]int64{}
	for _, ps := range cs.Stats().Partitions {
		processed[ps.Partition] = ps.Processed
	}
	r.errMu.Lock()
	defer r.errMu.Unlock()
	for p, to := range r.stopAt {
		// A partition that starts at or after its stop offset, or that
		// stopped with an error, is done too.
		if processed[p] < to && !r.failed[p] {
			return false
		}
	}
	return true
}

func (r *consumeRun) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *consumeRun) handle(_ context.Context, rec *riffle.Record) error {
	if to, ok := r.stopAt[rec.Partition]; ok && rec.Offset >= to {
		r.poke()
		return errStop
	}
	n := r.seen.Add(1)
	if r.cfg.count > 0 && n > r.cfg.count {
		// Another partition took the last place: undo, and stop here.
		r.seen.Add(-1)
		return errStop
	}
	r.mu.Lock()
	err := r.write(rec)
	if err == nil && r.cfg.group != "" {
		// A group commits what the handler finished, at times of its
		// own choosing: finished must mean written out.
		err = r.out.Flush()
	}
	if err != nil {
		// Not printed, so not done: the partition stops here (and a
		// group does not commit the record), and so does consume.
		r.mu.Unlock()
		r.seen.Add(-1)
		r.outFailed.Store(true)
		r.poke()
		return fmt.Errorf("writing the record: %w", err)
	}
	pc := r.parts[rec.Partition]
	if pc == nil {
		pc = &partCount{}
		r.parts[rec.Partition] = pc
	}
	pc.records++
	pc.last = rec.Offset
	r.mu.Unlock()
	if n == r.cfg.count || (r.stopAt != nil && rec.Offset+1 >= r.stopAt[rec.Partition]) {
		r.poke()
	}
	return nil
}

func (r *consumeRun) partitionError(pe *riffle.PartitionError) {
	if errors.Is(pe.Err, errStop) || r.outFailed.Load() {
		return // the output error is reported once, at the end
	}
	r.errMu.Lock()
	r.failed[pe.Partition] = true
	r.nFailed++
	r.errMu.Unlock()
	r.prog.printf(r.stderr, "riffle: %s\n", errText(pe))
	r.poke()
}

func (r *consumeRun) failures() int {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.nFailed
}

// note prints a line about the group on stderr.
func (r *consumeRun) note(format string, args ...any) {
	r.prog.printf(r.stderr, "riffle: "+format+"\n", args...)
}

// write prints one record in the chosen format; r.mu is held. The error
// is the output's (bufio.Writer keeps the first one).
func (r *consumeRun) write(rec *riffle.Record) error {
	switch r.cfg.format {
	case formatJSON:
		return r.enc.Encode(toRecordJSON(rec))
	case formatKV:
		r.out.Write(rec.Key)
		r.out.WriteString(r.cfg.keySep)
	}
	r.out.Write(rec.Value)
	return r.out.WriteByte('\n')
}

// summary prints what was consumed: totals, then per partition the records
// printed, the last offset printed and the next offset to consume (what a
// group committed).
func (r *consumeRun) summary(w io.Writer, elapsed time.Duration, positions map[riffle.TopicPartition]int64) {
	n := r.seen.Load()
	fmt.Fprintf(w, "%d records in %s: %.0f records/s\n", n, roundDuration(elapsed), float64(n)/max(elapsed.Seconds(), 1e-9))
	r.mu.Lock()
	defer r.mu.Unlock()
	var ps []int32
	for p := range r.parts {
		ps = append(ps, p)
	}
	for tp := range positions {
		if _, ok := r.parts[tp.Partition]; !ok {
			ps = append(ps, tp.Partition)
		}
	}
	if len(ps) == 0 {
		return
	}
	slices.Sort(ps)
	tw := newTable(w)
	row(tw, "PARTITION", "RECORDS", "LAST OFFSET", "NEXT OFFSET")
	for _, p := range ps {
		records, last, next := int64(0), "-", "-"
		if pc := r.parts[p]; pc != nil {
			records, last = pc.records, strconv.FormatInt(pc.last, 10)
		}
		if pos, ok := positions[riffle.TopicPartition{Topic: r.cfg.topic, Partition: p}]; ok && pos >= 0 {
			next = strconv.FormatInt(pos, 10)
		}
		row(tw, p, records, last, next)
	}
	tw.Flush()
}

// tpList renders partitions as "0,1,2" (the topic is the command's).
func tpList(tps []riffle.TopicPartition) string {
	s := make([]string, len(tps))
	for i, tp := range tps {
		s[i] = strconv.Itoa(int(tp.Partition))
	}
	return strings.Join(s, ",")
}

// ---- JSON output ----

// recordJSON is a record in --format json. Keys, values and header values
// are strings when they are valid UTF-8, else base64 with the matching
// *_encoding field set to "base64"; a null one is null.
type recordJSON struct {
	Topic         string       `json:"topic"`
	Partition     int32        `json:"partition"`
	Offset        int64        `json:"offset"`
	Timestamp     string       `json:"timestamp"`
	Key           *string      `json:"key"`
	KeyEncoding   string       `json:"key_encoding,omitempty"`
	Value         *string      `json:"value"`
	ValueEncoding string       `json:"value_encoding,omitempty"`
	Headers       []headerJSON `json:"headers"`
}

type headerJSON struct {
	Key           string  `json:"key"`
	Value         *string `json:"value"`
	ValueEncoding string  `json:"value_encoding,omitempty"`
}

// jsonTime is the timestamp layout of --format json: RFC 3339 in UTC with
// milliseconds, Kafka's timestamp precision.
const jsonTime = "2006-01-02T15:04:05.000Z07:00"

func toRecordJSON(r *riffle.Record) recordJSON {
	out := recordJSON{
		Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		Timestamp: r.Timestamp.UTC().Format(jsonTime),
		Headers:   []headerJSON{},
	}
	out.Key, out.KeyEncoding = jsonBytes(r.Key)
	out.Value, out.ValueEncoding = jsonBytes(r.Value)
	for _, h := range r.Headers {
		hj := headerJSON{Key: h.Key}
		hj.Value, hj.ValueEncoding = jsonBytes(h.Value)
		out.Headers = append(out.Headers, hj)
	}
	return out
}

// jsonBytes renders bytes for JSON: nil stays null, valid UTF-8 is a
// string, anything else base64 (and says so).
func jsonBytes(b []byte) (*string, string) {
	if b == nil {
		return nil, ""
	}
	if utf8.Valid(b) {
		s := string(b)
		return &s, ""
	}
	s := base64.StdEncoding.EncodeToString(b)
	return &s, "base64"
}
