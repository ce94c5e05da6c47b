package main

// Tests for a new user's first hour with the CLI: unreachable brokers
// reported at once, "riffle serve" and the README walkthrough, kcat's
// flags, Ctrl-C, help and flag errors.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/riffle-go/riffle/rifftest"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// closedPort returns a loopback address nothing listens on: connecting
// is refused at once.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// When every seed refuses, every command fails within about a second
// (not after --timeout, 30 s by default) with one line naming each
// address and the cause once.
func TestUnreachableFailsFast(t *testing.T) {
	t.Parallel()
	a1, a2 := closedPort(t), closedPort(t)
	if a2 < a1 {
		a1, a2 = a2, a1
	}
	in := filepath.Join(t.TempDir(), "in")
	os.WriteFile(in, []byte("one\ntwo\n"), 0o600)
	want := "riffle: no broker reachable: " + a1 + ", " + a2 + ": connection refused\n"
	for _, args := range [][]string{
		{"cluster"},
		{"topic", "list"},
		{"topic", "describe", "demo"},
		{"produce", "demo", "-f", in},
		{"produce", "demo", "--count", "10"},
		{"consume", "demo"},
		{"group", "list"},
		{"txn", "list"},
		{"txn", "describe", "tx"},
		{"txn", "producers", "demo"},
	} {
		start := time.Now()
		r := runRiffle(t, append([]string{"--brokers", a1 + "," + a2}, args...)...)
		took := time.Since(start)
		if r.code != 1 || r.stderr != want || r.stdout != "" {
			t.Errorf("riffle %q: exit %d, stdout %q, stderr %q; want exit 1 and %q", args, r.code, r.stdout, r.stderr, want)
		}
		// Fast is well under the 30 s --timeout it would otherwise
		// take; 15 s leaves a loaded machine room for the dials.
		if took > 15*time.Second {
			t.Errorf("riffle %q took %v to fail", args, took)
		}
	}
}

// A host that does not resolve fails as fast, and says so.
func TestUnresolvableFailsFast(t *testing.T) {
	t.Parallel()
	const host = "no-such-host.invalid"
	var dnsErr *net.DNSError
	if _, err := net.LookupHost(host); !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Skipf("this machine's resolver does not say %s does not exist: %v", host, err)
	}
	refused := closedPort(t)
	start := time.Now()
	r := runRiffle(t, "--brokers", host+","+refused, "topic", "list")
	r.wantCode(t, 1)
	want := "riffle: no broker reachable: " + refused + ": connection refused; " + host + ":9092: no such host\n"
	if r.stderr != want {
		t.Errorf("stderr = %q, want %q", r.stderr, want)
	}
	if took := time.Since(start); took > 15*time.Second { // see TestUnreachableFailsFast
		t.Errorf("took %v", took)
	}
}

// An invalid broker address is a usage error (exit 2) for every command.
func TestInvalidBrokerIsUsageError(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"cluster"}, {"produce", "t", "--count", "1"}, {"consume", "t"}, {"group", "list"}, {"demo"},
	} {
		r := runRiffle(t, append([]string{"--brokers", "localhost:99999"}, args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, `seed "localhost:99999": port "99999" is not a number in 1..65535`) {
			t.Errorf("riffle %q: exit %d, stderr %q; want exit 2", args, r.code, r.stderr)
		}
	}
}

