package main

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/riffle-go/riffle/rifftest"
	"github.com/spf13/cobra"
)

type result struct {
	code           int
	stdout, stderr string
}

// riffle runs the command line in-process, as main would.
func runRiffle(t *testing.T, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	r := result{code, out.String(), errOut.String()}
	t.Logf("riffle %s\nexit %d\n--- stdout:\n%s--- stderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	return r
}

// startCluster starts the cluster a test talks to, like the embedded one:
// 3 brokers and a topic "demo" of 6 partitions.
func startCluster(t *testing.T, opts ...rifftest.Option) *rifftest.Cluster {
	t.Helper()
	return rifftest.New(t, append([]rifftest.Option{rifftest.Brokers(3), rifftest.Topic("demo", 6)}, opts...)...)
}

// on runs riffle against c.
func on(t *testing.T, c *rifftest.Cluster, args ...string) result {
	t.Helper()
	return runRiffle(t, append([]string{"--brokers", strings.Join(c.Addrs(), ","), "--timeout", "10s"}, args...)...)
}

func (r result) wantCode(t *testing.T, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

// tableRows returns the fields of the rows under the table header whose
// first column is first, up to the next blank line.
func tableRows(t *testing.T, out, first string) [][]string {
	t.Helper()
	var rows [][]string
	in := false
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case !in && len(f) > 0 && f[0] == first:
			in = true
		case in && len(f) == 0:
			return rows
		case in:
			rows = append(rows, f)
		}
	}
	if !in {
		t.Fatalf("no table with header %q in:\n%s", first, out)
	}
	return rows
}

func findRow(rows [][]string, first string) []string {
	for _, r := range rows {
		if r[0] == first {
			return r
		}
	}
	return nil
}

func TestTopicLifecycle(t *testing.T) {
	t.Parallel()
	c := startCluster(t)

	r := on(t, c, "topic", "create", "orders", "-p", "4", "-r", "2", "--config", "cleanup.policy=compact", "-c", "retention.ms=3600000")
	r.wantCode(t, 0)
	if r.stdout != "created topic \"orders\"\n" || r.stderr != "" {
		t.Fatalf("create: stdout %q, stderr %q", r.stdout, r.stderr)
	}

	r = on(t, c, "topic", "list")
	r.wantCode(t, 0)
	rows := tableRows(t, r.stdout, "NAME")
	if got, want := findRow(rows, "orders"), []string{"orders", "4", "2", "no"}; !slices.Equal(got, want) {
		t.Errorf("list row for orders = %q, want %q", got, want)
	}
	if got, want := findRow(rows, "demo"), []string{"demo", "6", "3", "no"}; !slices.Equal(got, want) {
		t.Errorf("list row for demo = %q, want %q", got, want)
	}

	r = on(t, c, "topic", "describe", "orders")
	r.wantCode(t, 0)
	parts := tableRows(t, r.stdout, "PARTITION")
	if len(parts) != 4 {
		t.Fatalf("describe shows %d partitions, want 4", len(parts))
	}
	for i, p := range parts {
		// PARTITION LEADER EPOCH REPLICAS ISR OFFLINE EARLIEST LATEST
		if len(p) != 8 || p[0] != strconv.Itoa(i) || len(strings.Split(p[3], ",")) != 2 || p[4] != p[3] || p[5] != "-" || p[6] != "0" || p[7] != "0" {
			t.Errorf("partition row %d = %q", i, p)
		}
		if !strings.Contains(p[3], p[1]) {
			t.Errorf("partition %d: leader %s not among replicas %s", i, p[1], p[3])
		}
	}
	for _, want := range []string{"Topic:        orders", "Replication:  2", "cleanup.policy", "= compact", "retention.ms", "= 3600000"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("describe output lacks %q", want)
		}
	}

	r = on(t, c, "topic", "delete", "orders")
	r.wantCode(t, 0)
	if r.stdout != "deleted topic \"orders\"\n" {
		t.Fatalf("delete: stdout %q", r.stdout)
	}
	r = on(t, c, "topic", "list")
	r.wantCode(t, 0)
	if findRow(tableRows(t, r.stdout, "NAME"), "orders") != nil {
		t.Errorf("orders still listed after delete")
	}
}

