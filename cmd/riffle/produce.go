package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/spf13/cobra"
)

// produceConfig is what "riffle produce" (and the demo's produce step)
// runs with.
type produceConfig struct {
	topic string

	// Records from a file or stdin, one per line.
	file   string // "-" is stdin
	keySep string // "" : no key

	headerArgs []string        // --header KEY=VALUE
	headers    []riffle.Header // parsed, added to every record

	// A generated load instead (count > 0).
	count int64
	size  int
	keys  int

	rate        float64 // records/s; 0: as fast as possible
	compression string
	acks        string
	linger      time.Duration
	partition   int32 // -1: the partitioner decides
}

// maxErrorsShown is how many record errors produce prints.
const maxErrorsShown = 5

func (a *app) produceCmd() *cobra.Command {
	cfg := produceConfig{}
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Write records to a topic, from stdin or a generated load",
		Long: `Write records to TOPIC. By default every line of stdin (or of --file) is
one record; with --key-separator, a line is split into key and value at the
first separator (a line without it gets a null key). With --count, riffle
generates the records instead: --size bytes of value each, keyed by --keys
distinct keys if given, at --rate records/s if given. Every --header
KEY=VALUE is added to every record.

The short flags follow kcat where they mean the same: -t is --topic (or
give TOPIC as the argument), -K is --key-separator, -H --header, -p --partition. -f is --file (kcat takes
files as arguments).

Unless -q (--quiet) is given, progress (records, MB, records/s) is shown
on stderr, redrawn in place when stderr is a terminal, and a summary
follows: records written and failed, elapsed time, throughput and the
latency percentiles from Produce to the acknowledgement.

The producer is idempotent with acks=all unless --acks 1 or 0 is given
(which turn idempotence off). --partition writes every record to one
partition instead of letting the partitioner choose.

The command runs until the input ends (or the --count records are written),
or until Ctrl-C; --timeout bounds it only when given explicitly. If any
record failed, the first errors are printed and riffle exits with status 1.
Ctrl-C stops reading, delivers the records already read, prints the summary
and exits with status 130.`,
		Example: `  # One record per line, "key:value"
  printf 'alice:hello\nbob:world\n' | riffle produce greetings --key-separator :

  # The same, kcat style, with two headers on every record
  printf 'alice:hello\nbob:world\n' | riffle produce greetings -K : -H source=cli -H v=2
  printf 'alice:hello\nbob:world\n' | riffle -P -b kafka:9092 -t greetings -K : -H source=cli

  # A load test: 100,000 records of 1 KiB over 1,000 keys, zstd, acks=1
  riffle produce bench --count 100000 --size 1024 --keys 1000 --compression zstd --acks 1

  # 50 records/s to partition 3, from a file
  riffle produce events -f events.txt --rate 50 --partition 3`,
		Args: cobra.MaximumNArgs(1),
	}
	f := cmd.Flags()
	f.StringVarP(&cfg.topic, "topic", "t", "", "the `TOPIC`, as kcat's -t (or give it as the argument)")
	f.StringVarP(&cfg.file, "file", "f", "-", "read records from `FILE`, one per line (- is stdin)")
	f.StringVarP(&cfg.keySep, "key-separator", "K", "", "split each line into key and value at the first `SEP` (default: no key)")
	f.StringArrayVarP(&cfg.headerArgs, "header", "H", nil, "add header `KEY=VALUE` to every record (repeatable)")
	f.Int64Var(&cfg.count, "count", 0, "generate `N` records instead of reading lines")
	f.IntVar(&cfg.size, "size", 100, "value size of generated records, in `BYTES` (with --count)")
	f.IntVar(&cfg.keys, "keys", 0, "cycle through `K` distinct keys in generated records (with --count; default: no keys)")
	f.Float64Var(&cfg.rate, "rate", 0, "produce at most `R` records/s (default: as fast as possible)")
	f.StringVar(&cfg.compression, "compression", "none", "batch `CODEC`: none, gzip, snappy, lz4 or zstd")
	f.StringVar(&cfg.acks, "acks", "all", "acknowledgements: all, 1 or 0 (1 and 0 turn idempotence off)")
	f.DurationVar(&cfg.linger, "linger", 5*time.Millisecond, "how long a batch may wait for more records")
	f.Int32VarP(&cfg.partition, "partition", "p", -1, "write every record to partition `P` (default: the partitioner decides)")
	defaultInUsage(f, "partition")

	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := topicArg(cmd, args, &cfg.topic); err != nil {
			return err
		}
		if err := cfg.validate(cmd); err != nil {
			return err
		}
		opts, err := cfg.producerOptions()
		if err != nil {
			return err
		}
		var src recordSource
		prog := progressSpec{w: a.stderr, tty: isTerminal(a.stderr), every: plainProgressEvery}
		if a.quiet {
			prog.w = nil
		}
		if cfg.count > 0 {
			src = newGeneratedSource(&cfg)
		} else {
			in := cmd.InOrStdin()
			if cfg.file != "-" {
				fh, err := os.Open(cfg.file)
				if err != nil {
					return fmt.Errorf("--file: %w", err)
				}
				defer fh.Close()
				in = fh
			}
			if prog.tty && isTerminal(in) {
				// Someone types the records: a line redrawn on the
				// same terminal would garble what they type.
				prog.w = nil
			}
			ls := newLineSource(in, cfg.topic, cfg.keySep)
			defer ls.close()
			src = ls
		}
		cl, err := a.connect()
		if err != nil {
			return err
		}
		ctx := a.runContext(cmd)
		res, err := produceRecords(ctx, cl, &cfg, opts, src, prog, a.timeout)
		if res != nil {
			if !a.quiet {
				res.print(a.stderr)
			}
			if ls, ok := src.(*lineSource); ok && ls.noKey > 0 && cfg.keySep != "" {
				fmt.Fprintf(a.stderr, "riffle: warning: %d lines had no %q and were produced with a null key\n", ls.noKey, cfg.keySep)
			}
			for _, e := range res.firstErrs {
				fmt.Fprintf(a.stderr, "riffle: %s\n", e)
			}
			if more := res.failed - int64(len(res.firstErrs)); more > 0 {
				fmt.Fprintf(a.stderr, "riffle: ... and %d more failed records\n", more)
			}
			if res.stopped != nil {
				fmt.Fprintf(a.stderr, "riffle: stopped early: every later record would fail the same way\n")
			}
		}
		if err != nil {
			return err
		}
		if res.failed > 0 {
			return errReported
		}
		return nil
	}
	return cmd
}