// slowProxy forwards connections to target after holding each one for
// delay without a byte: a live broker that is slow to answer.
func slowProxy(t *testing.T, target string, delay time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			track(c)
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(delay)
				up, err := net.Dial("tcp", target)
				if err != nil {
					c.Close()
					return
				}
				track(up)
				wg.Add(1)
				go func() {
					defer wg.Done()
					io.Copy(up, c)
					up.Close()
				}()
				io.Copy(c, up)
				c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// A live cluster slower to answer than the bootstrap check waits, or with
// some seeds refusing, still works with the normal timeouts.
func TestSlowClusterStillWorks(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	slow := slowProxy(t, c.Addrs()[0], 2*bootstrapWait)
	r := runRiffle(t, "--brokers", slow, "cluster")
	r.wantCode(t, 0)
	if rows := tableRows(t, r.stdout, "ID"); len(rows) != 3 {
		t.Errorf("%d broker rows, want 3", len(rows))
	}
	r = runRiffle(t, "--brokers", closedPort(t)+","+c.Addrs()[1], "topic", "list")
	r.wantCode(t, 0)
	if r.stderr != "" {
		t.Errorf("stderr = %q", r.stderr)
	}
}

// syncBuffer is a bytes.Buffer safe for a command writing while the test
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// background is riffle running in-process until a signal stops it.
type background struct {
	args        []string
	out, errOut *syncBuffer
	cancel      context.CancelCauseFunc
	code        chan int
}

func startRiffle(t *testing.T, args ...string) *background {
	t.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	b := &background{args: args, out: &syncBuffer{}, errOut: &syncBuffer{}, cancel: cancel, code: make(chan int, 1)}
	go func() { b.code <- runIn(ctx, args, b.out, b.errOut) }()
	t.Cleanup(func() { b.stop(t, os.Interrupt) })
	return b
}

// waitOut waits until stdout matches re and returns the match.
func (b *background) waitOut(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	return b.wait(t, "stdout", b.out, re)
}

// waitErr waits until stderr matches re and returns the match.
func (b *background) waitErr(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	return b.wait(t, "stderr", b.errOut, re)
}

func (b *background) wait(t *testing.T, name string, w *syncBuffer, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second) // a hang guard for a loaded machine
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(w.String()); m != nil {
			return m
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("riffle %q: no %v in %s after 60s; stdout %q, stderr %q", b.args, re, name, b.out.String(), b.errOut.String())
	return nil
}

// stop sends sig (as the signal handler of run would) and returns how
// riffle exited; later calls return the same.
func (b *background) stop(t *testing.T, sig os.Signal) result {
	t.Helper()
	b.cancel(&signalError{sig})
	select {
	case code := <-b.code:
		b.code <- code
		r := result{code, b.out.String(), b.errOut.String()}
		t.Logf("riffle %s (stopped by %v)\nexit %d\n--- stdout:\n%s--- stderr:\n%s", strings.Join(b.args, " "), sig, r.code, r.stdout, r.stderr)
		return r
	case <-time.After(30 * time.Second):
		t.Fatalf("riffle %q did not stop within 30s of %v", b.args, sig)
		return result{}
	}
}

// serve keeps one cluster for several commands, which see each other's
// topics; Ctrl-C stops it (status 130) and the brokers with it.
func TestServe(t *testing.T) {
	t.Parallel()
	b := startRiffle(t, "serve")
	m := b.waitOut(t, regexp.MustCompile(`^export RIFFLE_BROKERS=(127\.0\.0\.1:\d+(?:,127\.0\.0\.1:\d+){2})\n$`))
	brokers := m[1]
	if !strings.Contains(b.errOut.String(), "until Ctrl-C") {
		t.Errorf("stderr = %q", b.errOut.String())
	}
	at := func(args ...string) result {
		return runRiffle(t, append([]string{"--brokers", brokers}, args...)...)
	}
	at("topic", "create", "events", "-p", "2").wantCode(t, 0)
	r := at("topic", "describe", "events")
	r.wantCode(t, 0)
	if n := len(tableRows(t, r.stdout, "PARTITION")); n != 2 {
		t.Errorf("events has %d partitions, want 2", n)
	}

	r = b.stop(t, os.Interrupt)
	r.wantCode(t, 130)
	if !strings.HasSuffix(r.stderr, "riffle: interrupted: embedded cluster stopped\n") {
		t.Errorf("stderr = %q", r.stderr)
	}
	for _, addr := range strings.Split(brokers, ",") {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			t.Errorf("broker %s still accepts connections", addr)
		}
	}

	// With --timeout given, serve stops then, normally.
	r = runRiffle(t, "serve", "--timeout", "200ms")
	r.wantCode(t, 0)
	if !strings.HasPrefix(r.stdout, "export RIFFLE_BROKERS=127.0.0.1:") || !strings.Contains(r.stderr, "riffle: embedded cluster stopped (--timeout 200ms)") {
		t.Errorf("stdout %q, stderr %q", r.stdout, r.stderr)
	}
	for _, args := range [][]string{
		{"--brokers", "localhost:9092", "serve"},
		{"serve", "--port", "70000"},
		{"serve", "extra"},
	} {
		if r := runRiffle(t, args...); r.code != 2 {
			t.Errorf("riffle %q: exit %d, want 2", args, r.code)
		}
	}
}

