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
	back       int64  // --from -N: N (start N records before each partition's end); -1 otherwise
	to         string // "", "end" or an offset
	exitAtEnd  bool   // -e: --to end
	count      int64  // 0: no limit
	group      string
	format     string
	tmpl       recordTemplate // --format with % verbs
	keySep     string
	isolation  string // --isolation: read_uncommitted (default) or read_committed
}

// Output formats of consume.
const (
	formatValue    = "value"
	formatKV       = "kv"
	formatJSON     = "json"
	formatTemplate = "template" // a format string with % verbs
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
		Long: `Print the records of TOPIC on stdout, one per line, as --format says:

  value   the value (the default)
  kv      key, --key-separator (a tab by default), value; a null key prints
          as nothing and an empty key as "" so the two can be told apart
  json    an object with topic, partition, offset, timestamp, key, value and
          headers (keys and values that are not valid UTF-8 are base64, with
          "key_encoding" or "value_encoding" set to "base64"; null stays null)
  FORMAT  a format string as kcat's -f, printed as is for each record (end
          it with \n): %t topic, %p partition, %o offset, %k key, %s value,
          %K key length and %S value length (-1 when null), %T timestamp in
          ms, %h headers as k=v,k=v, %% a percent sign; \n \t \r \\
          escapes. A null key or value prints as nothing (see %K, %S).

Without --group riffle reads the partitions given by --partitions (default
all) from --from: earliest (the default), latest, an offset, -N (the last N
records of each partition: N before its end when consume starts), or an RFC
3339 time (the first record at or after it). --to stops each partition
before that offset ("end", or -e: the partition's end when consume starts)
and --count stops after that many records in all; riffle exits when they
are reached. Without either it follows the topic until Ctrl-C, then closes
cleanly.

With --group riffle joins the consumer group and consumes the partitions
the group assigns it, from the group's committed offsets (--from earliest or
latest says where to start without one). The offsets of the printed records
are committed as it goes and on exit, so the next run resumes after them.

The short flags follow kcat: -t is --topic (or give TOPIC as the
argument), -o is --from (the start offset), -c --count,
-e --to end, -K --key-separator (and --format kv), -f --format (also kcat
format strings), -p --partitions, -G --group. Elsewhere in riffle -o is
--output, the table or JSON choice of the commands that print tables;
consume prints records, chosen with -f, so on consume -o keeps kcat's
meaning, and "-o json" says so.

Progress and a summary (records, records/s, last offset per partition) go
to stderr, unless -q (--quiet) is given. --timeout bounds the command only when given explicitly; when it
ends a follow, that is a normal end (status 0). Ctrl-C ends any consume
with status 130, after the summary (and, with --group, the final commit).`,
		Example: `  # Everything in the topic so far, then exit
  riffle consume orders --to end

  # The same, kcat style: from the beginning, exit at the end, key=value
  riffle consume orders -o beginning -e -K =
  riffle -C -b kafka:9092 -t orders -o beginning -e -K =

  # The last 10 records of each partition, with where they are
  riffle consume orders -o -10 -e -f '%p/%o %k: %s\n'

  # Follow partitions 0 and 1 from now on, as JSON
  riffle consume orders --partitions 0,1 --from latest --format json

  # Records since a point in time, at most 100
  riffle consume orders --from 2025-01-31T09:00:00Z --count 100 --format kv

  # As a member of group "billing": resumes where the last run stopped
  riffle consume orders --group billing --count 1000`,
		Args: cobra.MaximumNArgs(1),
	}
	f := cmd.Flags()
	f.StringVarP(&cfg.topic, "topic", "t", "", "the `TOPIC`, as kcat's -t (or give it as the argument)")
	f.Int32SliceVarP(&cfg.partitions, "partitions", "p", nil, "read only the partitions of `LIST`, comma-separated (default: all; not with --group)")
	f.StringVarP(&cfg.from, "from", "o", "earliest", "where to start: earliest, latest, an `OFFSET`, -N (N before each partition's end) or an RFC 3339 time (the library's riffle.OffsetReset defaults to latest instead)")
	f.StringVar(&cfg.to, "to", "", "stop each partition before this `OFFSET`, or at its current end (end)")
	f.BoolVarP(&cfg.exitAtEnd, "exit-at-end", "e", false, "stop each partition at its current end (same as --to end)")
	f.Int64VarP(&cfg.count, "count", "c", 0, "stop after `N` records in all (default: no limit)")
	f.StringVarP(&cfg.group, "group", "G", "", "consume as a member of consumer group `G`, committing offsets")
	f.StringVarP(&cfg.format, "format", "f", formatValue, "what to print: value, kv, json or a `FORMAT` string such as '%k=%s\\n'")
	f.StringVarP(&cfg.keySep, "key-separator", "K", "\t", "`SEP` between key and value in --format kv, which it selects when given alone")
	f.StringVar(&cfg.isolation, "isolation", "read_uncommitted", "`LEVEL` of transactional records to read: read_uncommitted (all, aborted too) or read_committed (kcat: -X isolation.level=read_committed)")
	defaultInUsage(f, "partitions")

	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := topicArg(cmd, args, &cfg.topic); err != nil {
			return err
		}
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
	changed := cmd.Flags().Changed
	if c.exitAtEnd {
		if c.to != "" {
			return zero, 0, usageErrorf("-e (--exit-at-end) is --to end: give one of them")
		}
		c.to = "end"
	}
	if changed("key-separator") && !changed("format") {
		c.format = formatKV
	}
	if strings.Contains(c.format, "%") {
		t, err := parseTemplate(c.format)
		if err != nil {
			return zero, 0, usageErrorf("--format %q: %v", c.format, err)
		}
		c.tmpl, c.format = t, formatTemplate
	}
	switch c.format = strings.ToLower(c.format); {
	case c.isolation != "read_uncommitted" && c.isolation != "read_committed":
		return zero, 0, usageErrorf("--isolation %q: want read_uncommitted or read_committed", c.isolation)
	case c.topic == "":
		return zero, 0, usageErrorf("the topic name is empty")
	case c.format != formatValue && c.format != formatKV && c.format != formatJSON && c.format != formatTemplate:
		return zero, 0, usageErrorf("--format %q: want value, kv, json or a format string with %%-verbs such as '%%k=%%s\\n'", c.format)
	case changed("key-separator") && c.format != formatKV:
		return zero, 0, usageErrorf("--key-separator goes with --format kv (a format string places the key itself: '%%k<SEP>%%s\\n')")
	case c.count < 0 || (c.count == 0 && changed("count")):
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
	if changed("partitions") && len(c.partitions) == 0 {
		return zero, 0, usageErrorf("--partitions is empty (omit it for all partitions)")
	}
	if c.to != "" && c.to != "end" {
		if n, err := strconv.ParseInt(c.to, 10, 64); err != nil || n < 0 {
			return zero, 0, usageErrorf("--to %q: want an offset or end", c.to)
		}
	}
	start, reset, symbolic, back, err := parseFrom(c.from)
	if err != nil {
		return zero, 0, err
	}
	c.back = back
	if c.group != "" {
		switch {
		case len(c.partitions) > 0:
			return zero, 0, usageErrorf("--partitions cannot be used with --group: the group assigns the partitions")
		case c.to != "":
			return zero, 0, usageErrorf("--to and -e cannot be used with --group (use --count)")
		case !symbolic:
			return zero, 0, usageErrorf("--from with --group takes earliest or latest: the group resumes from its committed offsets")
		}
	}
	return start, reset, nil
}

