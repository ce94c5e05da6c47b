package main

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// produceLines writes the lines to the topic (one record each) with
// extra produce flags.
func produceLines(t *testing.T, c interface{ Addrs() []string }, topic string, lines []string, extra ...string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "lines")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--brokers", strings.Join(c.Addrs(), ","), "--timeout", "10s", "produce", topic, "-f", path}, extra...)
	runRiffle(t, args...).wantCode(t, 0)
}

func numbered(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, prefix+strconv.Itoa(i))
	}
	return out
}

// --from and --to bound each partition; consume exits when every
// partition reached its --to.
func TestConsumeFromTo(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	produceLines(t, c, "demo", numbered("a", 0, 30), "--partition", "1")
	produceLines(t, c, "demo", numbered("b", 0, 5), "--partition", "3")

	r := on(t, c, "consume", "demo", "--partitions", "1", "--from", "5", "--to", "15")
	r.wantCode(t, 0)
	if got, want := r.stdout, strings.Join(numbered("a", 5, 15), "\n")+"\n"; got != want {
		t.Errorf("stdout = %q, want a5..a14", got)
	}
	if row := findRow(tableRows(t, r.stderr, "PARTITION"), "1"); strings.Join(row, " ") != "1 10 14 15" {
		t.Errorf("summary row for partition 1 = %q", row)
	}

	// --to end: what the partitions hold when consume starts. Empty
	// partitions are done at once.
	r = on(t, c, "consume", "demo", "--to", "end", "--format", "kv")
	r.wantCode(t, 0)
	if n := strings.Count(r.stdout, "\n"); n != 35 {
		t.Errorf("--to end printed %d records, want 35", n)
	}
	if !strings.HasPrefix(r.stdout, "\ta") && !strings.HasPrefix(r.stdout, "\tb") {
		t.Errorf("kv output without keys should start with the separator: %q", r.stdout[:10])
	}

	// --to beyond what partition 3 holds: consume waits for more until
	// --timeout, then fails, having printed what there was.
	start := time.Now()
	r = runRiffle(t, "--brokers", strings.Join(c.Addrs(), ","), "--timeout", "1s", "consume", "demo", "--partitions", "1,3", "--to", "10")
	r.wantCode(t, 1)
	if n := strings.Count(r.stdout, "\n"); n != 15 {
		t.Errorf("printed %d records, want 10 of partition 1 and 5 of partition 3", n)
	}
	if !strings.Contains(r.stderr, "riffle: timed out after 1s (--timeout): stopped after 15 records") {
		t.Errorf("stderr = %q", r.stderr)
	}
	if d := time.Since(start); d > 20*time.Second { // not stopping would be a hang; 20 s leaves a loaded machine room
		t.Errorf("took %v to time out", d)
	}
}

// --count stops after that many records in all, and --from takes a time.
func TestConsumeCountAndTime(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	produceLines(t, c, "demo", numbered("old", 0, 20))
	time.Sleep(30 * time.Millisecond)
	mid := time.Now().UTC().Format(time.RFC3339Nano)
	time.Sleep(30 * time.Millisecond)
	produceLines(t, c, "demo", numbered("new", 0, 12), "--partition", "2")

	r := on(t, c, "consume", "demo", "--count", "25")
	r.wantCode(t, 0)
	if n := strings.Count(r.stdout, "\n"); n != 25 {
		t.Errorf("--count 25 printed %d records", n)
	}
	if !strings.Contains(r.stderr, "25 records in ") {
		t.Errorf("stderr = %q", r.stderr)
	}

	r = on(t, c, "consume", "demo", "--from", mid, "--to", "end")
	r.wantCode(t, 0)
	if got, want := r.stdout, strings.Join(numbered("new", 0, 12), "\n")+"\n"; got != want {
		t.Errorf("--from %s printed %q, want only the new records", mid, got)
	}

	// Following from latest: nothing new arrives; --timeout ends the
	// tail, which is a normal end.
	r = runRiffle(t, "--brokers", strings.Join(c.Addrs(), ","), "--timeout", "1s", "consume", "demo", "--from", "latest")
	r.wantCode(t, 0)
	if r.stdout != "" || !strings.HasPrefix(r.stderr, "0 records in ") {
		t.Errorf("stdout %q, stderr %q", r.stdout, r.stderr)
	}
}

