package main

// connect: time to first metadata when the seed list starts with
// unreachable brokers. Two blackholed seeds (connect() hangs, as for a
// firewalled host) are listed before one live broker, and each client is
// left at its defaults: no dial timeout, retry or backoff is tuned, since
// the point is how each behaves out of the box.
//
// Every client shuffles its seeds (or starts at a random one), so a run's
// time depends on where the live seed landed: the statistic that describes
// a client is its mean over many runs, next to its worst run.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/IBM/sarama"
	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/rifftest"
	segkafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register("connect", "time to first metadata with 2 blackholed seeds listed before 1 live one, default configs", runConnect)
}

// bootstrapper is one client under test in connect: boot builds the client
// from seeds and returns once it holds cluster metadata, together with a
// function that closes it.
type bootstrapper struct {
	name   string
	module string // module path, for the version column
	// unavailable, when set, says why this client cannot run in this
	// build; it is then listed but not timed.
	unavailable string
	boot        func(ctx context.Context, seeds []string) (cleanup func(), err error)
}

func bootstrappers() []bootstrapper {
	return []bootstrapper{
		{name: "riffle", module: "github.com/riffle-go/riffle", boot: bootRiffle},
		{name: "franz-go", module: "github.com/twmb/franz-go", boot: bootFranz},
		{name: "sarama", module: "github.com/IBM/sarama", boot: bootSarama},
		{name: "kafka-go", module: "github.com/segmentio/kafka-go", boot: bootKafkaGo},
		{name: "confluent-kafka-go", module: confluentModule, unavailable: confluentUnavailable, boot: bootConfluent},
	}
}

// bootRiffle: NewClient does not connect; Brokers refreshes metadata, which
// is the first time the client needs the cluster.
func bootRiffle(ctx context.Context, seeds []string) (func(), error) {
	cl, err := riffle.NewClient(riffle.SeedBrokers(seeds...))
	if err != nil {
		return nil, err
	}
	bs, err := cl.Brokers(ctx)
	if err == nil && len(bs) == 0 {
		err = errors.New("metadata lists no brokers")
	}
	return cl.Close, err
}

// bootFranz: kgo.NewClient does not connect either; the first request does.
// A MetadataRequest for all topics is what kgo's own metadata loop sends.
func bootFranz(ctx context.Context, seeds []string) (func(), error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, err
	}
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err == nil && len(resp.Brokers) == 0 {
		err = errors.New("metadata lists no brokers")
	}
	return cl.Close, err
}

// bootSarama: sarama.NewClient fetches bootstrap metadata before it
// returns, and takes no context: timeCapped abandons it at the cap and
// closes the client if it returns later.
func bootSarama(_ context.Context, seeds []string) (func(), error) {
	cl, err := sarama.NewClient(seeds, sarama.NewConfig())
	if err != nil {
		return nil, err
	}
	cleanup := func() { cl.Close() }
	if len(cl.Brokers()) == 0 {
		return cleanup, errors.New("metadata lists no brokers")
	}
	return cleanup, nil
}

// bootKafkaGo: kafka-go's multi-seed notion is a kafka.Client whose Addr is
// kafka.TCP(seed, seed, ...); its Transport dials the addresses of such an
// Addr in turn. A fresh zero Transport (kafka-go's defaults) per run keeps
// one run's connection pool from serving the next.
func bootKafkaGo(ctx context.Context, seeds []string) (func(), error) {
	tr := &segkafka.Transport{}
	cl := &segkafka.Client{Addr: segkafka.TCP(seeds...), Transport: tr}
	resp, err := cl.Metadata(ctx, &segkafka.MetadataRequest{})
	if err == nil && len(resp.Brokers) == 0 {
		err = errors.New("metadata lists no brokers")
	}
	return tr.CloseIdleConnections, err
}