// runContext is the context of a command that runs until its work is done
// (produce, consume): Ctrl-C stops it, and --timeout bounds it only when
// given explicitly, so that a consumer can follow a topic for hours.
// Connecting and each request are still bounded by --timeout through the
// client's retry budget.
func (a *app) runContext(cmd *cobra.Command) context.Context {
	if f := cmd.Flags().Lookup("timeout"); f != nil && f.Changed {
		return a.context()
	}
	return a.baseCtx
}

func (c *produceConfig) validate(cmd *cobra.Command) error {
	changed := func(name string) bool { return cmd.Flags().Changed(name) }
	switch {
	case c.topic == "":
		return usageErrorf("the topic name is empty")
	case c.count < 0:
		return usageErrorf("--count must be positive, got %d", c.count)
	case c.count == 0 && changed("count"):
		return usageErrorf("--count must be positive, got 0 (omit it to read lines)")
	case c.count == 0 && (changed("size") || changed("keys")):
		return usageErrorf("--size and --keys need --count")
	case c.count > 0 && (changed("key-separator") || changed("file")):
		return usageErrorf("--count generates the records: --key-separator and --file read them, not both")
	case c.size < 0:
		return usageErrorf("--size must not be negative, got %d", c.size)
	case c.keys < 0:
		return usageErrorf("--keys must not be negative, got %d", c.keys)
	case c.rate < 0:
		return usageErrorf("--rate must not be negative, got %g", c.rate)
	case c.linger < 0:
		return usageErrorf("--linger must not be negative, got %v", c.linger)
	case changed("partition") && c.partition < 0:
		return usageErrorf("--partition must not be negative, got %d", c.partition)
	case changed("key-separator") && c.keySep == "":
		return usageErrorf("--key-separator is empty")
	case c.file == "":
		return usageErrorf("--file is empty (use - for stdin)")
	}
	for _, h := range c.headerArgs {
		k, v, ok := strings.Cut(h, "=")
		if !ok || k == "" {
			return usageErrorf("--header %q: want KEY=VALUE", h)
		}
		c.headers = append(c.headers, riffle.Header{Key: k, Value: []byte(v)})
	}
	return nil
}

var compressions = map[string]riffle.Compression{
	"none": riffle.CompressionNone, "gzip": riffle.CompressionGzip, "snappy": riffle.CompressionSnappy,
	"lz4": riffle.CompressionLZ4, "zstd": riffle.CompressionZstd,
}

