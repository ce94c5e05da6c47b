package integration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/internal/kafkatest"
)

var cliBuild struct {
	once sync.Once
	path string
	err  error
}

// riffleCLI builds cmd/riffle (its own module, in the repository's
// workspace) once per test binary and returns the binary's path.
func riffleCLI(t *testing.T) string {
	t.Helper()
	cliBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "riffle-cli-")
		if err != nil {
			cliBuild.err = err
			return
		}
		cliBuild.path = filepath.Join(dir, "riffle")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", cliBuild.path, ".")
		cmd.Dir = filepath.Join("..", "..", "..", "cmd", "riffle")
		if out, err := cmd.CombinedOutput(); err != nil {
			cliBuild.err = fmt.Errorf("go build ./cmd/riffle: %v: %s", err, out)
		}
	})
	if cliBuild.err != nil {
		t.Fatal(cliBuild.err)
	}
	return cliBuild.path
}

// cliLag is what `riffle group lag -o json` prints.
type cliLag struct {
	Group      string `json:"group"`
	Partitions []struct {
		Topic         string `json:"topic"`
		Partition     int32  `json:"partition"`
		Committed     *int64 `json:"committed"`
		HighWatermark *int64 `json:"high_watermark"`
		Lag           *int64 `json:"lag"`
		Error         string `json:"error"`
	} `json:"partitions"`
	TotalLag int64 `json:"total_lag"`
}

// lagRow is one partition's committed offset, end and lag.
type lagRow struct{ committed, end, lag int64 }

// javaGroupLag runs Kafka's own kafka-consumer-groups
// (ConsumerGroupCommand --describe) and returns its CURRENT-OFFSET,
// LOG-END-OFFSET and LAG columns for topic.
func javaGroupLag(t *testing.T, group, topic string) map[int32]lagRow {
	t.Helper()
	ctx := timeout(t, 2*time.Minute)
	libs, err := kafkatest.Libs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-cp", filepath.Join(libs, "*"), "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
		"--bootstrap-server", strings.Join(env.addrs, ","), "--describe", "--group", group)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kafka-consumer-groups --describe: %v: %s %s", err, stdout.String(), stderr.String())
	}
	out := map[int32]lagRow{}
	var cols map[string]int
	for line := range strings.Lines(stdout.String()) {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "GROUP" {
			cols = map[string]int{}
			for i, c := range f {
				cols[c] = i
			}
			continue
		}
		if cols == nil || len(f) < len(cols)-3 || f[0] != group || f[cols["TOPIC"]] != topic {
			continue
		}
		num := func(c string) int64 {
			n, err := strconv.ParseInt(f[cols[c]], 10, 64)
			if err != nil {
				t.Fatalf("kafka-consumer-groups %s in %q: %v", c, line, err)
			}
			return n
		}
		out[int32(num("PARTITION"))] = lagRow{num("CURRENT-OFFSET"), num("LOG-END-OFFSET"), num("LAG")}
	}
	if len(out) == 0 {
		t.Fatalf("kafka-consumer-groups printed no partition of %s: %s", topic, stdout.String())
	}
	return out
}

// `riffle group lag` (cmd/riffle, through Admin.GroupLag) against the
// broker's own view, once the group is idle with a known lag: the
// committed offsets (Admin.FetchOffsets), the partition ends
// (Admin.ListOffsets) and Kafka's kafka-consumer-groups --describe agree
// with it exactly, partition by partition, and each partition's lag is
// what was produced after the commit.
func TestGroupLagMatchesBroker(t *testing.T) {
	for _, proto := range groupProtocols {
		t.Run(proto.name, func(t *testing.T) {
			need(t)
			if !supports848(t, proto.p) {
				return
			}
			f := newGroupFixture(t, 3)
			cli := riffleCLI(t)
			f.produce(90)
			var cb callbacks
			c := f.member(proto.p, client(t), &cb)
			f.handledAll("the member")
			if _, err := c.Close(f.ctx); err != nil { // commits
				t.Fatal(err)
			}
			f.committedAtEnd()
			// Lag 5, 10 and 15 on partitions 0, 1, 2.
			extra := map[int32]int{0: 5, 1: 10, 2: 15}
			for p, n := range extra {
				var recs []*riffle.Record
				for range n {
					recs = append(recs, &riffle.Record{Topic: f.topic, Partition: p, Value: []byte("late")})
				}
				if err := f.p.ProduceSync(f.ctx, recs...); err != nil {
					t.Fatal(err)
				}
			}
			end := endOffsets(t, f.admin, f.topic)
			committed, err := f.admin.Admin().FetchOffsets(f.ctx, f.group)
			if err != nil {
				t.Fatal(err)
			}
			admin := map[int32]lagRow{}
			for p, e := range end {
				co := committed[riffle.TopicPartition{Topic: f.topic, Partition: p}].Offset
				admin[p] = lagRow{co, e, e - co}
				if e-co != int64(extra[p]) {
					t.Errorf("Admin: %s[%d] committed %d end %d: lag %d, want %d", f.topic, p, co, e, e-co, extra[p])
				}
			}

			cmd := exec.CommandContext(f.ctx, cli, "group", "lag", f.group, "-o", "json", "--brokers", strings.Join(env.addrs, ","))
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("riffle group lag: %v: %s", err, stderr.String())
			}
			var got cliLag
			if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
				t.Fatalf("riffle group lag -o json: %v: %s", err, stdout.String())
			}
			cliRows := map[int32]lagRow{}
			for _, p := range got.Partitions {
				if p.Topic != f.topic || p.Error != "" || p.Committed == nil || p.HighWatermark == nil || p.Lag == nil {
					t.Errorf("riffle group lag row %+v", p)
					continue
				}
				cliRows[p.Partition] = lagRow{*p.Committed, *p.HighWatermark, *p.Lag}
			}
			java := javaGroupLag(t, f.group, f.topic)
			t.Logf("per partition (committed, end, lag): admin %v, riffle group lag %v (total %d), kafka-consumer-groups %v", admin, cliRows, got.TotalLag, java)
			if fmt.Sprint(cliRows) != fmt.Sprint(admin) {
				t.Errorf("riffle group lag %v, Admin %v", cliRows, admin)
			}
			if fmt.Sprint(java) != fmt.Sprint(admin) {
				t.Errorf("kafka-consumer-groups %v, Admin %v", java, admin)
			}
			if got.TotalLag != 30 {
				t.Errorf("riffle group lag total %d, want 30", got.TotalLag)
			}
		})
	}
}