// connectEnv starts what one run needs: a fresh single-broker cluster and
// two fresh blackholes, so no run inherits sockets, backoff state or
// half-open dials from another. The seeds list the blackholes first.
func connectEnv() (seeds []string, closeEnv func(), err error) {
	cluster, err := rifftest.Start(rifftest.Brokers(1))
	if err != nil {
		return nil, nil, err
	}
	closers := []func(){cluster.Close}
	closeEnv = func() {
		for _, c := range closers {
			c()
		}
	}
	for range 2 {
		bh, err := rifftest.NewBlackhole()
		if err != nil {
			closeEnv()
			return nil, nil, err
		}
		closers = append(closers, func() { bh.Close() })
		seeds = append(seeds, bh.Addr())
	}
	live := cluster.Addrs()
	if len(live) != 1 {
		closeEnv()
		return nil, nil, fmt.Errorf("rifftest cluster has %d brokers, want 1", len(live))
	}
	return append(seeds, live[0]), closeEnv, nil
}

// capDur formats d, or ">cap" when d reached the cap.
func capDur(d, limit time.Duration) string {
	if d >= limit {
		return ">" + fmtDur(limit)
	}
	return fmtDur(d)
}

func runConnect(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("connect", flag.ContinueOnError)
	runs := fs.Int("runs", 9, "runs per client; the ratio compares means")
	limit := fs.Duration("cap", 15*time.Second, "give up on one run after this long")
	only := fs.String("clients", "", "comma-separated clients to run (default all); riffle is always run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *runs < 1 || *limit <= 0 {
		return errors.New("-runs must be at least 1 and -cap positive")
	}

	all := bootstrappers()
	var selected []bootstrapper
	if *only == "" {
		selected = all
	} else {
		want := map[string]bool{"riffle": true}
		for n := range strings.SplitSeq(*only, ",") {
			want[strings.TrimSpace(n)] = true
		}
		for _, b := range all {
			if want[b.name] {
				selected = append(selected, b)
				delete(want, b.name)
			}
		}
		for n := range want {
			return fmt.Errorf("unknown client %q", n)
		}
	}

	fmt.Printf("connect: time to first metadata; seeds = 2 blackholed (listed first) + 1 live kfake broker\n")
	fmt.Printf("each client at its defaults; %d runs each, fresh cluster and blackholes per run, cap %s\n\n", *runs, fmtDur(*limit))

	// Runs go in rounds (every client once, then again), so a drift in
	// machine load spreads over all clients rather than hitting one.
	results := make(map[string][]attempt)
	for r := range *runs {
		for _, b := range selected {
			if b.unavailable != "" {
				continue
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			seeds, closeEnv, err := connectEnv()
			if err != nil {
				return fmt.Errorf("setting up run %d for %s: %w", r+1, b.name, err)
			}
			results[b.name] = append(results[b.name], timeCapped(ctx, *limit, func(ctx context.Context) (func(), error) {
				return b.boot(ctx, seeds)
			}))
			closeEnv()
		}
	}

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "client\tversion\tmean\tmedian\tworst\truns\tnote")
	means := make(map[string]time.Duration)
	for _, b := range selected {
		if b.unavailable != "" {
			fmt.Fprintf(tw, "%s\t%s\tn/a\tn/a\tn/a\t-\tnot run: %s\n", b.name, modVersion(b.module), b.unavailable)
			continue
		}
		as := results[b.name]
		eff := make([]time.Duration, len(as))
		cells := make([]string, len(as))
		var note string
		for i, a := range as {
			eff[i] = a.effective(*limit)
			cells[i] = a.String(*limit)
			if a.err != nil && note == "" {
				note = "error: " + oneLine(a.err, 90)
			}
		}
		mn := mean(eff)
		means[b.name] = mn
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", b.name, modVersion(b.module),
			capDur(mn, *limit), capDur(median(eff), *limit), capDur(slices.Max(eff), *limit),
			strings.Join(cells, " "), note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Println()
	fmt.Println("err@T: gave up with an error after T; >cap: no metadata by the cap. Both count as the cap in mean, median, worst and the ratio,")
	fmt.Println("so a mean that includes such runs is a lower bound. The ratio compares means: seeds are shuffled, so the mean is the expected time.")

	best := ""
	for _, b := range selected {
		if b.name == "riffle" || b.unavailable != "" {
			continue
		}
		if best == "" || means[b.name] < means[best] {
			best = b.name
		}
	}
	if best == "" {
		return errors.New("no peer client ran, so there is no ratio to report")
	}
	ratio := float64(means["riffle"]) / float64(means[best])
	fmt.Printf("bootstrap riffle/%s time ratio: %.2f\n", best, ratio)
	return nil
}
