package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/rifftest"
)

// A topic whose last offset is a commit marker: consume -e exits (the
// end is an offset, markers included), and read_committed prints only
// the committed records.
func TestConsumeExitAtEndTransactional(t *testing.T) {
	t.Parallel()
	c := rifftest.New(t, rifftest.Brokers(1), rifftest.Topic("eos", 1))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := riffle.NewClient(riffle.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	p, err := riffle.NewProducer(cl, riffle.TransactionalID("eos-tx"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	txn := func(commit bool, vals ...string) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			if err := p.ProduceSync(ctx, &riffle.Record{Topic: "eos", Value: []byte(v)}); err != nil {
				t.Fatal(err)
			}
		}
		end := p.CommitTransaction
		if !commit {
			end = p.AbortTransaction
		}
		if err := end(ctx); err != nil {
			t.Fatal(err)
		}
	}
	txn(true, "c1", "c2")
	txn(false, "a1", "a2")
	txn(true, "c3") // the last offset is its commit marker

	r := on(t, c, "consume", "eos", "-e", "--isolation", "read_committed")
	r.wantCode(t, 0)
	if got, want := r.stdout, "c1\nc2\nc3\n"; got != want {
		t.Errorf("read_committed stdout = %q, want %q", got, want)
	}
	// kcat's way of saying it, quietly: only the records on stdout.
	r = runRiffle(t, "-C", "-b", c.Addrs()[0], "-t", "eos", "-e", "-q", "-X", "isolation.level=read_committed")
	r.wantCode(t, 0)
	if r.stdout != "c1\nc2\nc3\n" || r.stderr != "" {
		t.Errorf("-C -X isolation.level=read_committed -q: stdout %q, stderr %q; want the committed records and nothing on stderr", r.stdout, r.stderr)
	}
	r = on(t, c, "consume", "eos", "-e")
	r.wantCode(t, 0)
	if got := strings.Count(r.stdout, "\n"); got != 5 {
		t.Errorf("read_uncommitted printed %d records, want 5 (aborted ones too): %q", got, r.stdout)
	}
	r = on(t, c, "consume", "eos", "-e", "--isolation", "serializable")
	r.wantCode(t, 2)

	// With a transaction open, read_committed's end is the last stable
	// offset: -e prints what is committed and exits, rather than waiting
	// for the transaction (it waited until the end was listed under
	// read_committed).
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &riffle.Record{Topic: "eos", Value: []byte("open")}); err != nil {
		t.Fatal(err)
	}
	r = on(t, c, "consume", "eos", "-e", "--isolation", "read_committed")
	r.wantCode(t, 0)
	if got, want := r.stdout, "c1\nc2\nc3\n"; got != want {
		t.Errorf("read_committed stdout with a transaction open = %q, want %q", got, want)
	}
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
}
