// Command riffle is a command-line Kafka client built on Riffle: it
// describes clusters and topics, creates and deletes topics, produces and
// consumes records, manages consumer groups, inspects transactions,
// manages ACLs, configs and SCRAM credentials, deletes records, serves
// an embedded cluster and runs a demo. Without --brokers (or
// RIFFLE_BROKERS) the commands that only look start an embedded
// in-process cluster, so they work with nothing installed; those that
// change the cluster or read its records refuse, as their work would be
// lost with it.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/rifftest"
	"github.com/spf13/cobra"
)

// Exit codes.
const (
	exitOK    = 0 // the command did what it was asked
	exitFail  = 1 // the operation failed (unreachable cluster, broker error, ...)
	exitUsage = 2 // bad flags or arguments
	// A command stopped by a signal exits with 128 + the signal number,
	// as a process killed by it would: 130 for SIGINT (Ctrl-C), 143 for
	// SIGTERM. It still cleans up first (produce delivers what it
	// buffered, consume commits, serve stops its cluster).
	exitSignal = 128
)

// Environment variables read by riffle.
const (
	envBrokers      = "RIFFLE_BROKERS"
	envSASLPassword = "RIFFLE_SASL_PASSWORD"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args, writing results to stdout and
// diagnostics to stderr, and returns the process exit code. It reads the
// environment (RIFFLE_BROKERS, RIFFLE_SASL_PASSWORD) and stops on SIGINT
// or SIGTERM.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case s := <-sigs:
			// Let a second signal kill the process the default way
			// in case shutting down hangs.
			signal.Stop(sigs)
			cancel(&signalError{s})
		case <-ctx.Done():
		}
	}()
	return runIn(ctx, args, stdout, stderr)
}

// signalError is the cause of the context of a command stopped by a
// signal.
type signalError struct{ sig os.Signal }

func (e *signalError) Error() string { return "interrupted by " + e.name() }

func (e *signalError) name() string {
	if e.sig == syscall.SIGTERM {
		return "SIGTERM"
	}
	return "SIGINT"
}

// exitCode is 128 + the signal number, as for a process the signal killed.
func (e *signalError) exitCode() int {
	if s, ok := e.sig.(syscall.Signal); ok {
		return exitSignal + int(s)
	}
	return exitSignal + int(syscall.SIGINT)
}

// runIn is run with the context a signal cancels (with a *signalError
// cause): tests call it to interrupt a command.
func runIn(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr, getenv: os.Getenv, baseCtx: ctx}
	defer a.close()
	root := a.rootCmd()
	if args == nil {
		args = []string{} // nil makes cobra read os.Args
	}
	args, err := kcatMode(root, args)
	if err != nil {
		return a.exitCode(root, err)
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetContext(ctx)
	cmd, err := root.ExecuteC()
	a.close()
	return a.exitCode(cmd, err)
}

