package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/ranges"
	"github.com/spf13/cobra"
)

func (a *app) rangesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ranges",
		Short: "Split topics into offset ranges, read them, and checkpoint them in a group",
		Long: `Shard topics for any engine that can run a command: "plan" prints offset
ranges [low, high) as JSON lines, "read" prints the records of ranges in
the consume formats, and "commit" takes the ranges that are done and
commits a consumer group's offsets past every partition's done prefix.

  riffle ranges plan --topic events --group etl --max-records 100000 > ranges.jsonl
  # ... each task runs: echo "$RANGE" | riffle ranges read -f json
  # ... then, with the ranges whose tasks succeeded:
  riffle ranges commit --group etl < done.jsonl

plan starts on each partition at the group's committed offset (else
--start) and stops at its end, so the next plan after a commit covers only
what is new and what was not done; "riffle group lag" shows the progress.`,
		Example: `  riffle ranges plan --topic events --group etl --max-records 100000
  riffle ranges read --range '{"topic":"events","partition":0,"low":0,"high":100}' -f json
  riffle ranges commit --group etl < done.jsonl`,
	}
	cmd.AddCommand(a.rangesPlanCmd(), a.rangesReadCmd(), a.rangesCommitCmd())
	return cmd
}

// rangesStart parses --start.
func rangesStart(s string) (riffle.StartOffset, error) {
	st, _, err := parseResetTarget(s)
	if err != nil {
		return st, usageErrorf("--start %q: want earliest, latest, an offset or an RFC 3339 time such as 2024-05-01T12:00:00Z", s)
	}
	return st, nil
}

func (a *app) rangesPlanCmd() *cobra.Command {
	var (
		topics        []string
		group         string
		maxRecords    int64
		start         string
		readCommitted bool
		every         time.Duration
	)
	cmd := &cobra.Command{
		Use:   "plan --topic TOPIC [--group G] [--max-records N]",
		Short: "Print the offset ranges of topics not checkpointed yet, as JSON lines",
		Long: `Print, one JSON object a line ({"topic":...,"partition":...,"low":...,"high":...},
high exclusive), the offset ranges of every partition of the topics from
the group's committed offset (else --start: earliest by default) to the
partition's end: its high watermark, or with --read-committed its last
stable offset, so an open transaction holds the plan back where it began.
Ranges span at most --max-records offsets (records may be fewer:
transaction markers and compaction leave gaps).

Once, by default. With --every, plan keeps running and prints, every
interval, only the ranges it has not printed before (partitions added to
the topic included), until Ctrl-C or, when given, --timeout.

plan commits nothing: "riffle ranges commit" does, once ranges are done.
Two plans with no commit between them print the same ranges.`,
		Example: `  riffle ranges plan --topic events --group etl --max-records 100000
  riffle ranges plan --topic events --start 2024-05-01T00:00:00Z --read-committed
  riffle ranges plan --topic events --group etl --every 10s --timeout 1h`,
		Args: cobra.NoArgs,
	}
	f := cmd.Flags()
	f.StringSliceVarP(&topics, "topic", "t", nil, "`TOPIC` to plan (repeatable, required)")
	f.StringVarP(&group, "group", "G", "", "start at the committed offsets of consumer group `G`")
	f.Int64Var(&maxRecords, "max-records", 0, "at most `N` offsets per range (default: one range per partition)")
	f.StringVar(&start, "start", "earliest", "where a partition without a committed offset starts: earliest, latest, an `OFFSET` or an RFC 3339 time")
	f.BoolVar(&readCommitted, "read-committed", false, "plan up to the last stable offset (give the same flag to read)")
	f.DurationVar(&every, "every", 0, "keep planning every `INTERVAL`, printing only new ranges")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		topics = cleanList(topics)
		switch {
		case len(topics) == 0:
			return usageErrorf("--topic is required")
		case maxRecords < 0:
			return usageErrorf("--max-records must not be negative, got %d", maxRecords)
		case cmd.Flags().Changed("every") && every <= 0:
			return usageErrorf("--every must be positive, got %v", every)
		}
		st, err := rangesStart(start)
		if err != nil {
			return err
		}
		opts := []ranges.Option{ranges.MaxRecords(maxRecords), ranges.StartAt(st)}
		if readCommitted {
			opts = append(opts, ranges.ReadCommitted())
		}
		cl, err := a.connect()
		if err != nil {
			return err
		}
		pl, err := ranges.NewPlanner(cl, group, topics, opts...)
		if err != nil {
			return err
		}
		out := bufio.NewWriter(a.stdout)
		enc := json.NewEncoder(out)
		emit := func(_ context.Context, rs []ranges.Range) error {
			for _, r := range rs {
				if err := enc.Encode(r); err != nil {
					return err
				}
			}
			if err := out.Flush(); err != nil {
				return fmt.Errorf("writing the ranges: %w", err)
			}
			return nil
		}
		if every == 0 {
			rs, err := pl.Next(a.context())
			if err != nil {
				return err
			}
			return emit(a.context(), rs)
		}
		ctx := a.runContext(cmd) // --timeout bounds a watch only when given
		err = pl.Watch(ctx, every, emit)
		if a.interrupted() == nil && ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
			return nil // --timeout ends a watch normally
		}
		return err
	}
	return cmd
}