// A second group member run resumes after the offsets the first
// committed: together they print every record exactly once.
func TestConsumeGroupResumes(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	on(t, c, "produce", "demo", "--count", "40", "--size", "8", "--keys", "7").wantCode(t, 0)

	seen := map[[2]int64]int{}
	for _, n := range []int{15, 25} {
		r := on(t, c, "consume", "demo", "--group", "g1", "--count", strconv.Itoa(n), "--format", "json")
		r.wantCode(t, 0)
		recs := consumedJSON(t, r.stdout)
		if len(recs) != n {
			t.Fatalf("run printed %d records, want %d", len(recs), n)
		}
		for _, rec := range recs {
			seen[[2]int64{int64(rec.Partition), rec.Offset}]++
		}
		if !strings.Contains(r.stderr, `riffle: group "g1" assigned partitions 0,1,2,3,4,5`) {
			t.Errorf("stderr does not show the assignment:\n%s", r.stderr)
		}
	}
	if len(seen) != 40 {
		t.Errorf("%d distinct records, want 40", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("record %v printed %d times", id, n)
		}
	}

	// Nothing is left for the group; a new group starts from earliest
	// (the default) or latest.
	r := runRiffle(t, "--brokers", strings.Join(c.Addrs(), ","), "--timeout", "2s", "consume", "demo", "--group", "g1")
	r.wantCode(t, 0)
	if r.stdout != "" {
		t.Errorf("third run printed %q", r.stdout)
	}
	r = on(t, c, "consume", "demo", "--group", "g2", "--count", "40")
	r.wantCode(t, 0)
	r = runRiffle(t, "--brokers", strings.Join(c.Addrs(), ","), "--timeout", "2s", "consume", "demo", "--group", "g3", "--from", "latest")
	r.wantCode(t, 0)
	if r.stdout != "" {
		t.Errorf("a new group from latest printed %q", r.stdout)
	}
}

func TestConsumeFailures(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	r := on(t, c, "consume", "nope", "--count", "1")
	r.wantCode(t, 1)
	if !strings.HasPrefix(r.stderr, `riffle: topic "nope": UNKNOWN_TOPIC_OR_PARTITION`) {
		t.Errorf("stderr = %q", r.stderr)
	}
	r = on(t, c, "consume", "demo", "--partitions", "2,6")
	r.wantCode(t, 1)
	if r.stderr != "riffle: topic \"demo\" has 6 partitions: there is no partition 6\n" {
		t.Errorf("stderr = %q", r.stderr)
	}
}