// producerOptions turns the flags into producer options; bad values are
// usage errors.
func (c *produceConfig) producerOptions() ([]riffle.ProducerOption, error) {
	codec, ok := compressions[strings.ToLower(c.compression)]
	if !ok {
		return nil, usageErrorf("--compression %q: want none, gzip, snappy, lz4 or zstd", c.compression)
	}
	opts := []riffle.ProducerOption{riffle.WithCompression(codec), riffle.Linger(c.linger)}
	switch strings.ToLower(c.acks) {
	case "all", "-1":
	case "1":
		opts = append(opts, riffle.Acknowledgements(riffle.AcksLeader), riffle.DisableIdempotence())
	case "0":
		opts = append(opts, riffle.Acknowledgements(riffle.AcksNone), riffle.DisableIdempotence())
	default:
		return nil, usageErrorf("--acks %q: want all, 1 or 0", c.acks)
	}
	if c.partition >= 0 {
		opts = append(opts, riffle.WithPartitioner(riffle.ManualPartitioner()))
	}
	return opts, nil
}

// recordSource yields the records to produce.
type recordSource interface {
	// next returns the next record, or nil when there are no more or ctx
	// ended. The error is a failure to read the input.
	next(ctx context.Context) (*riffle.Record, error)
	// unit names an item of the input in error messages: "line", "record".
	unit() string
}

// generatedSource makes count records of size bytes, cycling through keys.
type generatedSource struct {
	topic string
	count int64
	size  int
	keys  [][]byte
	pool  []byte // random letters the values are cut from
	i     int64
}

const generatedPool = 64 << 10

func newGeneratedSource(c *produceConfig) *generatedSource {
	g := &generatedSource{topic: c.topic, count: c.count, size: c.size}
	for k := 0; k < c.keys; k++ {
		g.keys = append(g.keys, []byte("key-"+strconv.Itoa(k)))
	}
	// Letters rather than random bytes: values compress somewhat, as
	// real data does, so --compression makes a visible difference.
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	g.pool = make([]byte, generatedPool+c.size)
	for i := range g.pool {
		g.pool[i] = letters[rand.IntN(len(letters))]
	}
	return g
}

func (g *generatedSource) unit() string { return "record" }

func (g *generatedSource) next(ctx context.Context) (*riffle.Record, error) {
	if g.i >= g.count || ctx.Err() != nil {
		return nil, nil
	}
	off := int((g.i * 7919) % generatedPool)
	r := &riffle.Record{Topic: g.topic, Value: g.pool[off : off+g.size : off+g.size]}
	if len(g.keys) > 0 {
		r.Key = g.keys[g.i%int64(len(g.keys))]
	}
	g.i++
	return r, nil
}

// lineSource reads one record per line. A goroutine reads, so that Ctrl-C
// stops the command even while it waits for input on a terminal.
type lineSource struct {
	topic string
	sep   []byte
	lines chan []byte
	done  chan struct{}
	err   error // the read error, set before lines is closed
	noKey int   // lines without the separator
	once  sync.Once
}

func newLineSource(r io.Reader, topic, sep string) *lineSource {
	ls := &lineSource{topic: topic, lines: make(chan []byte, 256), done: make(chan struct{})}
	if sep != "" {
		ls.sep = []byte(sep)
	}
	go func() {
		defer close(ls.lines)
		br := bufio.NewReaderSize(r, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				select {
				case ls.lines <- line:
				case <-ls.done:
					return
				}
			}
			if err != nil {
				if err != io.EOF {
					ls.err = err
				}
				return
			}
		}
	}()
	return ls
}

// close stops the reader goroutine (unless it is blocked reading, which
// only a terminal or a pipe can do; the process exits soon after).
func (ls *lineSource) close() { ls.once.Do(func() { close(ls.done) }) }

func (ls *lineSource) unit() string { return "line" }