func (a *app) rangesReadCmd() *cobra.Command {
	var (
		rangeArg      string
		readCommitted bool
		format        string
		keySep        string
	)
	cmd := &cobra.Command{
		Use:   "read [--range JSON]",
		Short: "Print the records of offset ranges in the consume formats",
		Long: `Read the ranges given as JSON objects, one a line on stdin (a line of
"riffle ranges plan"), or the one given with --range, and print the
records with low <= offset < high, in offset order, as "riffle consume"
would: --format value (the default), kv, json or a kcat format string.
A range that ends beyond the partition's end fails (exit status 1) after
printing what there was.`,
		Example: `  riffle ranges read --range '{"topic":"events","partition":3,"low":1000,"high":2000}' -f json
  riffle ranges plan --topic events --max-records 1000 | head -1 | riffle ranges read -f '%p/%o %s\n'`,
		Args: cobra.NoArgs,
	}
	f := cmd.Flags()
	f.StringVar(&rangeArg, "range", "", "the range to read, a `JSON` object with topic, partition, low and high (default: ranges on stdin)")
	f.BoolVar(&readCommitted, "read-committed", false, "read only committed transactional records")
	f.StringVarP(&format, "format", "f", formatValue, "what to print: value, kv, json or a `FORMAT` string such as '%k=%s\\n'")
	f.StringVarP(&keySep, "key-separator", "K", "\t", "`SEP` between key and value in --format kv, which it selects when given alone")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg := consumeConfig{format: format, keySep: keySep}
		if cmd.Flags().Changed("key-separator") && !cmd.Flags().Changed("format") {
			cfg.format = formatKV
		}
		if strings.Contains(cfg.format, "%") {
			t, err := parseTemplate(cfg.format)
			if err != nil {
				return usageErrorf("--format %q: %v", cfg.format, err)
			}
			cfg.tmpl, cfg.format = t, formatTemplate
		}
		switch cfg.format = strings.ToLower(cfg.format); cfg.format {
		case formatValue, formatKV, formatJSON, formatTemplate:
		default:
			return usageErrorf("--format %q: want value, kv, json or a format string with %%-verbs such as '%%k=%%s\\n'", cfg.format)
		}
		var in []ranges.Range
		if cmd.Flags().Changed("range") {
			r, err := parseRange(rangeArg)
			if err != nil {
				return usageErrorf("--range: %v", err)
			}
			in = append(in, r)
		} else {
			var err error
			if in, err = readRanges(cmd.InOrStdin()); err != nil {
				return err
			}
		}
		var opts []ranges.Option
		if readCommitted {
			opts = append(opts, ranges.ReadCommitted())
		}
		cl, err := a.connect()
		if err != nil {
			return err
		}
		rd := ranges.NewReader(cl, opts...)
		defer rd.Close()
		run := &consumeRun{cfg: &cfg, out: bufio.NewWriterSize(a.stdout, 64<<10)}
		run.enc = json.NewEncoder(run.out)
		run.enc.SetEscapeHTML(false)
		var readErr error
		for _, r := range in {
			if readErr = rd.Read(a.context(), r, run.write); readErr != nil {
				readErr = fmt.Errorf("reading %s: %w", r, readErr)
				break
			}
		}
		if err := run.out.Flush(); err != nil {
			return fmt.Errorf("writing the records: %w", err)
		}
		return readErr
	}
	return cmd
}