func TestConsumeUsageErrors(t *testing.T) {
	t.Parallel()
	dead := "127.0.0.1:1"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"consume"}, "consume needs a topic: riffle consume TOPIC, or -t TOPIC"},
		{[]string{"consume", "a", "b"}, "accepts at most 1 arg(s), received 2"},
		{[]string{"consume", "t", "--format", "yaml"}, `--format "yaml": want value, kv, json or a format string`},
		{[]string{"consume", "t", "--from", "yesterday"}, `--from "yesterday": want earliest, latest, an offset, -N (N before the end) or an RFC 3339 time`},
		{[]string{"consume", "t", "--to", "x"}, `--to "x": want an offset or end`},
		{[]string{"consume", "t", "--count", "0"}, "--count must be positive"},
		{[]string{"consume", "t", "--partitions", "1,x"}, `invalid argument "1,x"`},
		{[]string{"consume", "t", "--partitions", "1,1"}, "--partitions: 1 given twice"},
		{[]string{"consume", "t", "--partitions", "-1"}, "--partitions: -1 is negative"},
		{[]string{"consume", "t", "--group", "g", "--partitions", "1"}, "--partitions cannot be used with --group"},
		{[]string{"consume", "t", "--group", "g", "--to", "5"}, "--to and -e cannot be used with --group"},
		{[]string{"consume", "t", "--group", "g", "--from", "12"}, "--from with --group takes earliest or latest"},
	} {
		r := runRiffle(t, append([]string{"--brokers", dead, "--timeout", "5s"}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("riffle %q: exit %d, stderr %q; want exit 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

func TestJSONBytes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in       []byte
		want     string // "<nil>" for nil
		encoding string
	}{
		{nil, "<nil>", ""},
		{[]byte{}, "", ""},
		{[]byte("héllo"), "héllo", ""},
		{[]byte{0xff, 0x00}, "/wA=", "base64"},
	} {
		got, enc := jsonBytes(tc.in)
		s := "<nil>"
		if got != nil {
			s = *got
		}
		if s != tc.want || enc != tc.encoding {
			t.Errorf("jsonBytes(%q) = %q, %q; want %q, %q", tc.in, s, enc, tc.want, tc.encoding)
		}
	}
}

// The demo runs every step against a cluster, including the produce,
// slow-partition, parallel, group handover and transaction steps, and
// loses nothing.
func TestDemoSteps(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	start := time.Now()
	r := on(t, c, "--timeout", "60s", "demo")
	r.wantCode(t, 0)
	if r.stderr != "" {
		t.Errorf("stderr = %q", r.stderr)
	}
	for _, want := range []string{
		"10000 records written, 0 failed",
		"latency p50 ",
		"partitions 1 and 2 finished",
		"speed-up by key: ",
		`member A leaves the group`,
		"lost: 0",
		"Demo complete: ",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	m := regexp.MustCompile(`(?m)^ +records: (\d+), distinct: (\d+), lost: 0, duplicates: (\d+)$`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no group result line")
	}
	records, _ := strconv.Atoi(m[1])
	distinct, _ := strconv.Atoi(m[2])
	dups, _ := strconv.Atoi(m[3])
	if distinct != demoGroupRecords || records != distinct+dups {
		t.Errorf("group result: records %d, distinct %d, duplicates %d; want %d distinct", records, distinct, dups, demoGroupRecords)
	}
	// By key runs the parallel step's keys at once, by partition one
	// record at a time.
	m = regexp.MustCompile(`(?m)^ +partition +64 +1 .*\n +key +64 +(\d+) `).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Errorf("no parallel result rows")
	} else if peak, _ := strconv.Atoi(m[1]); peak < 2 || peak > demoParallelKeys {
		t.Errorf("parallel step: %d records of different keys at once by key; want 2 to %d", peak, demoParallelKeys)
	}
	// An aborted transaction's records reach read_uncommitted readers
	// only; a committed one's reach both.
	for _, re := range []string{
		`(?m)^ +read_uncommitted +6 +aborted-1 aborted-2 aborted-3 committed-1 committed-2 committed-3$`,
		`(?m)^ +read_committed +3 +committed-1 committed-2 committed-3$`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("transaction step: no line matching %s", re)
		}
	}
	t.Logf("demo took %v", time.Since(start))
}

// failingWriter accepts whole writes until limit bytes, then fails.
type failingWriter struct {
	mu     sync.Mutex
	limit  int
	n      int
	writes []string
}

func (w *failingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n+len(p) > w.limit {
		return 0, errors.New("disk full")
	}
	w.n += len(p)
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

// When stdout fails, consume stops with exit 1, and a group commits only
// the records that were written out: the next run gets all the others.
func TestConsumeGroupOutputFails(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	on(t, c, "produce", "demo", "--count", "40", "--size", "8", "--keys", "5").wantCode(t, 0)

	out := &failingWriter{limit: 1000}
	var errOut strings.Builder
	code := run([]string{"--brokers", strings.Join(c.Addrs(), ","), "--timeout", "10s", "consume", "demo", "--group", "g", "--format", "json"}, out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "riffle: writing the records: disk full") {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut.String())
	}
	first := consumedJSON(t, strings.Join(out.writes, ""))
	if len(first) == 0 || len(first) >= 40 {
		t.Fatalf("first run wrote %d records", len(first))
	}
	t.Logf("first run wrote %d records before its output failed", len(first))

	r := on(t, c, "consume", "demo", "--group", "g", "--format", "json", "--count", strconv.Itoa(40-len(first)))
	r.wantCode(t, 0)
	seen := map[[2]int64]bool{}
	for _, rec := range append(first, consumedJSON(t, r.stdout)...) {
		id := [2]int64{int64(rec.Partition), rec.Offset}
		if seen[id] {
			t.Errorf("record %v printed twice", id)
		}
		seen[id] = true
	}
	if len(seen) != 40 {
		t.Errorf("%d distinct records in the two runs, want 40", len(seen))
	}
}

// A group error the member meets on every retry is printed once; another
// one is printed too.
func TestConsumeGroupErrorOnce(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	r := &consumeRun{stderr: &b, prog: progressSpec{}.start(func() string { return "" })}
	defer r.prog.stop()
	unsupported := errors.New(`group "g": UNSUPPORTED_ASSIGNOR`)
	for range 3 {
		r.groupError(unsupported)
	}
	r.groupError(errors.New(`group "g": GROUP_AUTHORIZATION_FAILED`))
	r.groupError(unsupported)
	if want := "riffle: group \"g\": UNSUPPORTED_ASSIGNOR\nriffle: group \"g\": GROUP_AUTHORIZATION_FAILED\n"; b.String() != want {
		t.Errorf("stderr %q, want %q", b.String(), want)
	}
}