func (ls *lineSource) next(ctx context.Context) (*riffle.Record, error) {
	select {
	case <-ctx.Done():
		return nil, nil
	case line, ok := <-ls.lines:
		if !ok {
			if ls.err != nil {
				return nil, fmt.Errorf("reading records: %w", ls.err)
			}
			return nil, nil
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		r := &riffle.Record{Topic: ls.topic, Value: line}
		if ls.sep != nil {
			if k, v, found := bytes.Cut(line, ls.sep); found {
				r.Key, r.Value = k, v
			} else {
				ls.noKey++
			}
		}
		return r, nil
	}
}

// produceResult is the outcome of a produce run.
type produceResult struct {
	written, failed int64
	bytes           int64 // keys and values of the written records
	elapsed         time.Duration
	lat             latencies // of the written records
	firstErrs       []string
	stopped         error // why production stopped early, if it did
}

func (r *produceResult) print(w io.Writer) {
	secs := max(r.elapsed.Seconds(), 1e-9)
	fmt.Fprintf(w, "%d records written, %d failed, in %s: %.0f records/s, %.2f MB/s (%.2f MB)\n",
		r.written, r.failed, roundDuration(r.elapsed), float64(r.written)/secs, float64(r.bytes)/1e6/secs, float64(r.bytes)/1e6)
	if r.lat.n > 0 {
		fmt.Fprintf(w, "latency p50 %s, p90 %s, p99 %s, max %s\n",
			roundDuration(r.lat.quantile(0.50)), roundDuration(r.lat.quantile(0.90)),
			roundDuration(r.lat.quantile(0.99)), roundDuration(r.lat.max))
	}
}

// produceStats collects the records' outcomes, from the producer's
// callback goroutines.
type produceStats struct {
	mu        sync.Mutex
	written   int64
	failed    int64
	bytes     int64
	lat       latencies
	firstErrs []string
	fatal     atomic.Pointer[error] // an error every later record would get too
}

func (s *produceStats) done(unit string, seq int64, r *riffle.Record, start time.Time, err error) {
	d := time.Since(start)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.written++
		s.bytes += int64(len(r.Key) + len(r.Value))
		s.lat.add(d)
		return
	}
	s.failed++
	if len(s.firstErrs) < maxErrorsShown {
		s.firstErrs = append(s.firstErrs, fmt.Sprintf("%s %d: %s", unit, seq, unreachableText(err)))
	}
	if fatalProduceError(err) {
		s.fatal.CompareAndSwap(nil, &err)
	}
}

func (s *produceStats) snapshot() (written, failed, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.written, s.failed, s.bytes
}

// fatalProduceError reports whether err would fail every later record too,
// so producing more is pointless.
func fatalProduceError(err error) bool {
	for _, e := range []error{riffle.ErrUnknownTopic, riffle.ErrInvalidPartition, riffle.ErrTopicAuthorization,
		riffle.ErrAuth, riffle.ErrUnreachable, riffle.ErrClientClosed, riffle.ErrProducerClosed, riffle.ErrInvalidConfig} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// produceRecords produces every record of src, showing progress, and
// returns the outcome once every record has one. It stops early when ctx
// ends or a record fails in a way every later one would too; then the
// records already produced still get up to closeWait to be delivered.
func produceRecords(ctx context.Context, cl *riffle.Client, cfg *produceConfig, opts []riffle.ProducerOption,
	src recordSource, prog progressSpec, closeWait time.Duration) (*produceResult, error) {
	p, err := riffle.NewProducer(cl, opts...)
	if err != nil {
		return nil, err
	}
	stats := &produceStats{}
	start := time.Now()
	pr := prog.start(func() string {
		written, failed, b := stats.snapshot()
		s := fmt.Sprintf("%d records, %.2f MB, %.0f records/s", written, float64(b)/1e6, float64(written)/time.Since(start).Seconds())
		if failed > 0 {
			s += fmt.Sprintf(", %d failed", failed)
		}
		return s
	})
	var readErr error
	interrupted := false
	unit := src.unit()
	for seq := int64(1); ; seq++ {
		if stats.fatal.Load() != nil {
			break
		}
		if cfg.rate > 0 {
			// Sleep only when a millisecond ahead of the schedule: at
			// high rates, records go in small bursts, not one timer each.
			due := start.Add(time.Duration(float64(seq-1) / cfg.rate * float64(time.Second)))
			if d := time.Until(due); d >= time.Millisecond && !sleepCtx(ctx, d) {
				interrupted = true
				break
			}
		}
		r, err := src.next(ctx)
		if err != nil {
			readErr = err
			break
		}
		if r == nil {
			interrupted = ctx.Err() != nil
			break
		}
		if cfg.partition >= 0 {
			r.Partition = cfg.partition
		}
		if len(cfg.headers) > 0 {
			r.Headers = cfg.headers
		}
		t0 := time.Now()
		p.Produce(ctx, r, func(r *riffle.Record, err error) { stats.done(unit, seq, r, t0, err) })
	}
	// Deliver what is buffered even after Ctrl-C (a second one kills the
	// process), within closeWait.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeWait)
	defer cancel()
	closeErr := p.Close(cctx)
	elapsed := time.Since(start)
	pr.stop()

	stats.mu.Lock()
	res := &produceResult{
		written: stats.written, failed: stats.failed, bytes: stats.bytes,
		elapsed: elapsed, lat: stats.lat, firstErrs: stats.firstErrs,
	}
	stats.mu.Unlock()
	switch {
	case readErr != nil:
		return res, readErr
	case interrupted:
		return res, fmt.Errorf("stopped after %d records: %w", res.written+res.failed, ctx.Err())
	case closeErr != nil && res.failed == 0:
		return res, closeErr
	}
	if f := stats.fatal.Load(); f != nil {
		res.stopped = *f
	}
	return res, nil
}

// sleepCtx sleeps for d, or until ctx ends; it reports whether ctx is
// still alive.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// ---- progress ----

// progressSpec says where and how to show progress.
type progressSpec struct {
	w      io.Writer // nil: no progress
	tty    bool      // redraw one line in place; else print a line every `every`
	prefix string    // printed before every line (the demo indents)
	every  time.Duration
}

// progress shows a status line until stopped: on a terminal one line
// redrawn with \r five times a second, elsewhere plain lines.
type progress struct {
	spec   progressSpec
	line   func() string
	stopCh chan struct{}
	done   chan struct{}

	mu      sync.Mutex // serialises writes to spec.w
	lastLen int        // of the line on screen (tty)
}

func (s progressSpec) start(line func() string) *progress {
	p := &progress{spec: s, line: line, stopCh: make(chan struct{}), done: make(chan struct{})}
	if s.w == nil {
		close(p.done)
		return p
	}
	every := s.every
	if s.tty {
		every = 200 * time.Millisecond
	}
	go func() {
		defer close(p.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.stopCh:
				p.mu.Lock()
				p.clearLocked() // for what follows
				p.mu.Unlock()
				return
			case <-t.C:
				p.draw()
			}
		}
	}()
	return p
}