// app holds the state of one riffle invocation: the global flags and the
// connection (and embedded cluster) shared by the command that runs.
type app struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	baseCtx        context.Context // cancelled by SIGINT/SIGTERM, with a *signalError cause

	// Global flags.
	brokers      []string
	timeout      time.Duration
	saslMech     saslMechanism
	saslUser     string
	saslPassword string
	tlsOn        bool
	tlsCA        string
	tlsCert      string
	tlsKey       string
	tlsInsecure  bool
	verbose      bool
	quiet        bool
	clientID     string
	props        []string // -X KEY=VALUE
	kcatConsume  bool     // -C, rewritten to consume (see kcatMode)
	kcatProduce  bool     // -P, rewritten to produce

	securityProtocol string // -X security.protocol, upper case; "" if not given

	// validated is set once cobra has parsed flags and arguments and the
	// global flags passed their checks: errors before that are usage
	// errors, errors after are failures.
	validated bool
	ctx       context.Context // baseCtx bounded by --timeout
	cancel    context.CancelFunc
	log       *slog.Logger // the client's: debug to stderr with --verbose, else warnings (see cliLogHandler)

	embedded *rifftest.Cluster
	client   *riffle.Client
	dials    *dialTracker // connection failures, to explain timeouts
	logQuiet atomic.Bool  // drop the library's "metadata refresh failed" warning (see cliLogHandler)
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "riffle",
		Short: "A Kafka command-line client built on Riffle",
		Long: `riffle inspects and manages Kafka clusters: it describes the cluster and
its topics (cluster, topic), creates and deletes topics, writes and reads
records (produce, consume), lists, describes, resets and deletes consumer
groups and shows their lag (group), lists, describes and resets share
groups (share), lists and describes transactions and the producers active
on a topic (txn), splits topics into offset ranges for other engines to
read and checkpoints them in a group (ranges), manages ACLs (acl), topic,
broker and group configs (config), deletes records below an offset (records)
and sets users' SCRAM credentials (user), runs an embedded cluster until
Ctrl-C (serve) and gives a guided tour (demo).

Brokers come from --brokers or, failing that, the RIFFLE_BROKERS environment
variable (comma-separated host:port; the port defaults to 9092). With
neither, the commands that only look (cluster, topic list and describe,
group list, describe and lag, ...) start an embedded 3-broker cluster in
the process, with a topic "demo" of 6 partitions, and stop it when the
command ends: handy for trying riffle out. The commands that change the
cluster or read its records (produce, consume, ranges, and those that
create, delete, set or reset) refuse instead, since what they did would be
gone with it. To keep one cluster across commands, run "riffle serve" in
another terminal and export the RIFFLE_BROKERS line it prints.

Every command is bounded by --timeout (produce and consume only when it is
given explicitly: they run until done or Ctrl-C) and stops on Ctrl-C. Prefer the
RIFFLE_SASL_PASSWORD environment variable to --sasl-password, which other
users of the machine can see in the process list.

Exit status: 0 on success, 1 when the operation failed (the error is
printed as "riffle: ..." on stderr; a cluster none of whose addresses
answers, every one refusing the connection or not resolving, fails within
about a second, naming each address and why), 2 on a usage error (bad
flags or arguments, an invalid broker address), 130 when Ctrl-C (SIGINT)
stopped the command and 143 for SIGTERM, as shells expect, whatever the
command: a consume following a topic, a produce reading stdin, serve.
Interrupted commands still finish cleanly and print their summary.

kcat's core flags work as in kcat: -b is --brokers; -C and -P stand for
consume and produce ("riffle -C -b kafka:9092 -t orders -e" is "riffle
consume orders --brokers kafka:9092 -e"), whose -t gives the topic; -q
(--quiet) leaves out their progress, summary and group notes; -X
KEY=VALUE (--property) sets a client property by its librdkafka or Java
name, as the flag it maps to (a property riffle does not know, or one
whose flag is given too, is an error):

` + propertiesHelp() + `
security.protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) turns on --tls
for SSL and SASL_SSL and checks that SASL is configured exactly for the
SASL_ ones. Java's keystore and truststore files are not supported: give
PEM files with ssl.ca.location, ssl.certificate.location and
ssl.key.location (--tls-ca, --tls-cert, --tls-key).`,
		Example: `  # Try it out against an embedded cluster
  riffle demo

  # One embedded cluster for many commands: serve it, then in another shell
  riffle serve
  export RIFFLE_BROKERS=127.0.0.1:40123,127.0.0.1:40124,127.0.0.1:40125
  printf 'hello\n' | riffle produce demo

  # Describe a real cluster
  riffle --brokers kafka-1:9092,kafka-2:9092 cluster
  export RIFFLE_BROKERS=kafka-1:9092
  riffle topic list -o json

  # TLS and SASL/SCRAM
  RIFFLE_SASL_PASSWORD=secret riffle --brokers kafka:9093 --tls \
      --sasl-mechanism SCRAM-SHA-512 --sasl-user alice topic list

  # kcat style: read the committed records of a topic, then exit
  riffle -C -b kafka:9092 -t orders -o beginning -e -X isolation.level=read_committed`,
		Version:           riffle.Version,
		SilenceErrors:     true, // run prints errors itself, with the exit code
		SilenceUsage:      true,
		PersistentPreRunE: a.setup,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if a.kcatConsume || a.kcatProduce {
				// kcatMode takes -C and -P out of the command line,
				// but not --consume=true.
				return usageErrorf("-C (--consume) and -P (--produce) take no value: riffle -C -b HOST:PORT -t TOPIC")
			}
			return cmd.Help()
		},
	}
	root.SetFlagErrorFunc(flagError)
	f := root.PersistentFlags()
	f.StringSliceVarP(&a.brokers, "brokers", "b", nil, "seed brokers, a comma-separated `HOST:PORT` list (env "+envBrokers+"; none: an embedded cluster, for the commands that only look)")
	f.DurationVar(&a.timeout, "timeout", 30*time.Second, "time limit for the whole command")
	f.Var(&a.saslMech, "sasl-mechanism", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	f.StringVar(&a.saslUser, "sasl-user", "", "SASL user name")
	f.StringVar(&a.saslPassword, "sasl-password", "", "SASL password (prefer env "+envSASLPassword+")")
	f.BoolVar(&a.tlsOn, "tls", false, "connect with TLS (implied by the other --tls-* flags)")
	f.StringVar(&a.tlsCA, "tls-ca", "", "PEM file of CA certificates to trust instead of the system roots")
	f.StringVar(&a.tlsCert, "tls-cert", "", "PEM file of the client certificate, for mutual TLS (needs --tls-key)")
	f.StringVar(&a.tlsKey, "tls-key", "", "PEM file of the client certificate's private key")
	f.BoolVar(&a.tlsInsecure, "tls-insecure", false, "do not verify broker certificates (unsafe)")
	f.BoolVarP(&a.verbose, "verbose", "v", false, "log client activity (debug level) to stderr")
	f.BoolVarP(&a.quiet, "quiet", "q", false, "produce and consume: no progress, summary or group notes on stderr (errors and warnings still)")
	f.StringVar(&a.clientID, "client-id", "riffle-cli", "client `ID` sent to the brokers, which log it and apply quotas by it")
	f.StringArrayVarP(&a.props, "property", "X", nil, "set a client property `KEY=VALUE` by its librdkafka or Java name (repeatable; see above)")
	root.Flags().BoolVarP(&a.kcatConsume, "consume", "C", false, "kcat's consumer mode: riffle -C ... is riffle consume ...")
	root.Flags().BoolVarP(&a.kcatProduce, "produce", "P", false, "kcat's producer mode: riffle -P ... is riffle produce ...")

	root.AddCommand(a.clusterCmd(), a.topicCmd(), a.demoCmd())
	root.AddCommand(a.consumerGroupCmd(), a.shareCmd(), a.txnCmd())
	root.AddCommand(a.produceCmd(), a.consumeCmd(), a.rangesCmd())
	root.AddCommand(a.aclCmd(), a.configCmd(), a.recordsCmd(), a.userCmd())
	root.AddCommand(a.serveCmd())
	return root
}