func TestTopicCreateExisting(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	r := on(t, c, "topic", "create", "fresh", "demo", "-p", "2")
	r.wantCode(t, 1)
	if r.stdout != "created topic \"fresh\"\n" {
		t.Errorf("stdout = %q, want the one created topic", r.stdout)
	}
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], `riffle: topic "demo": TOPIC_ALREADY_EXISTS`) {
		t.Errorf("stderr = %q, want one TOPIC_ALREADY_EXISTS line for demo", r.stderr)
	}
}

func TestTopicDeleteUnknown(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	r := on(t, c, "topic", "delete", "nope", "demo")
	r.wantCode(t, 1)
	if r.stdout != "deleted topic \"demo\"\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
	if !strings.HasPrefix(r.stderr, `riffle: topic "nope": UNKNOWN_TOPIC_OR_PARTITION`) || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("stderr = %q, want one UNKNOWN_TOPIC_OR_PARTITION line for nope", r.stderr)
	}
}

func TestTopicDescribeUnknown(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	r := on(t, c, "topic", "describe", "demo", "nope")
	r.wantCode(t, 1)
	if n := len(tableRows(t, r.stdout, "PARTITION")); n != 6 {
		t.Errorf("demo described with %d partitions, want 6", n)
	}
	if strings.Contains(r.stdout, "nope") {
		t.Errorf("stdout mentions the unknown topic")
	}
	if !strings.HasPrefix(r.stderr, `riffle: topic "nope": UNKNOWN_TOPIC_OR_PARTITION`) || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("stderr = %q", r.stderr)
	}
}

func TestCluster(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	r := on(t, c, "cluster")
	r.wantCode(t, 0)
	rows := tableRows(t, r.stdout, "ID")
	if len(rows) != 3 {
		t.Fatalf("%d broker rows, want 3", len(rows))
	}
	controllers := 0
	for i, addr := range c.Addrs() {
		host, port, _ := net.SplitHostPort(addr)
		row := findRow(rows, strconv.Itoa(i))
		if row == nil || row[1] != host || row[2] != port {
			t.Errorf("broker %d row = %q, want %s %s", i, row, host, port)
		}
		if len(row) == 5 && row[4] == "*" {
			controllers++
		}
	}
	if controllers != 1 {
		t.Errorf("%d brokers marked as controller, want 1", controllers)
	}
	if !strings.Contains(r.stdout, "Cluster ID:  kfake\n") {
		t.Errorf("no cluster id in output")
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.HasSuffix(line, " ") {
			t.Errorf("trailing space in %q", line)
		}
	}
}

func TestJSONOutput(t *testing.T) {
	t.Parallel()
	c := startCluster(t)

	var cl clusterJSON
	decode(t, on(t, c, "cluster", "-o", "json"), &cl)
	if len(cl.Brokers) != 3 || cl.ClusterID == "" || cl.Controller < 0 {
		t.Errorf("cluster JSON = %+v", cl)
	}
	for i, addr := range c.Addrs() {
		if i < len(cl.Brokers) && net.JoinHostPort(cl.Brokers[i].Host, strconv.Itoa(int(cl.Brokers[i].Port))) != addr {
			t.Errorf("broker %d = %+v, want %s", i, cl.Brokers[i], addr)
		}
	}

	var list []map[string]any
	decode(t, on(t, c, "topic", "list", "--output", "json"), &list)
	if len(list) != 1 || list[0]["name"] != "demo" || list[0]["partitions"] != 6.0 || list[0]["replication_factor"] != 3.0 || list[0]["internal"] != false {
		t.Errorf("topic list JSON = %v", list)
	}

	var desc []topicDescription
	decode(t, on(t, c, "topic", "describe", "demo", "-o", "json"), &desc)
	if len(desc) != 1 || desc[0].Name != "demo" || len(desc[0].Partitions) != 6 || desc[0].ReplicationFactor != 3 || desc[0].Error != "" {
		t.Fatalf("topic describe JSON = %+v", desc)
	}
	for _, p := range desc[0].Partitions {
		if p.EarliestOffset == nil || *p.EarliestOffset != 0 || p.LatestOffset == nil || *p.LatestOffset != 0 || len(p.Replicas) != 3 || len(p.ISR) != 3 || p.Offline == nil {
			t.Errorf("partition JSON = %+v", p)
		}
	}
}