func (p *progress) draw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drawLocked()
}

func (p *progress) drawLocked() {
	text := p.spec.prefix + p.line()
	if !p.spec.tty {
		fmt.Fprintln(p.spec.w, text)
		return
	}
	pad := ""
	if n := p.lastLen - len(text); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	fmt.Fprintf(p.spec.w, "\r%s%s", text, pad)
	p.lastLen = len(text)
}

func (p *progress) clearLocked() {
	if p.spec.tty && p.lastLen > 0 {
		fmt.Fprintf(p.spec.w, "\r%s\r", strings.Repeat(" ", p.lastLen))
		p.lastLen = 0
	}
}

// printf prints a message to w, the progress writer or another one
// showing on the same terminal, without mixing it with the progress line:
// the line is erased first and redrawn after.
func (p *progress) printf(w io.Writer, format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	redraw := p.lastLen > 0
	p.clearLocked()
	fmt.Fprintf(w, format, args...)
	if redraw {
		p.drawLocked()
	}
}

// stop stops the progress line and, on a terminal, erases it.
func (p *progress) stop() {
	select {
	case <-p.stopCh:
	default:
		close(p.stopCh)
	}
	<-p.done
}

// isTerminal reports whether f, a reader or writer, is a terminal (a
// character device), where progress can be redrawn in place.
func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// ---- latency histogram ----

// latencies is a histogram of durations in microseconds with log-linear
// buckets (as HdrHistogram): exact below 256µs, then 128 buckets per
// power of two, so quantiles are within 1% whatever the range, in a few
// KiB however many records there are.
type latencies struct {
	counts []uint64
	n      uint64
	max    time.Duration
}

const latSubBits = 8

func latBucket(us uint64) int {
	if us < 1<<latSubBits {
		return int(us)
	}
	e := bits.Len64(us) - latSubBits
	return e<<(latSubBits-1) + int(us>>e)
}

// latValue is the middle of bucket i, in microseconds.
func latValue(i int) float64 {
	if i < 1<<latSubBits {
		return float64(i)
	}
	e := i>>(latSubBits-1) - 1
	m := i - e<<(latSubBits-1)
	low := uint64(m) << e
	return float64(low) + float64(uint64(1)<<e)/2
}

func (l *latencies) add(d time.Duration) {
	if d < 0 {
		d = 0
	}
	i := latBucket(uint64(d / time.Microsecond))
	if i >= len(l.counts) {
		l.counts = append(l.counts, make([]uint64, i+1-len(l.counts))...)
	}
	l.counts[i]++
	l.n++
	l.max = max(l.max, d)
}

// quantile returns the q-quantile (0 < q <= 1), never above the maximum.
func (l *latencies) quantile(q float64) time.Duration {
	if l.n == 0 {
		return 0
	}
	rank := uint64(q*float64(l.n) + 0.5)
	rank = min(max(rank, 1), l.n)
	var seen uint64
	for i, c := range l.counts {
		if seen += c; seen >= rank {
			return min(time.Duration(latValue(i)*float64(time.Microsecond)), l.max)
		}
	}
	return l.max
}
