package riffle

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/crashtest"
)

// A share group member SIGKILLed while it holds acquired records: a child
// process (this test binary, re-executed) joins the group, accepts its
// first shareCrashAccept records and then blocks in the handler on every
// later one, so that each of its runners holds a record. It logs every
// record it was handed, and whether it accepted or held it. The parent's
// two members consume everything else; then the child is killed. One
// partition: the group assigns it to every member (with as many
// partitions as members, each partition would have one member, and the
// child's partitions would wait for the kill). 1,500 records: the
// partition's in-flight window (group.share.partition.max.record.locks,
// 2,000) starts at the child's first held record until the kill.
//
// What the broker does on the kill: the child's TCP connections close, and
// kfake (like Kafka, whose share session cache has a connection disconnect
// listener) drops the share sessions of those connections and releases
// their acquired records at once, without waiting for the acquisition
// lock to end. The lock here lasts 5 minutes, longer than the test may
// take, so the redelivery the test sees is the disconnect's, not the
// lock's; the member is also fenced later, at its session timeout, which
// would release them too. Either way the records come back with delivery
// count 2 and nothing is lost.
//
// Checks: while the child lives, the parent's members never get a record
// it holds (the lock holds); after the kill every record it held is
// delivered to a parent member with delivery count 2; a record handed to
// the parent's members more than once, or with a delivery count above 1,
// is one the child was handed (its accept may have died with it); every
// record is handled, and the group's start offsets reach the end of every
// partition (every record accepted).

const (
	shareCrashEnvChild   = "RIFFLE_SHARE_CRASH_CHILD"
	shareCrashEnvBrokers = "RIFFLE_SHARE_CRASH_BROKERS"
	shareCrashEnvLog     = "RIFFLE_SHARE_CRASH_LOG"

	shareCrashParts   = 1
	shareCrashPerPart = 1500
	shareCrashRunners = 16
	shareCrashAccept  = 40
)

func init() { crashtest.RunChild(shareCrashEnvChild, "share crash child", shareCrashChild) }

// shareCrashChild logs "acc|hold partition offset deliveryCount" per record
// handed to its handler (one unbuffered append each, before the handler
// returns or blocks) until it is killed.
func shareCrashChild() error {
	addrs := strings.Split(os.Getenv(shareCrashEnvBrokers), ",")
	f, err := crashtest.OpenLog(os.Getenv(shareCrashEnvLog))
	if err != nil {
		return err
	}
	cl, err := NewClient(SeedBrokers(addrs...))
	if err != nil {
		return err
	}
	var (
		mu sync.Mutex
		n  int
	)
	_, err = NewShareConsumer(cl, ShareGroup("g"), SubscribeTopics("t"), Runners(shareCrashRunners),
		HandleRecord(func(ctx context.Context, r *Record) error {
			mu.Lock()
			n++
			hold := n > shareCrashAccept
			what := "acc"
			if hold {
				what = "hold"
			}
			_, werr := fmt.Fprintf(f, "%s %d %d %d\n", what, r.Partition, r.Offset, r.DeliveryCount)
			mu.Unlock()
			if werr != nil {
				fmt.Fprintln(os.Stderr, "share crash child: log write:", werr)
				os.Exit(3)
			}
			if hold {
				<-ctx.Done() // never: the process is killed first
			}
			return nil
		}))
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "share crash child: consumer running")
	select {}
}

type shareCrashEntry struct {
	hold       bool
	part, off  int64
	deliveries int64
}

// shareCrashLog reads the child's log: read appends to entries, and
// returns, the entries of the lines the child completed since the last
// read (a trailing incomplete line, none in practice since each line is
// one write, waits for a later read).
type shareCrashLog struct {
	log     *crashtest.Log
	entries []shareCrashEntry
}

func (l *shareCrashLog) read(t *testing.T) []shareCrashEntry {
	t.Helper()
	for _, line := range l.log.Poll(t) {
		fs := strings.Fields(line)
		if len(fs) != 4 || (fs[0] != "acc" && fs[0] != "hold") {
			t.Fatalf("bad log line %q", fs)
		}
		var e shareCrashEntry
		e.hold = fs[0] == "hold"
		for j, p := range []*int64{&e.part, &e.off, &e.deliveries} {
			v, err := strconv.ParseInt(fs[j+1], 10, 64)
			if err != nil {
				t.Fatalf("bad log line %q: %v", fs, err)
			}
			*p = v
		}
		l.entries = append(l.entries, e)
	}
	return l.entries
}

