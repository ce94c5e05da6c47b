package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// withStdin makes os.Stdin read content for the rest of the test. Tests
// using it must not be parallel.
func withStdin(t *testing.T, content string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stdin")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdin
	os.Stdin = f
	t.Cleanup(func() {
		os.Stdin = old
		f.Close()
	})
}

// consumedJSON decodes consume --format json output, one object a line.
func consumedJSON(t *testing.T, out string) []recordJSON {
	t.Helper()
	var recs []recordJSON
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		var r recordJSON
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("bad JSON line %q: %v", sc.Text(), err)
		}
		recs = append(recs, r)
	}
	return recs
}

// summaryCounts extracts "N records written, M failed" from produce's
// summary.
func summaryCounts(t *testing.T, stderr string) (written, failed int) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^(\d+) records written, (\d+) failed, in \S+: \d+ records/s, [\d.]+ MB/s \([\d.]+ MB\)$`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no produce summary in stderr:\n%s", stderr)
	}
	written, _ = strconv.Atoi(m[1])
	failed, _ = strconv.Atoi(m[2])
	return written, failed
}

func wantLatencyLine(t *testing.T, stderr string) {
	t.Helper()
	if !regexp.MustCompile(`(?m)^latency p50 \S+, p90 \S+, p99 \S+, max \S+$`).MatchString(stderr) {
		t.Errorf("no latency percentiles in stderr:\n%s", stderr)
	}
}

// Lines from stdin, split into key and value, come back from consume
// --format json with their keys, in order per key.
func TestProduceStdinConsumeJSON(t *testing.T) {
	c := startCluster(t)
	input := "alice:hello\n" +
		"bob:world: with a colon\n" +
		"alice:second\r\n" + // CRLF input
		"no separator here\n" +
		":empty key\n" +
		"carol:\xff\xfe binary\n" +
		"alice:third" // no final newline
	withStdin(t, input)
	r := on(t, c, "produce", "demo", "--key-separator", ":", "--compression", "snappy")
	r.wantCode(t, 0)
	if r.stdout != "" {
		t.Errorf("produce wrote to stdout: %q", r.stdout)
	}
	if w, f := summaryCounts(t, r.stderr); w != 7 || f != 0 {
		t.Errorf("summary says %d written, %d failed; want 7, 0", w, f)
	}
	wantLatencyLine(t, r.stderr)
	if !strings.Contains(r.stderr, `1 lines had no ":"`) {
		t.Errorf("no warning about the line without a separator:\n%s", r.stderr)
	}

	r = on(t, c, "consume", "demo", "--count", "7", "--format", "json")
	r.wantCode(t, 0)
	recs := consumedJSON(t, r.stdout)
	if len(recs) != 7 {
		t.Fatalf("consumed %d records, want 7", len(recs))
	}
	byKey := map[string][]string{}
	var nullKeys []string
	seen := map[[2]int64]bool{}
	for _, rec := range recs {
		if rec.Topic != "demo" || rec.Partition < 0 || rec.Partition >= 6 || rec.Offset < 0 || rec.Headers == nil {
			t.Errorf("bad record %+v", rec)
		}
		if _, err := time.Parse(time.RFC3339, rec.Timestamp); err != nil || time.Since(mustTime(t, rec.Timestamp)) > time.Minute {
			t.Errorf("timestamp %q is not a recent RFC 3339 time", rec.Timestamp)
		}
		id := [2]int64{int64(rec.Partition), rec.Offset}
		if seen[id] {
			t.Errorf("record %v consumed twice", id)
		}
		seen[id] = true
		value := *rec.Value
		if rec.ValueEncoding == "base64" {
			b, err := base64.StdEncoding.DecodeString(value)
			if err != nil {
				t.Fatal(err)
			}
			value = string(b)
		} else if rec.ValueEncoding != "" {
			t.Errorf("value_encoding %q", rec.ValueEncoding)
		}
		if rec.Key == nil {
			nullKeys = append(nullKeys, value)
			continue
		}
		byKey[*rec.Key] = append(byKey[*rec.Key], value)
	}
	want := map[string][]string{
		"alice": {"hello", "second", "third"},
		"bob":   {"world: with a colon"},
		"":      {"empty key"},
		"carol": {"\xff\xfe binary"},
	}
	for k, vs := range want {
		if strings.Join(byKey[k], "|") != strings.Join(vs, "|") {
			t.Errorf("key %q: values %q, want %q (in order)", k, byKey[k], vs)
		}
	}
	if len(byKey) != len(want) || len(nullKeys) != 1 || nullKeys[0] != "no separator here" {
		t.Errorf("keys %q, null-key values %q", byKey, nullKeys)
	}
	// The binary value was base64; the UTF-8 ones were not.
	for _, rec := range recs {
		if rec.Key != nil && *rec.Key == "carol" && rec.ValueEncoding != "base64" {
			t.Errorf("carol's value not base64: %+v", rec)
		}
	}
	// The summary lists the partitions read.
	if !strings.Contains(r.stderr, "7 records in ") || !strings.Contains(r.stderr, "PARTITION  RECORDS  LAST OFFSET  NEXT OFFSET") {
		t.Errorf("consume summary missing:\n%s", r.stderr)
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// A generated load: the records all arrive, with the size and keys asked
// for, whatever the acks and compression.
func TestProduceGenerated(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	on(t, c, "topic", "create", "load", "-p", "4").wantCode(t, 0)

	r := on(t, c, "produce", "load", "--count", "600", "--size", "64", "--keys", "10", "--compression", "zstd", "--linger", "1ms")
	r.wantCode(t, 0)
	if w, f := summaryCounts(t, r.stderr); w != 600 || f != 0 {
		t.Errorf("summary says %d written, %d failed", w, f)
	}
	wantLatencyLine(t, r.stderr)
	if !strings.Contains(r.stderr, "(0.04 MB)") { // 600 * (64 + len("key-N"))
		t.Errorf("summary does not count 0.04 MB:\n%s", r.stderr)
	}

	for _, args := range [][]string{
		{"--acks", "1", "--compression", "gzip"},
		{"--acks", "0", "--compression", "lz4"},
		{"--acks", "all", "--rate", "2000"}, // 200 records at 2000/s: ~0.1 s
	} {
		r := on(t, c, append([]string{"produce", "load", "--count", "200", "--size", "10", "--keys", "10"}, args...)...)
		r.wantCode(t, 0)
		if w, f := summaryCounts(t, r.stderr); w != 200 || f != 0 {
			t.Errorf("%q: %d written, %d failed", args, w, f)
		}
	}

	// Everything is there: 600 + 3*200 records, keyed key-0..key-9.
	r = on(t, c, "consume", "load", "--to", "end", "--format", "kv", "--key-separator", "=")
	r.wantCode(t, 0)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 1200 {
		t.Fatalf("consumed %d records, want 1200", len(lines))
	}
	keys := map[string]int{}
	for _, l := range lines {
		k, v, ok := strings.Cut(l, "=")
		if !ok || (len(v) != 64 && len(v) != 10) {
			t.Fatalf("bad line %q", l)
		}
		keys[k]++
	}
	if len(keys) != 10 {
		t.Errorf("%d distinct keys, want 10: %v", len(keys), keys)
	}
	for k, n := range keys {
		if n != 120 {
			t.Errorf("key %s: %d records, want 120", k, n)
		}
	}
}

// --partition sends everything to one partition; a partition the topic
// lacks fails the records, and produce exits 1 naming the error.
func TestProducePartition(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	r := on(t, c, "produce", "demo", "--count", "50", "--size", "5", "--partition", "4")
	r.wantCode(t, 0)
	r = on(t, c, "consume", "demo", "--to", "end")
	r.wantCode(t, 0)
	if n := strings.Count(r.stdout, "\n"); n != 50 {
		t.Errorf("consumed %d records, want 50", n)
	}
	rows := tableRows(t, r.stderr, "PARTITION")
	if len(rows) != 6 || findRow(rows, "4")[1] != "50" || findRow(rows, "4")[2] != "49" {
		t.Errorf("summary rows = %q, want 50 records on partition 4", rows)
	}

	r = on(t, c, "produce", "demo", "--count", "1000", "--partition", "9")
	r.wantCode(t, 1)
	written, failed := summaryCounts(t, r.stderr)
	if written != 0 || failed == 0 || failed >= 1000 {
		// Producing stops once the error shows every record would fail.
		t.Errorf("%d written, %d failed: want 0 written, and not all 1000 tried", written, failed)
	}
	// The producer waits UnknownTopicTimeout (5 s) for a partition added
	// a moment ago before it fails the record.
	if !strings.Contains(r.stderr, "riffle: record 1: partition out of range: demo[9] not in the metadata after") ||
		!strings.Contains(r.stderr, "topic has 6 partitions") {
		t.Errorf("stderr does not show the first error:\n%s", r.stderr)
	}
}

// Producing to a topic that does not exist fails fast.
func TestProduceUnknownTopic(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	// A --timeout of a minute: failing fast is failing well before it,
	// whatever a loaded machine adds (on the 10 s of on(), an 8 s bound
	// left it 2 s).
	start := time.Now()
	r := runRiffle(t, "--brokers", strings.Join(c.Addrs(), ","), "--timeout", "60s", "produce", "nope", "--count", "100000")
	r.wantCode(t, 1)
	if !strings.Contains(r.stderr, "riffle: record 1: ") || !strings.Contains(r.stderr, "unknown topic") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestProduceFile(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	path := filepath.Join(t.TempDir(), "in.txt")
	os.WriteFile(path, []byte("one\ntwo\n\nfour\n"), 0o600)
	on(t, c, "produce", "demo", "-f", path, "--partition", "0").wantCode(t, 0)
	r := on(t, c, "consume", "demo", "--partitions", "0", "--to", "end")
	r.wantCode(t, 0)
	if r.stdout != "one\ntwo\n\nfour\n" {
		t.Errorf("consumed %q", r.stdout)
	}

	r = on(t, c, "produce", "demo", "-f", filepath.Join(t.TempDir(), "missing"))
	r.wantCode(t, 1)
	if !strings.HasPrefix(r.stderr, "riffle: --file: open ") {
		t.Errorf("stderr = %q", r.stderr)
	}
}

func TestProduceUsageErrors(t *testing.T) {
	t.Parallel()
	dead := "127.0.0.1:1"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"produce"}, "produce needs a topic: riffle produce TOPIC, or -t TOPIC"},
		{[]string{"produce", "t", "--count", "-1"}, "--count must be positive"},
		{[]string{"produce", "t", "--size", "10"}, "--size and --keys need --count"},
		{[]string{"produce", "t", "--keys", "3"}, "--size and --keys need --count"},
		{[]string{"produce", "t", "--count", "5", "--key-separator", ":"}, "not both"},
		{[]string{"produce", "t", "--count", "5", "--size", "-1"}, "--size must not be negative"},
		{[]string{"produce", "t", "--rate", "-5"}, "--rate must not be negative"},
		{[]string{"produce", "t", "--compression", "brotli"}, `--compression "brotli": want none, gzip, snappy, lz4 or zstd`},
		{[]string{"produce", "t", "--acks", "2"}, `--acks "2": want all, 1 or 0`},
		{[]string{"produce", "t", "--linger", "-1s"}, "--linger must not be negative"},
		{[]string{"produce", "t", "--partition", "-3"}, "--partition must not be negative"},
		{[]string{"produce", "t", "--key-separator", ""}, "--key-separator is empty"},
	} {
		r := runRiffle(t, append([]string{"--brokers", dead, "--timeout", "5s"}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "embedded") {
			t.Errorf("riffle %q: exit %d, stderr %q; want exit 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

func TestLatencies(t *testing.T) {
	t.Parallel()
	var l latencies
	if l.quantile(0.5) != 0 {
		t.Errorf("empty histogram has a median")
	}
	// 1..10000 µs: quantiles within 1%.
	for i := 1; i <= 10000; i++ {
		l.add(time.Duration(i) * time.Microsecond)
	}
	for _, q := range []float64{0.5, 0.9, 0.99, 1} {
		got := l.quantile(q)
		want := time.Duration(q*10000) * time.Microsecond
		if d := got - want; d < -want/100 || d > want/100 {
			t.Errorf("q%.2f = %v, want %v ±1%%", q, got, want)
		}
	}
	if l.max != 10*time.Millisecond || l.quantile(1) != l.max {
		t.Errorf("max %v, q1 %v", l.max, l.quantile(1))
	}
	// Buckets are contiguous and increasing.
	prev := -1
	for us := uint64(0); us < 1<<20; us++ {
		b := latBucket(us)
		if b != prev && b != prev+1 {
			t.Fatalf("bucket of %dµs is %d after %d", us, b, prev)
		}
		if v := latValue(b); v < float64(us)*0.99-1 || v > float64(us)*1.01+1 {
			t.Fatalf("bucket %d of %dµs has value %v", b, us, v)
		}
		prev = b
	}
}

func TestProgressPlain(t *testing.T) {
	t.Parallel()
	// Wait for the lines rather than sleep a number of ticks: on a
	// loaded machine a 10 ms ticker may not fire twice in 55 ms.
	var w syncBuffer
	var n atomic.Int32
	p := progressSpec{w: &w, prefix: "> ", every: 10 * time.Millisecond}.start(func() string { return "n=" + strconv.Itoa(int(n.Add(1))) })
	waitForOutput(t, &w, func(out string) bool { return strings.Count(out, "\n") >= 2 })
	p.stop()
	out := w.String()
	if !strings.HasPrefix(out, "> n=1\n> n=2\n") || strings.Contains(out, "\r") {
		t.Errorf("plain progress = %q", out)
	}

	// On a terminal: the line is drawn in place (\r, every 200 ms) as
	// often as the ticker fired before stop, then erased.
	var tw syncBuffer
	p = progressSpec{w: &tw, tty: true}.start(func() string { return "working" })
	waitForOutput(t, &tw, func(out string) bool { return out != "" })
	p.stop()
	if out := tw.String(); !regexp.MustCompile(`^(\rworking)+\r {7}\r$`).MatchString(out) {
		t.Errorf("terminal progress = %q", out)
	}
}

// waitForOutput waits (a hang guard of a minute) until w's text satisfies
// done.
func waitForOutput(t *testing.T, w *syncBuffer, done func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !done(w.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("progress wrote only %q in a minute", w.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