// parseFrom parses --from; symbolic is true for earliest and latest, and
// back is N for -N (start N records before the end), else -1.
func parseFrom(s string) (start riffle.StartOffset, reset riffle.ResetPolicy, symbolic bool, back int64, err error) {
	switch strings.ToLower(s) {
	case "earliest", "beginning":
		return riffle.AtEarliest(), riffle.ResetEarliest, true, -1, nil
	case "latest", "end":
		return riffle.AtLatest(), riffle.ResetLatest, true, -1, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if strings.HasPrefix(s, "-") {
			// N before the end; where that is depends on the
			// partition, so consume resolves it. Should the log
			// start past it by then, start at its beginning.
			return riffle.AtLatest(), riffle.ResetEarliest, false, -n, nil
		}
		return riffle.AtOffset(n), riffle.ResetLatest, false, -1, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return riffle.AtTime(t), riffle.ResetLatest, false, -1, nil
	}
	hint := ""
	switch strings.ToLower(s) {
	case formatValue, formatKV, formatJSON, "table":
		hint = fmt.Sprintf(" (on consume -o is the start offset, as in kcat; the output format is -f/--format: -f %s)", strings.ToLower(s))
	}
	return start, 0, false, -1, usageErrorf("--from %q: want earliest, latest, an offset, -N (N before the end) or an RFC 3339 time (2006-01-02T15:04:05Z)%s", s, hint)
}