func decode(t *testing.T, r result, v any) {
	t.Helper()
	r.wantCode(t, 0)
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("stdout is not the expected JSON: %v\n%s", err, r.stdout)
	}
	if dec.More() {
		t.Fatalf("trailing data after the JSON")
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	// Nothing listens here; a usage error must be found before dialing.
	dead := "127.0.0.1:1"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--bogus", "cluster"}, "unknown flag: --bogus"},
		{[]string{"topic", "list", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"frob"}, `unknown command "frob" for "riffle"`},
		{[]string{"topic", "lst"}, `unknown command "lst" for "riffle topic" (did you mean "list"?)`},
		{[]string{"topic", "list", "extra"}, `unknown command "extra"`},
		{[]string{"topic", "create"}, "requires at least 1 arg"},
		{[]string{"topic", "describe"}, "requires at least 1 arg"},
		{[]string{"topic", "delete"}, "requires at least 1 arg"},
		{[]string{"topic", "create", "x", "x"}, `topic "x" given twice`},
		{[]string{"topic", "create", "x", "-p", "0"}, "--partitions must be positive"},
		{[]string{"topic", "create", "x", "-r", "-2"}, "--replication must be positive"},
		{[]string{"topic", "create", "x", "-r", "40000"}, "invalid argument"},
		{[]string{"topic", "create", "x", "--config", "novalue"}, `--config "novalue": want key=value`},
		{[]string{"topic", "create", "x", "--config", "a=1", "--config", "a=2"}, "--config a given twice"},
		{[]string{"cluster", "-o", "yaml"}, `invalid argument "yaml" for "-o, --output" flag: want table or json`},
		{[]string{"demo", "-p", "0"}, "--partitions must be positive"},
		{[]string{"--timeout", "0s", "cluster"}, "--timeout must be positive"},
		{[]string{"--timeout", "soon", "cluster"}, `invalid argument "soon"`},
		{[]string{"--sasl-user", "u", "cluster"}, "--sasl-user needs --sasl-mechanism"},
		{[]string{"--sasl-mechanism", "GSSAPI", "--sasl-user", "u", "cluster"}, "want one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"},
		{[]string{"--sasl-mechanism", "plain", "--sasl-user", "u", "cluster"}, "needs a password"},
		{[]string{"--tls-cert", "c.pem", "cluster"}, "--tls-cert and --tls-key go together"},
	} {
		r := runRiffle(t, append([]string{"--brokers", dead, "--timeout", "5s"}, tc.args...)...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, "riffle: ") || !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, "--help' for usage.") || r.stdout != "" {
			t.Errorf("riffle %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, r.code, r.stdout, r.stderr, tc.want)
		}
	}

	// Bad broker lists are usage errors too, and start no cluster.
	for _, args := range [][]string{
		{"--brokers", "a:b:c", "cluster"},
		{"--brokers", "", "cluster"},
		{"--brokers", ",", "cluster"},
		{"--tls-insecure", "cluster"}, // needs --brokers
	} {
		r := runRiffle(t, args...)
		if r.code != 2 || strings.Contains(r.stderr, "started an embedded") || strings.Contains(r.stderr, "riffle: riffle:") {
			t.Errorf("riffle %q: exit %d, stderr %q; want exit 2", args, r.code, r.stderr)
		}
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	r := runRiffle(t, "--help")
	r.wantCode(t, 0)
	for _, want := range []string{"Usage:", "cluster", "topic", "demo", "--brokers", "RIFFLE_BROKERS", "Exit status"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	if r.stderr != "" {
		t.Errorf("--help wrote to stderr (started a cluster?): %q", r.stderr)
	}

	// A bare group shows its subcommands and succeeds, like git and docker.
	r = runRiffle(t, "topic")
	r.wantCode(t, 0)
	for _, want := range []string{"list", "describe", "create", "delete"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("riffle topic lacks %q", want)
		}
	}

	// Every command documents itself, with examples.
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Short == "" || c.Long == "" || c.Example == "" {
			t.Errorf("%q lacks a Short, Long or Example", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			if sub.Name() != "help" && sub.Name() != "completion" {
				walk(sub)
			}
		}
	}
	walk((&app{}).rootCmd())
}

