package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/riffle-go/riffle/ranges"
)

func planLines(t *testing.T, out string) []ranges.Range {
	t.Helper()
	var rs []ranges.Range
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		var r ranges.Range
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("plan line %q: %v", line, err)
		}
		rs = append(rs, r)
	}
	return rs
}

func rng(p int32, lo, hi int64) ranges.Range {
	return ranges.Range{Topic: "demo", Partition: p, Low: lo, High: hi}
}

func jsonLines(rs []ranges.Range) string {
	var b strings.Builder
	for _, r := range rs {
		j, _ := json.Marshal(r)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

// plan → read → commit → plan again: the second plan covers only what
// was not done and what is new, and group lag shows the commit. Not
// parallel: it replaces stdin.
func TestRangesPlanReadCommit(t *testing.T) {
	c := startCluster(t)
	produceLines(t, c, "demo", numbered("a", 0, 25), "--partition", "1")
	produceLines(t, c, "demo", numbered("b", 0, 4), "--partition", "4")

	r := on(t, c, "ranges", "plan", "--topic", "demo", "--group", "etl", "--max-records", "10")
	r.wantCode(t, 0)
	plan := planLines(t, r.stdout)
	want := []ranges.Range{rng(1, 0, 10), rng(1, 10, 20), rng(1, 20, 25), rng(4, 0, 4)}
	if jsonLines(plan) != jsonLines(want) {
		t.Fatalf("plan:\n%swant:\n%s", jsonLines(plan), jsonLines(want))
	}
	if !strings.HasPrefix(r.stdout, `{"topic":"demo","partition":1,"low":0,"high":10}`+"\n") {
		t.Errorf("plan line format: %q", r.stdout)
	}

	// read: one range from --range, one from stdin, in the consume formats.
	r = on(t, c, "ranges", "read", "--range", jsonLines(plan[1:2]))
	r.wantCode(t, 0)
	if got, want := r.stdout, strings.Join(numbered("a", 10, 20), "\n")+"\n"; got != want {
		t.Errorf("read value output %q, want a10..a19", got)
	}
	withStdin(t, jsonLines(plan[3:]))
	r = on(t, c, "ranges", "read", "-f", "%p/%o %s\n")
	r.wantCode(t, 0)
	if got := r.stdout; got != "4/0 b0\n4/1 b1\n4/2 b2\n4/3 b3\n" {
		t.Errorf("read template output %q", got)
	}
	r = on(t, c, "ranges", "read", "-f", "json", "--range", `{"topic":"demo","partition":1,"low":24,"high":25}`)
	r.wantCode(t, 0)
	var rec struct {
		Offset int64  `json:"offset"`
		Value  string `json:"value"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil || rec.Offset != 24 || rec.Value != "a24" {
		t.Errorf("read json output %q: %v", r.stdout, err)
	}
	// Beyond the end: what there was, then status 1.
	r = on(t, c, "ranges", "read", "--range", `{"topic":"demo","partition":4,"low":2,"high":9}`)
	r.wantCode(t, 1)
	if r.stdout != "b2\nb3\n" || !strings.Contains(r.stderr, "beyond the high watermark") {
		t.Errorf("read beyond the end: stdout %q stderr %q", r.stdout, r.stderr)
	}

	// commit: [10,20) of partition 1 failed; everything else is done.
	withStdin(t, jsonLines([]ranges.Range{plan[3], plan[2], plan[0]}))
	r = on(t, c, "ranges", "commit", "--group", "etl")
	r.wantCode(t, 0)
	rows := tableRows(t, r.stdout, "TOPIC")
	if len(rows) != 2 || strings.Join(rows[0], " ") != "demo 1 10" || strings.Join(rows[1], " ") != "demo 4 4" {
		t.Errorf("commit output rows %q", rows)
	}
	var lag groupLagJSON
	decode(t, on(t, c, "group", "lag", "etl", "-o", "json"), &lag)
	if lag.TotalLag != 15 || len(lag.Partitions) != 2 {
		t.Errorf("group lag after the commit: %+v", lag)
	}

	// The next plan: partition 1 from its checkpoint, plus what is new.
	produceLines(t, c, "demo", numbered("c", 0, 3), "--partition", "4")
	r = on(t, c, "ranges", "plan", "--topic", "demo", "--group", "etl", "--max-records", "10")
	r.wantCode(t, 0)
	want = []ranges.Range{rng(1, 10, 20), rng(1, 20, 25), rng(4, 4, 7)}
	if got := planLines(t, r.stdout); jsonLines(got) != jsonLines(want) {
		t.Fatalf("second plan:\n%swant:\n%s", jsonLines(got), jsonLines(want))
	}
}

func TestRangesUsage(t *testing.T) {
	c := startCluster(t)
	for _, args := range [][]string{
		{"ranges", "plan"},
		{"ranges", "plan", "--topic", "demo", "--max-records", "-1"},
		{"ranges", "plan", "--topic", "demo", "--start", "sometime"},
		{"ranges", "read", "--range", `{"topic":"demo","partition":0,"low":5,"high":1}`},
		{"ranges", "read", "--range", `{"topic":"demo","part":0}`},
		{"ranges", "read", "--range", `{}`, "-f", "xml"},
		{"ranges", "commit"},
	} {
		on(t, c, args...).wantCode(t, exitUsage)
	}
	withStdin(t, "not json\n")
	r := on(t, c, "ranges", "commit", "--group", "g")
	r.wantCode(t, exitUsage)
	if !strings.Contains(r.stderr, "stdin line 1") {
		t.Errorf("stderr %q", r.stderr)
	}
}