func (a *app) rangesCommitCmd() *cobra.Command {
	var (
		group         string
		start         string
		readCommitted bool
	)
	cmd := &cobra.Command{
		Use:   "commit --group G",
		Short: "Commit a group's offsets past the ranges that are done (JSON lines on stdin)",
		Long: `Read the ranges that are done, JSON objects one a line on stdin (lines of
"riffle ranges plan", in any order), and commit, as the group's offsets,
each partition's offset below which every offset is done: a range not
done (or offsets no range covered) holds its partition back, and the
ranges above it are done again after the next plan. Ranges below the
group's committed offset are ignored. A partition the group has no
committed offset for starts at --start (give plan's); a start that moves
(latest) needs a first commit of the starting offsets: "riffle group
reset G --to latest --topic T --execute".

The group must have no active members (their own commits would overwrite
these): riffle refuses a group with members, exit status 1. It prints the
committed offset of every partition it committed.`,
		Example: `  riffle ranges commit --group etl < done.jsonl`,
		Args:    cobra.NoArgs,
	}
	f := cmd.Flags()
	f.StringVarP(&group, "group", "G", "", "consumer group `G` to commit to (required)")
	f.StringVar(&start, "start", "earliest", "where a partition without a committed offset starts: earliest, latest, an `OFFSET` or an RFC 3339 time")
	f.BoolVar(&readCommitted, "read-committed", false, "the ranges were planned with --read-committed")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if strings.TrimSpace(group) == "" {
			return usageErrorf("--group is required")
		}
		st, err := rangesStart(start)
		if err != nil {
			return err
		}
		in, err := readRanges(cmd.InOrStdin())
		if err != nil {
			return err
		}
		opts := []ranges.Option{ranges.StartAt(st)}
		if readCommitted {
			opts = append(opts, ranges.ReadCommitted())
		}
		cl, err := a.connect()
		if err != nil {
			return err
		}
		cp := ranges.NewCheckpoint(cl, group, opts...)
		for _, r := range in {
			if err := cp.MarkDone(r); err != nil {
				return usageErrorf("%v", err)
			}
		}
		if err := cp.Commit(a.context()); err != nil {
			return err
		}
		offsets := cp.Offsets()
		tw := newTable(a.stdout)
		row(tw, "TOPIC", "PARTITION", "COMMITTED")
		for _, tp := range sortedTPs(offsets) {
			row(tw, tp.Topic, tp.Partition, offsets[tp])
		}
		return tw.Flush()
	}
	return cmd
}

// parseRange parses one JSON range, strictly.
func parseRange(s string) (ranges.Range, error) {
	var r ranges.Range
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("%q: want {\"topic\":...,\"partition\":...,\"low\":...,\"high\":...}: %v", s, err)
	}
	if dec.More() {
		return r, fmt.Errorf("%q: more than one JSON value", s)
	}
	if r.Topic == "" || r.Partition < 0 || r.Low < 0 || r.High < r.Low {
		return r, fmt.Errorf("%q: %w", s, ranges.ErrInvalidRange)
	}
	return r, nil
}

// readRanges reads JSON ranges one a line; blank lines are skipped.
func readRanges(in io.Reader) ([]ranges.Range, error) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var out []ranges.Range
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		r, err := parseRange(line)
		if err != nil {
			return nil, usageErrorf("stdin line %d: %v", n, err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading stdin: %w", err)
	}
	return out, nil
}

func sortedTPs(m map[riffle.TopicPartition]int64) []riffle.TopicPartition {
	out := make([]riffle.TopicPartition, 0, len(m))
	for tp := range m {
		out = append(out, tp)
	}
	slices.SortFunc(out, func(x, y riffle.TopicPartition) int {
		return cmp.Or(cmp.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
	})
	return out
}
