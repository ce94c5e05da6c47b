package main

import (
	"strings"
	"testing"
)

// TestShareCommands: reset creates the share group's state (it has no
// members), describe shows the start offsets, list runs; a reset without
// --topic is a usage error.
func TestShareCommands(t *testing.T) {
	c := startCluster(t)
	r := on(t, c, "share", "reset", "workers", "--topic", "demo", "--to", "3", "--execute")
	r.wantCode(t, 0)
	r = on(t, c, "share", "describe", "workers")
	r.wantCode(t, 0)
	rows := tableRows(t, r.stdout, "TOPIC")
	if len(rows) != 6 {
		t.Fatalf("offset rows %v", rows)
	}
	for _, row := range rows {
		if row[0] != "demo" || row[2] != "3" {
			t.Errorf("row %v, want start offset 3", row)
		}
	}
	on(t, c, "share", "list").wantCode(t, 0)
	on(t, c, "share", "reset", "workers", "--to", "earliest").wantCode(t, 2)
	if r := on(t, c, "share", "reset", "workers", "--topic", "demo", "--to", "earliest"); !strings.Contains(r.stdout, "preview") {
		t.Fatalf("no preview: %s", r.stdout)
	}
}

// A missing share group's error is printed once: in the table on stdout,
// not again on stderr.
func TestShareDescribeMissingOnce(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	r := on(t, c, "share", "describe", "nobody")
	if r.code == 0 {
		t.Fatalf("describe of a missing group exited 0")
	}
	if n := strings.Count(r.stdout+r.stderr, "GROUP_ID_NOT_FOUND"); n != 1 {
		t.Errorf("the error appears %d times, want once:\nstdout:\n%s\nstderr:\n%s", n, r.stdout, r.stderr)
	}
}