// setup runs after cobra has parsed flags and arguments, before any
// command: it checks the global flags and starts the --timeout clock.
func (a *app) setup(cmd *cobra.Command, _ []string) error {
	if err := a.applyProperties(cmd); err != nil {
		return err
	}
	if a.timeout <= 0 {
		return usageErrorf("--timeout must be positive, got %v", a.timeout)
	}
	if err := a.checkNeedsCluster(cmd); err != nil {
		return err
	}
	if err := a.checkSecurityFlags(cmd); err != nil {
		return err
	}
	if a.quiet && a.verbose {
		return usageErrorf("-q (--quiet) and -v (--verbose) exclude each other")
	}
	if cmd.Flags().Changed("brokers") && len(cleanList(a.brokers)) == 0 {
		return usageErrorf("--brokers is empty (omit it to start an embedded cluster)")
	}
	if a.verbose {
		a.log = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	} else {
		a.log = slog.New(&cliLogHandler{quiet: &a.logQuiet})
	}
	a.ctx, a.cancel = context.WithTimeout(a.baseCtx, a.timeout)
	a.validated = true
	return nil
}

// context returns the command's context: cancelled by a signal or when
// --timeout runs out.
func (a *app) context() context.Context {
	if a.ctx == nil {
		return a.baseCtx
	}
	return a.ctx
}

// close releases the client and the embedded cluster. It is idempotent.
func (a *app) close() {
	if a.client != nil {
		a.client.Close()
		a.client = nil
	}
	if a.embedded != nil {
		a.embedded.Close()
		a.embedded = nil
	}
	if a.cancel != nil {
		a.cancel()
	}
}

