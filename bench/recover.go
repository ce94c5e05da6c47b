package main

// recover: how long each client takes to talk to the cluster again after
// every seed was down and one comes back on its port.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/IBM/sarama"
	"github.com/riffle-go/riffle"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register("recover", "time to reach the cluster again after every seed was down and one came back on its port", runRecover)
}

// recoverer is one client in recover: connect makes a client of seed and
// returns probe, one metadata request the way an application would ask
// (each client retrying as its defaults say), and close.
type recoverer struct {
	name    string
	module  string
	connect func(seed string) (probe func(ctx context.Context) error, close func(), err error)
}

func recoverers() []recoverer {
	return []recoverer{
		{"riffle", "github.com/riffle-go/riffle", func(seed string) (func(context.Context) error, func(), error) {
			cl, err := riffle.NewClient(riffle.SeedBrokers(seed))
			if err != nil {
				return nil, nil, err
			}
			return func(ctx context.Context) error { _, err := cl.Brokers(ctx); return err }, cl.Close, nil
		}},
		{"franz-go", "github.com/twmb/franz-go", func(seed string) (func(context.Context) error, func(), error) {
			cl, err := kgo.NewClient(kgo.SeedBrokers(seed))
			if err != nil {
				return nil, nil, err
			}
			return func(ctx context.Context) error {
				_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
				return err
			}, cl.Close, nil
		}},
		{"sarama", "github.com/IBM/sarama", func(seed string) (func(context.Context) error, func(), error) {
			cl, err := sarama.NewClient([]string{seed}, sarama.NewConfig())
			if err != nil {
				return nil, nil, err
			}
			// RefreshMetadata takes no context; it retries as its
			// config says (3 times, 250 ms apart).
			return func(context.Context) error { return cl.RefreshMetadata() }, func() { cl.Close() }, nil
		}},
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// recoverOnce: a one-broker cluster on a fixed port; the client connects
// and fetches metadata; the broker goes away (its port refuses) for
// outage while the application keeps asking for metadata; the broker
// comes back on the same port. The result is the time from the broker
// listening again until a request first succeeds.
func recoverOnce(ctx context.Context, c recoverer, outage, limit time.Duration) (time.Duration, error) {
	port, err := freePort()
	if err != nil {
		return 0, err
	}
	fake, err := kfake.NewCluster(kfake.Ports(port))
	if err != nil {
		return 0, err
	}
	seed := fmt.Sprintf("127.0.0.1:%d", port)
	probe, closeClient, err := c.connect(seed)
	if err != nil {
		fake.Close()
		return 0, err
	}
	defer closeClient()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = probe(pctx)
	cancel()
	if err != nil {
		fake.Close()
		return 0, fmt.Errorf("before the outage: %w", err)
	}
	fake.Close()
	down := time.Now()

	// The application asks again and again, each call bounded; the first
	// success after the broker is back ends the run.
	type ok struct{ at time.Time }
	success := make(chan ok, 1)
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for rctx.Err() == nil {
			cctx, cancel := context.WithTimeout(rctx, 2*time.Second)
			err := probe(cctx)
			cancel()
			if err == nil && time.Since(down) > outage {
				success <- ok{time.Now()}
				return
			}
			if err == nil { // cannot be: nothing listens
				continue
			}
		}
	}()
	select {
	case <-time.After(outage):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	back, err := kfake.NewCluster(kfake.Ports(port))
	if err != nil {
		return 0, fmt.Errorf("restarting the broker on port %d: %w", port, err)
	}
	defer back.Close()
	up := time.Now()
	select {
	case s := <-success:
		return s.at.Sub(up), nil
	case <-time.After(limit):
		return limit, errors.New("not recovered within the cap")
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func runRecover(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("recover", flag.ContinueOnError)
	runs := fs.Int("runs", 5, "runs per client (in rounds)")
	outage := fs.Duration("outage", 5*time.Second, "how long the broker is down")
	limit := fs.Duration("cap", 15*time.Second, "give up on a run this long after the broker is back")
	only := fs.String("clients", "", "comma-separated clients to run (default all); riffle is always run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	selected, err := selectClients(recoverers(), func(c recoverer) string { return c.name }, *only)
	if err != nil {
		return err
	}
	fmt.Printf("recover: one kfake broker on a fixed port; each client connects, the broker goes away (its port refuses) for %s while\n", fmtDur(*outage))
	fmt.Printf("the application keeps asking for metadata (riffle Brokers, franz-go a MetadataRequest, sarama RefreshMetadata; default configs),\n")
	fmt.Printf("then comes back on the same port. Timed: from the broker listening again to the first successful request.\n")
	fmt.Printf("load average before: %s\n\n", loadAvg())
	times := map[string][]time.Duration{}
	notes := map[string][]string{}
	for range *runs {
		for _, c := range selected {
			d, err := recoverOnce(ctx, c, *outage, *limit)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				notes[c.name] = append(notes[c.name], oneLine(err, 80))
				d = *limit
			}
			times[c.name] = append(times[c.name], d)
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "client\tversion\tmedian\tworst\truns\t  note")
	for _, c := range selected {
		ts := times[c.name]
		var rs []string
		for _, d := range ts {
			rs = append(rs, fmtDur(d))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t  %s\n", c.name, modVersion(c.module), fmtDur(median(ts)), fmtDur(slices.Max(ts)),
			strings.Join(rs, " "), strings.Join(notes[c.name], "; "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Printf("\nload average after: %s\n", loadAvg())
	best, bestD := "", time.Duration(0)
	for _, c := range selected {
		if c.name != "riffle" && (best == "" || median(times[c.name]) < bestD) {
			best, bestD = c.name, median(times[c.name])
		}
	}
	if best != "" {
		fmt.Printf("recover riffle/%s median time ratio: %.2f\n", best, median(times["riffle"]).Seconds()/bestD.Seconds())
	}
	fmt.Printf("recover riffle worst: %s (bound: the Java client's reconnect.backoff.max.ms, 1 s)\n", fmtDur(slices.Max(times["riffle"])))
	return nil
}
