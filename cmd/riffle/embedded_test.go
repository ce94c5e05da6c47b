package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// lookOnly are the commands that run against an embedded cluster when no
// brokers are given: they only look. Every command is either here or in
// needsCluster, so a new one has to be placed.
var lookOnly = []string{
	"cluster", "demo", "serve",
	"topic list", "topic describe",
	"group list", "group describe", "group lag",
	"share list", "share describe",
	"txn list", "txn describe", "txn producers",
	"acl list", "config describe", "user scram list",
}

// Without --brokers or RIFFLE_BROKERS, the commands that write or read
// records refuse, naming the ways to give a cluster, and start none.
func TestNeedsCluster(t *testing.T) {
	t.Parallel()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		subs := 0
		for _, sub := range c.Commands() {
			if sub.Name() != "help" && sub.Name() != "completion" {
				subs++
				walk(sub)
			}
		}
		if subs > 0 || !c.HasParent() {
			return
		}
		path := strings.TrimPrefix(c.CommandPath(), "riffle ")
		switch in, look := slices.Contains(needsCluster, path), slices.Contains(lookOnly, path); {
		case in && look:
			t.Errorf("%q is in needsCluster and lookOnly", path)
		case !in && !look:
			t.Errorf("%q is in neither needsCluster nor lookOnly: does it need a real cluster?", path)
		case in:
			args := strings.Fields(path)
			if c.Args == nil || c.Args(c, []string{"x"}) == nil {
				args = append(args, "x") // arguments are checked first
			}
			r := runRiffle(t, args...)
			if r.code != 2 || strings.Contains(r.stderr, "started an embedded") || r.stdout != "" {
				t.Errorf("riffle %s without brokers: exit %d, stdout %q, stderr %q; want a usage error", path, r.code, r.stdout, r.stderr)
			}
			for _, want := range []string{"riffle " + path + " needs a cluster", "--brokers", envBrokers, `"riffle serve"`} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("riffle %s without brokers: stderr %q lacks %q", path, r.stderr, want)
				}
			}
		}
	}
	walk((&app{}).rootCmd())

	// kcat's modes too; with a broker the check passes (and the usage
	// error is the command's own).
	for _, args := range [][]string{{"-P", "-t", "x"}, {"-C", "-t", "x", "-e"}} {
		if r := runRiffle(t, args...); r.code != 2 || !strings.Contains(r.stderr, "needs a cluster") {
			t.Errorf("riffle %q: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	if r := runRiffle(t, "-X", "bootstrap.servers=127.0.0.1:1", "produce"); r.code != 2 || !strings.Contains(r.stderr, "produce needs a topic") {
		t.Errorf("riffle produce with -X bootstrap.servers: exit %d, stderr %q", r.code, r.stderr)
	}
}