// The demo's no-flags path: start the embedded cluster, run every step,
// close the cluster.
func TestDemoEmbedded(t *testing.T) {
	t.Setenv(envBrokers, "")
	r := runRiffle(t, "demo")
	r.wantCode(t, 0)

	m := regexp.MustCompile(`^riffle: no --brokers given; started an embedded 3-broker cluster at (127\.0\.0\.1:\d+(?:,127\.0\.0\.1:\d+){2})\n$`).FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("stderr = %q, want only the embedded cluster notice", r.stderr)
	}
	steps := demoSteps()
	for i := range steps {
		if !strings.Contains(r.stdout, "["+strconv.Itoa(i+1)+"/"+strconv.Itoa(len(steps))+"] ") {
			t.Errorf("step %d missing from the output", i+1)
		}
	}
	for _, want := range []string{`created topic "riffle-demo"`, "Replication:  3", "Demo complete: "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	topics := tableRows(t, r.stdout, "NAME")
	if findRow(topics, "demo") == nil || findRow(topics, "riffle-demo") == nil {
		t.Errorf("topic list = %q, want demo and riffle-demo", topics)
	}
	if n := len(tableRows(t, r.stdout, "PARTITION")); n != 6 {
		t.Errorf("described %d partitions, want 6", n)
	}

	// The embedded cluster is gone once run returns.
	for _, addr := range strings.Split(m[1], ",") {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			t.Errorf("embedded broker %s still accepts connections", addr)
		}
	}
}

// Against an existing cluster, the demo reuses its topic when run twice.
func TestDemoTwice(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	// A generous timeout: the demo's group step needs a rebalance or two,
	// and CI runs other packages' tests beside this one on 2 cores.
	on(t, c, "--timeout", "60s", "demo", "--topic", "tour", "-p", "2").wantCode(t, 0)
	r := on(t, c, "--timeout", "60s", "demo", "--topic", "tour", "-p", "2")
	r.wantCode(t, 0)
	if !strings.Contains(r.stdout, `topic "tour" already exists; using it`) || r.stderr != "" {
		t.Errorf("second demo: stdout %q, stderr %q", r.stdout, r.stderr)
	}
}