// shellWords splits a README command line: words, 'single-quoted' and
// "double-quoted" strings, and | .
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; c {
		case ' ', '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case '\'', '"':
			j := strings.IndexByte(line[i+1:], c)
			if j < 0 {
				t.Fatalf("unbalanced quote in %q", line)
			}
			w.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// The README's CLI walkthrough runs as written: serve in one terminal,
// the export line, then every command against the served cluster.
func TestREADMEWalkthrough(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	i := strings.Index(section, "\n## The CLI\n")
	if i < 0 {
		t.Fatal("README has no CLI section")
	}
	section = section[i+1:]
	if j := strings.Index(section, "\n## "); j >= 0 {
		section = section[:j]
	}
	var lines []string
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1) {
		for _, l := range strings.Split(block[1], "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				lines = append(lines, l)
			}
		}
	}
	if len(lines) < 4 || lines[0] != "go run ./cmd/riffle serve" || !strings.HasPrefix(lines[1], "export RIFFLE_BROKERS=") {
		t.Fatalf("the walkthrough should start with serve and the export line: %q", lines)
	}

	serve := startRiffle(t, "serve")
	m := serve.waitOut(t, regexp.MustCompile(`(?m)^export RIFFLE_BROKERS=(\S+)$`))
	t.Setenv(envBrokers, m[1])
	const cmd = "go run ./cmd/riffle "
	var outs []string
	for _, l := range lines[2:] {
		stdin := ""
		if pre, rest, ok := strings.Cut(l, " | "); ok {
			w := shellWords(t, pre)
			if len(w) != 2 || w[0] != "printf" {
				t.Fatalf("cannot run %q", l)
			}
			stdin = strings.NewReplacer(`\n`, "\n", `\t`, "\t").Replace(w[1])
			l = rest
		}
		if !strings.HasPrefix(l, cmd) {
			t.Fatalf("cannot run %q", l)
		}
		if stdin != "" {
			withStdin(t, stdin)
		}
		r := runRiffle(t, shellWords(t, strings.TrimPrefix(l, cmd))...)
		if r.code != 0 || strings.Contains(r.stderr, "started an embedded") {
			t.Fatalf("%s: exit %d, stderr %q; want 0, against the served cluster", l, r.code, r.stderr)
		}
		outs = append(outs, r.stdout)
	}
	all := strings.Join(outs, "")
	for _, want := range []string{"Topic:        events", "alice=hello source=readme", "bob=world"} {
		if !strings.Contains(all, want) {
			t.Errorf("the walkthrough's output lacks %q", want)
		}
	}
	serve.stop(t, os.Interrupt).wantCode(t, 130)
}

// kcat's flags: -K and -H on produce; -o (with -N), -c, -e, -K, -f, -p on
// consume; a null key and an empty key print differently in kv.
func TestConsumeKcatFlags(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	in := filepath.Join(t.TempDir(), "in")
	os.WriteFile(in, []byte("alice:hello\nno key\n:empty key\nbob:\nalice:again\n"), 0o600)
	r := on(t, c, "produce", "demo", "-f", in, "-K", ":", "-H", "source=test", "-H", "v=", "-p", "2")
	r.wantCode(t, 0)

	// -K selects kv; null key: nothing before the separator, empty: "".
	r = on(t, c, "consume", "demo", "-e", "-K", "=")
	r.wantCode(t, 0)
	if want := "alice=hello\n=no key\n\"\"=empty key\nbob=\nalice=again\n"; r.stdout != want {
		t.Errorf("-e -K = printed %q, want %q", r.stdout, want)
	}
	// A kcat format string.
	r = on(t, c, "consume", "demo", "-p", "2", "-e", "-f", `%t %p/%o %k(%K)=%s(%S) [%h] %%\n`)
	r.wantCode(t, 0)
	want := "demo 2/0 alice(5)=hello(5) [source=test,v=] %\n" +
		"demo 2/1 (-1)=no key(6) [source=test,v=] %\n" +
		"demo 2/2 (0)=empty key(9) [source=test,v=] %\n" +
		"demo 2/3 bob(3)=(0) [source=test,v=] %\n" +
		"demo 2/4 alice(5)=again(5) [source=test,v=] %\n"
	if r.stdout != want {
		t.Errorf("-f printed %q, want %q", r.stdout, want)
	}
	// -o -2: the last two records of each partition; -c: a count.
	r = on(t, c, "consume", "demo", "-o", "-2", "-e")
	r.wantCode(t, 0)
	if r.stdout != "\nagain\n" {
		t.Errorf("-o -2 -e printed %q, want the last two values", r.stdout)
	}
	r = on(t, c, "consume", "demo", "--from", "-100", "-c", "3")
	r.wantCode(t, 0)
	if r.stdout != "hello\nno key\nempty key\n" {
		t.Errorf("--from -100 -c 3 printed %q", r.stdout)
	}
	r = on(t, c, "consume", "demo", "-o", "beginning", "-c", "1", "-f", "json")
	r.wantCode(t, 0)
	if recs := consumedJSON(t, r.stdout); len(recs) != 1 || len(recs[0].Headers) != 2 || recs[0].Headers[0].Key != "source" || *recs[0].Headers[0].Value != "test" {
		t.Errorf("json record = %+v", recs)
	}
	r = on(t, c, "consume", "demo", "-G", "kc", "-c", "5")
	r.wantCode(t, 0)
	if strings.Count(r.stdout, "\n") != 5 || !strings.Contains(r.stderr, `group "kc" assigned`) {
		t.Errorf("-G: stdout %q", r.stdout)
	}
}