// consumeRun is the state of one consume command, shared by the handler
// (on the consumer's goroutines) and the command's goroutine.
type consumeRun struct {
	cfg    *consumeConfig
	stopAt map[int32]int64 // --to, per partition; nil without it
	stderr io.Writer
	quiet  bool // -q: no summary or group notes

	seen      atomic.Int64 // records printed
	outFailed atomic.Bool  // writing stdout failed: stop
	wake      chan struct{}
	prog      *progress // notes and errors are printed around its line

	mu    sync.Mutex // guards out and parts
	out   *bufio.Writer
	enc   *json.Encoder
	parts map[int32]*partCount

	errMu     sync.Mutex // guards failed, nFailed and groupErrs
	failed    map[int32]bool
	nFailed   int
	groupErrs map[string]bool // group errors printed
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
		cfg: cfg, stderr: a.stderr, quiet: a.quiet, wake: make(chan struct{}, 1),
		out: bufio.NewWriterSize(a.stdout, 64<<10), parts: map[int32]*partCount{},
		failed: map[int32]bool{},
	}
	run.enc = json.NewEncoder(run.out)
	run.enc.SetEscapeHTML(false)
	prog := progressSpec{w: a.stderr, tty: isTerminal(a.stderr), every: plainProgressEvery}
	if a.quiet {
		prog.w = nil
	}
	if prog.tty && isTerminal(a.stdout) {
		// The records scroll by on the same terminal: they are the
		// progress, and a line redrawn under them would garble them.
		prog.w = nil
	}
	starts := map[int32]riffle.StartOffset{}
	if cfg.back >= 0 {
		if starts, err = backFromEnd(setupCtx, cl, cfg.topic, parts, cfg.back); err != nil {
			return err
		}
	}
	if cfg.to != "" {
		run.stopAt = map[int32]int64{}
		if cfg.to == "end" {
			// The end is where this reading ends for now: the high
			// watermark, or under read_committed the last stable
			// offset (a transaction still open is not waited for).
			iso := riffle.ReadUncommitted
			if cfg.isolation == "read_committed" {
				iso = riffle.ReadCommitted
			}
			offs, err := cl.Admin().ListOffsetsIsolated(setupCtx, iso, riffle.OffsetLatest, cfg.topic)
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
	if cfg.isolation == "read_committed" {
		opts = append(opts, riffle.Isolation(riffle.ReadCommitted))
	}
	if cfg.group != "" {
		opts = append(opts, riffle.ConsumerGroup(cfg.group), riffle.SubscribeTopics(cfg.topic),
			riffle.OnPartitionsAssigned(func(_ context.Context, tps []riffle.TopicPartition) {
				run.info("group %q assigned partitions %s", cfg.group, tpList(tps))
			}),
			riffle.OnPartitionsRevoked(func(_ context.Context, tps []riffle.TopicPartition) {
				run.info("group %q revoked partitions %s", cfg.group, tpList(tps))
			}),
			riffle.OnPartitionsLost(func(_ context.Context, tps []riffle.TopicPartition) {
				run.note("group %q: partitions %s lost (not committed)", cfg.group, tpList(tps))
			}),
			riffle.OnGroupError(run.groupError),
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
			st, ok := starts[p]
			if !ok {
				st = start
			}
			as = append(as, riffle.Assignment{TopicPartition: riffle.TopicPartition{Topic: cfg.topic, Partition: p}, Start: st})
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
	if !a.quiet {
		run.summary(a.stderr, elapsed, positions)
	}

	switch {
	case flushErr != nil:
		return fmt.Errorf("writing the records: %w", flushErr)
	case closeErr != nil:
		return fmt.Errorf("closing the consumer: %w", closeErr)
	case run.failures() > 0:
		return errReported
	case !done && a.interrupted() != nil:
		// Ctrl-C: a normal way to stop following, but the status says
		// the command was stopped (130), as for produce.
		return fmt.Errorf("stopped after %d records: %w", run.seen.Load(), ctx.Err())
	case !done && (cfg.count > 0 || run.stopAt != nil):
		// Asked for an end that was not reached.
		return fmt.Errorf("stopped after %d records: %w", run.seen.Load(), context.Cause(ctx))
	}
	return nil
}

// backFromEnd returns, for each partition, the offset n records before
// its end (not before its start).
func backFromEnd(ctx context.Context, cl *riffle.Client, topic string, parts []int32, n int64) (map[int32]riffle.StartOffset, error) {
	bounds := map[int32][2]int64{}
	for i, ts := range []int64{riffle.OffsetEarliest, riffle.OffsetLatest} {
		offs, err := cl.Admin().ListOffsets(ctx, ts, topic)
		if err != nil {
			return nil, fmt.Errorf("listing the offsets of %q: %w", topic, err)
		}
		for _, o := range offs {
			if o.Err != nil {
				return nil, fmt.Errorf("offsets of %s[%d]: %w", topic, o.Partition, o.Err)
			}
			b := bounds[o.Partition]
			b[i] = o.Offset
			bounds[o.Partition] = b
		}
	}
	out := map[int32]riffle.StartOffset{}
	for _, p := range parts {
		b := bounds[p]
		out[p] = riffle.AtOffset(max(b[0], b[1]-n))
	}
	return out, nil
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
	// The end is an offset, not a record: a transaction marker (or
	// aborted records under read_committed) may fill the offsets below
	// it and never reach the handler, so the consumer's position counts
	// too: the library moves it past markers once the records before
	// them are handled.
	processed := map[int32]int64{}
	for _, ps := range cs.Stats().Partitions {
		processed[ps.Partition] = max(ps.Processed, ps.Position)
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

// groupError prints a group error, once: the member retries and may meet
// it on every attempt.
func (r *consumeRun) groupError(err error) {
	msg := errText(err)
	r.errMu.Lock()
	seen := r.groupErrs[msg]
	if r.groupErrs == nil {
		r.groupErrs = map[string]bool{}
	}
	r.groupErrs[msg] = true
	r.errMu.Unlock()
	if !seen {
		r.note("%s", msg)
	}
}

// info is note for news that -q leaves out.
func (r *consumeRun) info(format string, args ...any) {
	if !r.quiet {
		r.note(format, args...)
	}
}

// write prints one record in the chosen format; r.mu is held. The error
// is the output's (bufio.Writer keeps the first one).
func (r *consumeRun) write(rec *riffle.Record) error {
	switch r.cfg.format {
	case formatJSON:
		return r.enc.Encode(toRecordJSON(rec))
	case formatTemplate:
		return r.cfg.tmpl.write(r.out, rec)
	case formatKV:
		writeKey(r.out, rec.Key)
		r.out.WriteString(r.cfg.keySep)
	}
	r.out.Write(rec.Value)
	return r.out.WriteByte('\n')
}

// writeKey prints a key for --format kv: a null key as nothing, an empty
// one as "", so that the two can be told apart.
func writeKey(w *bufio.Writer, key []byte) {
	switch {
	case key == nil:
	case len(key) == 0:
		w.WriteString(`""`)
	default:
		w.Write(key)
	}
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
