package process_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/internal/crashtest"
	"github.com/riffle-go/riffle/internal/track"
	"github.com/riffle-go/riffle/process"
	"github.com/riffle-go/riffle/rifftest"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Crash safety: a child process (this test binary, re-executed) runs an
// Unordered processor and logs every record its handler finished; the
// parent SIGKILLs it at random points and checks, against the log, that the
// group's commits (offset + metadata) never covered a record that did not
// finish, and that only records uncovered at a kill ran again.

const (
	crashEnvChild   = "RIFFLE_PROCESS_CRASH_CHILD"
	crashEnvBrokers = "RIFFLE_PROCESS_CRASH_BROKERS"
	crashEnvGroup   = "RIFFLE_PROCESS_CRASH_GROUP"
	crashEnvTopic   = "RIFFLE_PROCESS_CRASH_TOPIC"
	crashEnvLog     = "RIFFLE_PROCESS_CRASH_LOG"

	crashParts   = 4
	crashPerPart = 12500
	crashKills   = 5
)

// init runs before TestMain (and so before goleak): in child mode the
// process is a crash child and never returns to the test machinery.
func init() { crashtest.RunChild(crashEnvChild, "crash child", crashChild) }

// crashChild processes the topic and logs "partition offset\n" per finished
// record, with one unbuffered append per record, until it is killed.
func crashChild() error {
	addrs := strings.Split(os.Getenv(crashEnvBrokers), ",")
	group, topic := os.Getenv(crashEnvGroup), os.Getenv(crashEnvTopic)
	f, err := crashtest.OpenLog(os.Getenv(crashEnvLog))
	if err != nil {
		return err
	}
	var mu sync.Mutex
	h := func(_ context.Context, r *riffle.Record) error {
		time.Sleep(time.Duration(rand.IntN(5001)) * time.Microsecond)
		line := []byte(strconv.Itoa(int(r.Partition)) + " " + strconv.FormatInt(r.Offset, 10) + "\n")
		mu.Lock()
		defer mu.Unlock()
		if _, err := f.Write(line); err != nil {
			fmt.Fprintln(os.Stderr, "crash child: log write:", err)
			os.Exit(3)
		}
		return nil
	}
	cl, err := riffle.NewClient(riffle.SeedBrokers(addrs...))
	if err != nil {
		return err
	}
	_, err = process.New(cl, h,
		process.Ordering(process.Unordered), process.Concurrency(64),
		process.OnError(func(err error) { fmt.Fprintln(os.Stderr, "crash child: processor error:", err) }),
		process.ConsumerOptions(
			riffle.ConsumerGroup(group), riffle.SubscribeTopics(topic),
			riffle.OffsetReset(riffle.ResetEarliest),
			riffle.AutoCommitInterval(100*time.Millisecond),
			riffle.SessionTimeout(time.Second), riffle.HeartbeatInterval(100*time.Millisecond),
			riffle.RebalanceTimeout(time.Second), riffle.RevokeTimeout(500*time.Millisecond),
			riffle.FetchMaxWait(100*time.Millisecond),
		))
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "crash child: processor running")
	for {
		time.Sleep(time.Hour)
	}
}

// crashLog reads the child log incrementally.
type crashLog struct {
	log   *crashtest.Log
	lines [][2]int64 // partition, offset
}

func (l *crashLog) poll(t *testing.T) {
	t.Helper()
	for _, line := range l.log.Poll(t) {
		var p, o int64
		if _, err := fmt.Sscanf(line, "%d %d", &p, &o); err != nil {
			t.Fatalf("bad log line %q: %v", line, err)
		}
		if p < 0 || p >= crashParts || o < 0 || o >= crashPerPart {
			t.Fatalf("log line %q names no produced record", line)
		}
		l.lines = append(l.lines, [2]int64{p, o})
	}
}

// covered is a commit state: per partition, every offset below the
// committed offset plus the finished offsets listed in the metadata.
type crashCovered struct {
	committed [crashParts]int64
	above     [crashParts]map[int64]bool
}

func (c *crashCovered) has(p int, o int64) bool { return o < c.committed[p] || c.above[p][o] }