func TestBrokersFromEnv(t *testing.T) {
	c := startCluster(t)
	t.Setenv(envBrokers, " "+strings.Join(c.Addrs(), " , ")+" ")
	r := runRiffle(t, "topic", "list")
	r.wantCode(t, 0)
	if r.stderr != "" {
		t.Errorf("stderr = %q (embedded cluster started?)", r.stderr)
	}
	if findRow(tableRows(t, r.stdout, "NAME"), "demo") == nil {
		t.Errorf("demo not listed")
	}
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	addr := closedPort(t)
	r := runRiffle(t, "--brokers", addr, "--timeout", "1s", "cluster")
	r.wantCode(t, 1)
	// The error says which address failed and why, once.
	if want := "riffle: no broker reachable: " + addr + ": connection refused\n"; r.stderr != want {
		t.Errorf("stderr = %q, want %q", r.stderr, want)
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	r := runRiffle(t, "--brokers", c.Addrs()[0], "--timeout", "1ns", "topic", "describe", "demo")
	r.wantCode(t, 1)
	if !strings.HasPrefix(r.stderr, "riffle: timed out after 1ns") {
		t.Errorf("stderr = %q", r.stderr)
	}
}

func TestSASL(t *testing.T) {
	const pass = "s3cret-pw"
	c := startCluster(t, rifftest.SASL("SCRAM-SHA-256", "alice", pass))

	t.Setenv(envSASLPassword, pass)
	r := on(t, c, "-v", "--sasl-mechanism", "scram-sha-256", "--sasl-user", "alice", "cluster")
	r.wantCode(t, 0)
	if strings.Contains(r.stdout+r.stderr, pass) {
		t.Errorf("the password was printed")
	}
	if !strings.Contains(r.stderr, "level=DEBUG") || !strings.Contains(r.stderr, "SCRAM-SHA-256") {
		t.Errorf("-v logged no debug lines naming the mechanism")
	}

	const wrong = "wrong-pw-123"
	r = on(t, c, "-v", "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-user", "alice", "--sasl-password", wrong, "cluster")
	r.wantCode(t, 1)
	if strings.Contains(r.stdout+r.stderr, wrong) {
		t.Errorf("the password was printed")
	}
	if !strings.Contains(strings.ToLower(r.stderr), "auth") {
		t.Errorf("stderr does not say authentication failed")
	}
}

func TestTLS(t *testing.T) {
	t.Parallel()
	c := startCluster(t, rifftest.SelfSignedTLS())
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, c.CACertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	on(t, c, "--tls-ca", ca, "cluster").wantCode(t, 0)

	// Without the CA the brokers' certificates are not trusted. The
	// client retries until --timeout; the error says the TLS stage
	// failed (normally with the certificate error itself, but on a
	// starved machine the deadline may cut the handshake short first).
	r := runRiffle(t, "--brokers", c.Addrs()[0], "--tls", "--timeout", "3s", "cluster")
	r.wantCode(t, 1)
	if !strings.Contains(r.stderr, "certificate") && !strings.Contains(r.stderr, c.Addrs()[0]+": tls (") {
		t.Errorf("stderr = %q, want a TLS certificate error", r.stderr)
	}

	r = runRiffle(t, "--brokers", c.Addrs()[0], "--tls-ca", filepath.Join(t.TempDir(), "missing.pem"), "cluster")
	r.wantCode(t, 1)
	if !strings.HasPrefix(r.stderr, "riffle: --tls-ca: open ") {
		t.Errorf("stderr = %q", r.stderr)
	}
}

// The embedded cluster follows the security flags, so TLS and SASL work
// with no cluster around.
func TestEmbeddedSecure(t *testing.T) {
	t.Setenv(envSASLPassword, "pw")
	r := runRiffle(t, "--tls", "--sasl-mechanism", "PLAIN", "--sasl-user", "bob", "topic", "list")
	r.wantCode(t, 0)
	if !strings.Contains(r.stderr, `embedded 3-broker cluster with TLS and SASL/PLAIN user "bob" at `) {
		t.Errorf("stderr = %q", r.stderr)
	}
	if findRow(tableRows(t, r.stdout, "NAME"), "demo") == nil {
		t.Errorf("demo not listed")
	}
}

func TestIndentWriter(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	w := newIndentWriter(&b, "  ")
	for _, s := range []string{"a\nb", "c\n\nd\n", "e"} {
		w.Write([]byte(s))
	}
	if got, want := b.String(), "  a\n  bc\n\n  d\n  e"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