// usageError is a mistake in the command line: exit code 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// errReported means the command already printed why it failed (one line
// per failed topic, say) and only the exit code is left to set.
var errReported = errors.New("failure already reported")

// reportItems reports per-item results: "riffle: <name>: <error>" on stderr
// for each item whose outcome is an error, and, when ok is set, ok's line on
// stdout for each other item. It returns errReported if any item failed.
func reportItems[T any](a *app, items []T, outcome func(T) (name string, err error), ok func(T) string) error {
	failed := false
	for _, it := range items {
		name, err := outcome(it)
		if err != nil {
			fmt.Fprintf(a.stderr, "riffle: %s: %s\n", name, errText(err))
			failed = true
			continue
		}
		if ok != nil {
			fmt.Fprintln(a.stdout, ok(it))
		}
	}
	if failed {
		return errReported
	}
	return nil
}

// exitCode prints err, if any, and returns the exit code for it.
func (a *app) exitCode(cmd *cobra.Command, err error) int {
	if err == nil {
		return exitOK
	}
	var ue *usageError
	if errors.As(err, &ue) || !a.validated {
		// Flag, argument and unknown-command errors come from cobra
		// before setup runs; later ones are marked as usageError.
		fmt.Fprintf(a.stderr, "riffle: %s\n", errText(err))
		path := "riffle"
		if cmd != nil {
			path = cmd.CommandPath()
		}
		fmt.Fprintf(a.stderr, "Run '%s --help' for usage.\n", path)
		return exitUsage
	}
	code := exitFail
	if se := a.interrupted(); se != nil {
		code = se.exitCode()
	}
	if !errors.Is(err, errReported) {
		fmt.Fprintf(a.stderr, "riffle: %s\n", a.describeFailure(err))
	}
	return code
}

// interrupted returns the signal that stopped the command, if one did.
func (a *app) interrupted() *signalError {
	var se *signalError
	if a.baseCtx != nil && errors.As(context.Cause(a.baseCtx), &se) {
		return se
	}
	return nil
}

// describeFailure renders an operation error for humans: it says why the
// command stopped early and drops the package prefix some errors carry.
func (a *app) describeFailure(err error) string {
	var be *bootstrapError
	if errors.As(err, &be) {
		return be.Error()
	}
	msg := unreachableText(err)
	if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return msg
	}
	// The client may have been retrying connections until time ran out:
	// say why they failed.
	if f := a.dials.failures(); f != "" && !strings.Contains(msg, "no broker reachable") {
		msg += "; last connection errors: " + f
	}
	switch {
	case a.interrupted() != nil:
		// Saying it was interrupted says all the context error does.
		how := "interrupted"
		if a.interrupted().sig == syscall.SIGTERM {
			how = "terminated"
		}
		return how + ": " + strings.TrimSuffix(msg, ": "+context.Canceled.Error())
	case a.timedOut():
		// The client's retry budget is --timeout too: when it ran out a
		// hair before the command's clock (a busy machine), the error
		// also says "gave up after RetryTimeout", which says it twice.
		msg = strings.Replace(msg, fmt.Sprintf("gave up after RetryTimeout %v: ", a.timeout), "", 1)
		return fmt.Sprintf("timed out after %v (--timeout): %s", a.timeout, msg)
	}
	return msg
}

// timedOut reports whether the --timeout deadline has passed. (The
// context's own error may say "canceled" instead: the client's retry
// budget can expire a hair earlier, and run cancels the context before
// reporting.)
func (a *app) timedOut() bool {
	if a.ctx == nil {
		return false
	}
	dl, ok := a.ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// cleanList trims the items of a comma-separated list and drops empty
// ones.
func cleanList(items []string) []string {
	var out []string
	for _, it := range items {
		for _, s := range strings.Split(it, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// groupCmd returns a command that only groups subcommands: bare, it shows
// its help; with an unknown subcommand it is a usage error (cobra would
// otherwise print the help and succeed).
func groupCmd(c *cobra.Command) *cobra.Command {
	c.Args = cobra.ArbitraryArgs
	c.SuggestionsMinimumDistance = 2
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf(" (did you mean %q?)", s[0])
		}
		return usageErrorf("%s", msg)
	}
	return c
}