func TestCrashSafety(t *testing.T) {
	const topic, group = "crash", "g-crash"
	c, cl := setup(t, rifftest.Topic(topic, crashParts),
		rifftest.KfakeOption(kfake.GroupMinSessionTimeout(100*time.Millisecond)))
	start := time.Now()
	produce(t, cl, topic, crashParts, crashPerPart, nil)
	t.Logf("produced %d records in %v", crashParts*crashPerPart, time.Since(start).Round(time.Millisecond))

	logPath := filepath.Join(t.TempDir(), "processed.log")
	log := &crashLog{log: crashtest.NewLog(logPath)}
	env := []string{
		crashEnvChild + "=1",
		crashEnvBrokers + "=" + strings.Join(c.Addrs(), ","),
		crashEnvGroup + "=" + group,
		crashEnvTopic + "=" + topic,
		crashEnvLog + "=" + logPath,
	}

	var cur *crashtest.Child
	startChild := func() { cur = crashtest.Start(t, "TestCrashSafety", env) }
	killChild := func() {
		cur.Kill(t)
		cur = nil
	}
	// waitLog polls the log until cond holds. It gives up after a generous
	// timeout, or when the log stops growing for a long while (a child
	// whose commits skipped records has nothing left to do): fatal runs
	// fail at once with the child's output, the final run reports it and
	// goes on to the checks, which name the records that went missing.
	waitLog := func(run int, what string, fatal bool, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		lastLen, lastGrew := len(log.lines), time.Now()
		for {
			log.poll(t)
			if cond() {
				return
			}
			if len(log.lines) != lastLen {
				lastLen, lastGrew = len(log.lines), time.Now()
			}
			if now := time.Now(); now.After(deadline) || now.Sub(lastGrew) > 15*time.Second {
				out := cur.Output()
				killChild()
				if fatal {
					t.Fatalf("run %d: timed out waiting for %s (log has %d lines); child output:\n%s", run, what, len(log.lines), out)
				}
				t.Errorf("run %d: timed out waiting for %s (log has %d lines); child output:\n%s", run, what, len(log.lines), out)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	fetch := func(k int) *crashCovered {
		t.Helper()
		// A commit the child wrote just before the kill may still be in
		// the broker's socket buffer: give it a moment to land. (Reading
		// an older state would only weaken the checks, not break them.)
		time.Sleep(100 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		offs, err := cl.Admin().FetchOffsets(ctx, group)
		if err != nil {
			t.Fatalf("kill %d: fetching offsets: %v", k, err)
		}
		cv := &crashCovered{}
		for p := range crashParts {
			cv.committed[p] = -1
			cv.above[p] = map[int64]bool{}
			om, ok := offs[riffle.TopicPartition{Topic: topic, Partition: int32(p)}]
			if !ok {
				continue
			}
			cv.committed[p] = om.Offset
			if om.Offset < 0 {
				continue
			}
			fin, err := track.Decode(om.Offset, om.Metadata)
			if err != nil {
				t.Fatalf("kill %d: partition %d: decoding metadata %q at %d: %v", k, p, om.Metadata, om.Offset, err)
			}
			for _, o := range fin {
				if o <= om.Offset {
					t.Fatalf("kill %d: partition %d: metadata lists %d at or below the committed offset %d", k, p, o, om.Offset)
				}
				cv.above[p][o] = true
			}
		}
		return cv
	}

	var (
		states [crashKills + 1]*crashCovered // C_k: commit state right after kill k
		bounds [crashKills + 1]int           // log length at kill k
	)
	for k := range crashKills {
		startChild()
		began := len(log.lines)
		want := began + 1000 + rand.IntN(7001)
		runStart := time.Now()
		waitLog(k, fmt.Sprintf("%d new log lines", want-began), true, func() bool { return len(log.lines) >= want })
		killChild()
		log.poll(t)
		bounds[k] = len(log.lines)
		states[k] = fetch(k)
		n := 0
		for p := range crashParts {
			n += len(states[k].above[p])
		}
		t.Logf("run %d: killed after %d lines (target %d) in %v; commits %v, %d finished above",
			k, bounds[k]-began, want-began, time.Since(runStart).Round(time.Millisecond), states[k].committed, n)
	}

	// Final run: until every record was logged at least once.
	seen := make([][]bool, crashParts)
	for p := range seen {
		seen[p] = make([]bool, crashPerPart)
	}
	missing, scanned := crashParts*crashPerPart, 0
	startChild()
	runStart := time.Now()
	waitLog(crashKills, "every record", false, func() bool {
		for ; scanned < len(log.lines); scanned++ {
			l := log.lines[scanned]
			if !seen[l[0]][l[1]] {
				seen[l[0]][l[1]] = true
				missing--
			}
		}
		return missing == 0
	})
	if cur != nil {
		killChild()
	}
	log.poll(t)
	bounds[crashKills] = len(log.lines)
	states[crashKills] = fetch(crashKills)
	t.Logf("run %d: %d lines until every record was logged, in %v; commits %v",
		crashKills, bounds[crashKills]-bounds[crashKills-1], time.Since(runStart).Round(time.Millisecond), states[crashKills].committed)

	// runs[p][o]: the runs that logged the record, in log order.
	runs := make([][][]int8, crashParts)
	for p := range runs {
		runs[p] = make([][]int8, crashPerPart)
	}
	run := 0
	for i, l := range log.lines {
		for run < crashKills && i >= bounds[run] {
			run++
		}
		runs[l[0]][l[1]] = append(runs[l[0]][l[1]], int8(run))
	}

	// Violations are counted per check; the first few are printed.
	var violations [4]int
	violate := func(check int, format string, args ...any) {
		t.Helper()
		if violations[check]++; violations[check] <= 20 {
			t.Errorf("check %d: "+format, append([]any{check}, args...)...)
		}
	}

	// (1) Every record was processed at least once.
	for p := range crashParts {
		for o := range crashPerPart {
			if len(runs[p][o]) == 0 {
				violate(1, "record %d@%d was never processed", p, o)
			}
		}
	}

	// (2) Commits never cover unfinished work: at kill k, every covered
	// record was logged in some run ≤ k.
	for k, cv := range states {
		for p := range crashParts {
			if cv.committed[p] > crashPerPart {
				violate(2, "kill %d: partition %d committed at %d, past the end %d", k, p, cv.committed[p], crashPerPart)
			}
			check := func(o int64) {
				if o >= crashPerPart {
					violate(2, "kill %d: partition %d: metadata covers %d, past the end", k, p, o)
					return
				}
				switch rs := runs[p][o]; {
				case len(rs) == 0:
					violate(2, "kill %d: record %d@%d covered by the commit but never finished", k, p, o)
				case int(rs[0]) > k:
					violate(2, "kill %d: record %d@%d covered by the commit but first finished in run %d", k, p, o, rs[0])
				}
			}
			for o := int64(0); o < min(cv.committed[p], crashPerPart); o++ {
				check(o)
			}
			for o := range cv.above[p] {
				check(o)
			}
		}
	}

	// (3) A record that ran again in run j after an earlier run was not
	// covered at kill j−1 (it was running, or finished but not yet
	// committed, when the child died).
	var dupAfterKill [crashKills]int // records rerun in run k+1
	sameRun := 0                     // records logged twice within one run
	for p := range crashParts {
		for o := range crashPerPart {
			rs := runs[p][o]
			for i := 1; i < len(rs); i++ {
				j := int(rs[i])
				if j == int(rs[i-1]) {
					sameRun++
					continue
				}
				dupAfterKill[j-1]++
				if states[j-1].has(p, int64(o)) {
					violate(3, "record %d@%d ran in run %d and again in run %d although the commit at kill %d covered it (committed %d)",
						p, o, rs[0], j, j-1, states[j-1].committed[p])
				}
			}
		}
	}
	total := 0
	for k, n := range dupAfterKill {
		total += n
		t.Logf("kill %d: %d record(s) ran again in run %d", k, n, k+1)
	}
	for check, n := range violations {
		if n > 0 {
			t.Errorf("check %d: %d violation(s)", check, n)
		}
	}
	t.Logf("duplicates: %d across kills, %d within a run; %d log lines for %d records; total %v",
		total, sameRun, len(log.lines), crashParts*crashPerPart, time.Since(start).Round(time.Millisecond))
}