func TestShareCrash(t *testing.T) {
	fake := newShareFake(t, shareCrashParts, 5*time.Minute)
	pcl := shareClient(t, fake)
	produceN(t, pcl, "t", shareCrashParts, shareCrashPerPart)
	shareFromEarliest(t, pcl, "g")
	const total = shareCrashParts * shareCrashPerPart

	logPath := filepath.Join(t.TempDir(), "share-crash.log")
	childLog := &shareCrashLog{log: crashtest.NewLog(logPath)}
	proc := crashtest.Start(t, "TestShareCrash", []string{
		shareCrashEnvChild + "=1",
		shareCrashEnvBrokers + "=" + strings.Join(fake.ListenAddrs(), ","),
		shareCrashEnvLog + "=" + logPath})
	killed := false
	kill := func() {
		killed = true
		proc.Stop()
	}

	var (
		mu   sync.Mutex
		got  = map[[2]int64][]int16{}
		left = total
	)
	var log []shareCrashEntry
	// await polls cond; the child exiting early fails the test.
	await := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for !cond() {
			if !killed && proc.Exited() {
				t.Fatalf("the child exited while waiting for %s; its output:\n%s", what, proc.Output())
			}
			if time.Now().After(deadline) {
				mu.Lock()
				state := fmt.Sprintf("%d records not handled by the parent's members, %d handed to the child", left, len(log))
				mu.Unlock()
				t.Fatalf("gave up waiting for %s (%s); child output:\n%s", what, state, proc.Output())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// The child holds a record on each of its runners.
	holding := func() int {
		n := 0
		for _, e := range log {
			if e.hold {
				n++
			}
		}
		return n
	}
	await("the child to hold a record on every runner", func() bool {
		log = childLog.read(t)
		return holding() == shareCrashRunners
	})

	// The parent's members consume everything else.
	handler := HandleRecord(func(_ context.Context, r *Record) error {
		mu.Lock()
		defer mu.Unlock()
		k := [2]int64{int64(r.Partition), r.Offset}
		if len(got[k]) == 0 {
			left--
		}
		got[k] = append(got[k], r.DeliveryCount)
		return nil
	})
	members := []*ShareConsumer{newShareMember(t, fake, handler), newShareMember(t, fake, handler)}
	childGot := func() map[[2]int64]shareCrashEntry {
		m := map[[2]int64]shareCrashEntry{}
		for _, e := range log {
			m[[2]int64{e.part, e.off}] = e
		}
		return m
	}
	// Everything the child did not log: its held records stay its own;
	// the records it accepted are done (or, if the accept was still in
	// its buffer, locked by it).
	await("the other members to handle every record the child was not handed", func() bool {
		log = childLog.read(t)
		mu.Lock()
		defer mu.Unlock()
		return left <= len(childGot())
	})
	log = childLog.read(t)
	child := childGot()
	if holding() != shareCrashRunners || len(log) != len(child) {
		t.Fatalf("child log: %d records held, %d entries for %d records, want %d held and no record twice", holding(), len(log), len(child), shareCrashRunners)
	}
	mu.Lock()
	for k := range child {
		if ds := got[k]; len(ds) > 0 {
			t.Errorf("record %d@%d handed to another member (delivery counts %v) while the child held or had accepted it", k[0], k[1], ds)
		}
	}
	mu.Unlock()

	start := time.Now()
	kill()
	// The child's held records come back; those it accepted either stay
	// accepted or (accept lost with it) come back too: every record is
	// accepted once the group's start offset reaches the end.
	await("the child's records redelivered and every record accepted", func() bool {
		mu.Lock()
		for k, c := range child {
			if c.hold && len(got[k]) == 0 {
				mu.Unlock()
				return false
			}
		}
		mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		offs, err := pcl.Admin().DescribeShareGroupOffsets(ctx, "g", "t")
		if err != nil || len(offs) != shareCrashParts {
			return false
		}
		for _, o := range offs {
			if o.StartOffset != shareCrashPerPart {
				return false
			}
		}
		return true
	})
	t.Logf("child held %d records and accepted %d; all handled %v after the kill", shareCrashRunners, len(child)-shareCrashRunners, time.Since(start).Round(time.Millisecond))
	for _, sc := range members {
		closeShare(t, sc)
	}

	mu.Lock()
	defer mu.Unlock()
	redelivered := 0
	for k, ds := range got {
		c, handed := child[k]
		switch {
		case c.hold && (len(ds) != 1 || ds[0] != 2):
			t.Errorf("record %d@%d held by the killed child: delivered to the others with counts %v, want [2]", k[0], k[1], ds)
		case handed && !c.hold && (len(ds) != 1 || ds[0] != 2):
			t.Errorf("record %d@%d accepted by the child before the kill: delivered to the others with counts %v, want [2] (an accept lost with the child)", k[0], k[1], ds)
		case !handed && (len(ds) != 1 || ds[0] != 1):
			t.Errorf("record %d@%d never handed to the child: delivered with counts %v, want [1]", k[0], k[1], ds)
		}
		if handed {
			redelivered++
		}
	}
	for k, c := range child {
		if c.deliveries != 1 {
			t.Errorf("child got %d@%d with delivery count %d", k[0], k[1], c.deliveries)
		}
		if c.hold && len(got[k]) == 0 {
			t.Errorf("record %d@%d held by the killed child never redelivered", k[0], k[1])
		}
	}
	if len(got)+len(child)-redelivered != total {
		t.Errorf("handled %d distinct records, want %d", len(got)+len(child)-redelivered, total)
	}
	t.Logf("%d of the %d records the child accepted were delivered again (their accept died with it)", redelivered-shareCrashRunners, len(child)-shareCrashRunners)
	assertShareDrained(t, pcl, "g", "t", shareCrashParts, shareCrashPerPart)
}