// progressLine is the start of produce's and consume's progress line, on
// stderr every 2 s once the command runs.
var progressLine = regexp.MustCompile(`(?m)^\d+ records, `)

// Ctrl-C ends produce and consume the same way: the summary, one line,
// status 130 (143 for SIGTERM).
func TestInterrupt(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	brokers := strings.Join(c.Addrs(), ",")
	for _, tc := range []struct {
		sig            os.Signal
		code           int
		args           []string
		summary, final string
	}{
		{os.Interrupt, 130, []string{"produce", "demo", "--count", "1000000000", "--rate", "200"}, " records written, 0 failed", "riffle: interrupted: stopped after "},
		{syscall.SIGTERM, 143, []string{"produce", "demo", "--count", "1000000000", "--rate", "200"}, " records written, 0 failed", "riffle: terminated: stopped after "},
		{os.Interrupt, 130, []string{"consume", "demo"}, " records in ", "riffle: interrupted: stopped after "},
		{os.Interrupt, 130, []string{"consume", "demo", "--group", "g", "--from", "latest"}, " records in ", "riffle: interrupted: stopped after "},
	} {
		b := startRiffle(t, append([]string{"--brokers", brokers}, tc.args...)...)
		// Stop it once it runs (its first progress line, after the
		// setup), not after a fixed 500 ms that a loaded machine may
		// spend still connecting.
		b.waitErr(t, progressLine)
		r := b.stop(t, tc.sig)
		lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
		if r.code != tc.code || !strings.Contains(r.stderr, tc.summary) || !strings.HasPrefix(lines[len(lines)-1], tc.final) {
			t.Errorf("riffle %q stopped by %v: exit %d, stderr %q; want %d, a summary and %q", tc.args, tc.sig, r.code, r.stderr, tc.code, tc.final)
		}
	}
}

// Help: every command's flags show one default at most and no Go type
// names; the root description names every command.
func TestFlagHelp(t *testing.T) {
	t.Parallel()
	root := (&app{}).rootCmd()
	typeNames := regexp.MustCompile(`^(u?int(8|16|32|64)?|float(32|64)|(int|int32|int64|string|uint)Slice|stringArray|strings)$`)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			name, _ := pflag.UnquoteUsage(f)
			if typeNames.MatchString(name) {
				t.Errorf("%s --%s shows the type %q", c.CommandPath(), f.Name, name)
			}
		})
		for _, line := range strings.Split(c.Flags().FlagUsages(), "\n") {
			if strings.Count(line, "(default") > 1 {
				t.Errorf("%s: two defaults in %q", c.CommandPath(), line)
			}
		}
		for _, sub := range c.Commands() {
			if sub.Name() != "help" && sub.Name() != "completion" {
				walk(sub)
			}
		}
	}
	walk(root)
	for _, sub := range root.Commands() {
		if n := sub.Name(); n != "help" && n != "completion" && !regexp.MustCompile(`\b`+n+`\b`).MatchString(root.Long) {
			t.Errorf("the root description does not mention %q", n)
		}
	}
}

