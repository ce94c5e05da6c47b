// Command bench runs side-by-side comparisons of Riffle against peer Kafka
// clients for Go (franz-go, sarama, kafka-go and, where cgo is available,
// confluent-kafka-go) against in-process brokers from rifftest.
//
// Usage:
//
//	go run . <subcommand> [flags]
//	go run . list
//
// Each subcommand lives in a file of its own and registers itself with
// register from an init function, so adding one is adding one file. Each
// prints a human-readable table and ends with one summary line.
//
// This is the only module of the repository allowed to import peer clients;
// the root module must never depend on it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"
)

// command is one subcommand: run gets the arguments after its name.
type command struct {
	summary string
	run     func(ctx context.Context, args []string) error
	hidden  bool // internal (a helper process); not listed
}

// commands maps a subcommand name to its implementation. Files add to it
// with register from their init functions.
var commands = map[string]command{}

// register adds a subcommand. It panics on a duplicate name, which can
// only be a programming error.
func register(name, summary string, run func(ctx context.Context, args []string) error) {
	if _, dup := commands[name]; dup {
		panic("bench: subcommand " + name + " registered twice")
	}
	commands[name] = command{summary: summary, run: run}
}

// registerHidden adds a subcommand that list and usage do not show: a
// helper the benchmarks run as a child process of this same binary.
func registerHidden(name string, run func(ctx context.Context, args []string) error) {
	register(name, "", run)
	c := commands[name]
	c.hidden = true
	commands[name] = c
}

func init() {
	register("list", "list the subcommands", func(context.Context, []string) error {
		listCommands(os.Stdout)
		return nil
	})
}

func listCommands(w *os.File) {
	names := make([]string, 0, len(commands))
	for n, c := range commands {
		if !c.hidden {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-14s %s\n", n, commands[n].summary)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: go run . <subcommand> [flags]   (go run . <subcommand> -h for its flags)")
	fmt.Fprintln(os.Stderr, "subcommands:")
	listCommands(os.Stderr)
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	name := os.Args[1]
	if name == "-h" || name == "-help" || name == "--help" || name == "help" {
		usage()
		return
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "bench: unknown subcommand %q\n", name)
		usage()
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cmd.run(ctx, os.Args[2:])
	stop()
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
	default:
		fmt.Fprintf(os.Stderr, "bench %s: %v\n", name, err)
		os.Exit(1)
	}
}