// Flag values that do not parse say which flag and what it wants, not
// what strconv said.
func TestFlagParseErrors(t *testing.T) {
	t.Parallel()
	dead := "127.0.0.1:1"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"consume", "t", "--count", "abc"}, `invalid argument "abc" for "-c, --count" flag: want a whole number`},
		{[]string{"consume", "t", "-p", "1,x"}, `invalid argument "1,x" for "-p, --partitions" flag: want whole numbers separated by commas`},
		{[]string{"produce", "t", "--rate", "fast"}, `invalid argument "fast" for "--rate" flag: want a number`},
		{[]string{"produce", "t", "--count", "1", "--size", "99999999999999999999"}, `for "--size" flag: out of range`},
		{[]string{"topic", "create", "x", "-r", "40000"}, `invalid argument "40000" for "-r, --replication" flag: out of range: want a whole number from -32768 to 32767`},
		{[]string{"--timeout", "soon", "cluster"}, `invalid argument "soon" for "--timeout" flag: want a duration such as 500ms, 10s or 1m30s`},
		{[]string{"topic", "list", "--internal=maybe"}, `for "--internal" flag: want true or false`},
		{[]string{"consume", "t", "-o", "json"}, `--from "json": want earliest, latest, an offset, -N (N before the end) or an RFC 3339 time (2006-01-02T15:04:05Z) (on consume -o is the start offset, as in kcat; the output format is -f/--format: -f json)`},
		{[]string{"consume", "t", "-e", "--to", "5"}, "-e (--exit-at-end) is --to end: give one of them"},
		{[]string{"consume", "t", "-G", "g", "-e"}, "--to and -e cannot be used with --group"},
		{[]string{"consume", "t", "-K", ":", "-f", "json"}, "--key-separator goes with --format kv"},
		{[]string{"consume", "t", "-f", "%q"}, `--format "%q": unknown verb %q`},
		{[]string{"consume", "t", "-f", "%"}, "ends with a lone %"},
		{[]string{"consume", "t", "-f", "yaml"}, `--format "yaml": want value, kv, json or a format string`},
		{[]string{"produce", "t", "-H", "novalue"}, `--header "novalue": want KEY=VALUE`},
		{[]string{"produce", "t", "-H", "=v"}, `--header "=v": want KEY=VALUE`},
	} {
		r := runRiffle(t, append([]string{"--brokers", dead}, tc.args...)...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, "riffle: ") || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "strconv") || strings.Contains(r.stderr, "time: ") {
			t.Errorf("riffle %q: exit %d, stderr %q; want exit 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

func TestParseTemplate(t *testing.T) {
	t.Parallel()
	tm, err := parseTemplate(`a%%b\t%k\x\\`)
	if err != nil {
		t.Fatal(err)
	}
	want := recordTemplate{{lit: "a%b\t"}, {verb: 'k'}, {lit: `\x\`}}
	if !slices.Equal(tm, want) {
		t.Errorf("got %+v, want %+v", tm, want)
	}
	for _, bad := range []string{"%", "%z", "x%"} {
		if _, err := parseTemplate(bad); err == nil {
			t.Errorf("parseTemplate(%q) succeeded", bad)
		}
	}
}

func TestAddrReasons(t *testing.T) {
	t.Parallel()
	bh, err := rifftest.NewBlackhole()
	if err != nil {
		t.Skip(err)
	}
	defer bh.Close()
	refused := closedPort(t)
	r := runRiffle(t, "--brokers", bh.Addr()+","+refused, "--timeout", "1500ms", "topic", "list")
	r.wantCode(t, 1)
	// Not every address failed fast: the command ran until --timeout,
	// and then says why each address failed, once.
	re := `^riffle: timed out after 1.5s \(--timeout\): listing topics: no broker reachable: (` + regexp.QuoteMeta(bh.Addr()) + `: timeout[^;]*; ` + regexp.QuoteMeta(refused) + `: connection refused|` +
		regexp.QuoteMeta(refused) + `: connection refused; ` + regexp.QuoteMeta(bh.Addr()) + `: timeout[^;]*)\n$`
	if !regexp.MustCompile(re).MatchString(r.stderr) || strings.Count(r.stderr, "refused") != 1 {
		t.Errorf("stderr = %q, want it to match %s", r.stderr, re)
	}
}
