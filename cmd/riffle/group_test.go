package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/rifftest"
)

// The test group "svc" consumes topic demo (6 partitions of groupRecords
// records) and stops at groupStop on every partition, then commits: it
// lags groupRecords-groupStop records per partition.
const (
	groupRecords = 10
	groupStop    = 4
)

// newGroupClient returns a client of c, closed when the test ends.
func newGroupClient(t *testing.T, c *rifftest.Cluster, opts ...riffle.Option) *riffle.Client {
	t.Helper()
	cl, err := riffle.NewClient(append([]riffle.Option{riffle.SeedBrokers(c.Addrs()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// startGroup fills demo and starts the group "svc" on its own client. It
// returns once the group committed its stop offsets; the returned func
// closes the consumer (the group then becomes Empty).
func startGroup(t *testing.T, c *rifftest.Cluster) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := riffle.NewProducer(newGroupClient(t, c), riffle.WithPartitioner(riffle.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	var recs []*riffle.Record
	for part := int32(0); part < 6; part++ {
		for i := 0; i < groupRecords; i++ {
			recs = append(recs, &riffle.Record{Topic: "demo", Partition: part, Value: []byte(fmt.Sprint(i))})
		}
	}
	if err := p.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	stopped := map[int32]bool{}
	done := make(chan struct{})
	cs, err := riffle.NewConsumer(newGroupClient(t, c, riffle.ClientID("svc-client")),
		riffle.ConsumerGroup("svc"), riffle.SubscribeTopics("demo"), riffle.OffsetReset(riffle.ResetEarliest),
		riffle.DisableAutoCommit(), riffle.HeartbeatInterval(200*time.Millisecond),
		riffle.HandleRecord(func(_ context.Context, r *riffle.Record) error {
			if r.Offset >= groupStop {
				return errors.New("stop")
			}
			return nil
		}),
		riffle.OnPartitionError(func(pe *riffle.PartitionError) {
			mu.Lock()
			defer mu.Unlock()
			if !stopped[pe.Partition] {
				stopped[pe.Partition] = true
				if len(stopped) == 6 {
					close(done)
				}
			}
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			// Every partition was stopped on purpose (and so
			// reported); anything else is a failure.
			_, err := cs.Close(context.Background())
			var se *riffle.StoppedPartitionsError
			if err != nil && (!errors.As(err, &se) || err != error(se)) {
				t.Errorf("closing the consumer: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the group did not reach its stop offsets")
	}
	if err := cs.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return stop
}

// committed returns the group's committed offsets on demo, by partition.
func committed(t *testing.T, c *rifftest.Cluster, group string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := newGroupClient(t, c).Admin().FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for tp, om := range got {
		if tp.Topic == "demo" {
			out[tp.Partition] = om.Offset
		}
	}
	return out
}

func allPartitions(o int64) map[int32]int64 {
	out := map[int32]int64{}
	for p := int32(0); p < 6; p++ {
		out[p] = o
	}
	return out
}

func TestGroupCommands(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	stopConsumer := startGroup(t, c)

	// list
	r := on(t, c, "group", "list")
	r.wantCode(t, 0)
	if got, want := findRow(tableRows(t, r.stdout, "GROUP"), "svc"), []string{"svc", "Stable", "consumer"}; !equalFields(got, want) {
		t.Fatalf("list row = %q, want %q", got, want)
	}

	// describe: the JSON gives the member id the other views must show.
	var descs []groupDescriptionJSON
	decode(t, on(t, c, "group", "describe", "svc", "-o", "json"), &descs)
	if len(descs) != 1 || descs[0].State != "Stable" || descs[0].ProtocolType != "consumer" || descs[0].Protocol == "" ||
		descs[0].Coordinator < 0 || len(descs[0].Members) != 1 || descs[0].Error != "" {
		t.Fatalf("describe JSON = %+v", descs)
	}
	m := descs[0].Members[0]
	if m.MemberID == "" || m.ClientID != "svc-client" || len(m.Assigned) != 1 || fmt.Sprint(m.Assigned["demo"]) != "[0 1 2 3 4 5]" {
		t.Fatalf("member JSON = %+v", m)
	}
	member := m.MemberID

	r = on(t, c, "group", "describe", "svc")
	r.wantCode(t, 0)
	for _, want := range []string{"Group:          svc\n", "State:          Stable\n", "Protocol type:  consumer\n", "Members:        1\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("describe output lacks %q", want)
		}
	}
	if row := findRow(tableRows(t, r.stdout, "MEMBER"), member); len(row) != 5 || row[1] != "svc-client" || row[3] != "-" || row[4] != "demo:0,1,2,3,4,5" {
		t.Errorf("member row = %q", row)
	}

	// lag, as a table and as JSON
	r = on(t, c, "group", "lag", "svc")
	r.wantCode(t, 0)
	rows := tableRows(t, r.stdout, "TOPIC")
	if len(rows) != 6 {
		t.Fatalf("%d lag rows, want 6", len(rows))
	}
	for p, row := range rows {
		want := []string{"demo", fmt.Sprint(p), fmt.Sprint(groupStop), fmt.Sprint(groupRecords), fmt.Sprint(groupRecords - groupStop), member}
		if !equalFields(row, want) {
			t.Errorf("lag row %d = %q, want %q", p, row, want)
		}
	}
	if want := fmt.Sprintf("Total lag:  %d (6 of 6 partitions)\n", 6*(groupRecords-groupStop)); !strings.HasSuffix(r.stdout, want) {
		t.Errorf("lag output does not end with %q", want)
	}
	var lag groupLagJSON
	decode(t, on(t, c, "group", "lag", "svc", "-o", "json"), &lag)
	if lag.Group != "svc" || lag.TotalLag != 6*(groupRecords-groupStop) || len(lag.Partitions) != 6 {
		t.Fatalf("lag JSON = %+v", lag)
	}
	for _, p := range lag.Partitions {
		if p.Committed == nil || *p.Committed != groupStop || p.HighWatermark == nil || *p.HighWatermark != groupRecords ||
			p.Lag == nil || *p.Lag != groupRecords-groupStop || p.Member != member || p.Error != "" {
			t.Errorf("partition lag JSON = %+v", p)
		}
	}

	// While the member lives: a dry run warns, --execute and delete fail.
	r = on(t, c, "group", "reset", "svc", "--to", "earliest")
	r.wantCode(t, 0)
	if !strings.Contains(r.stdout, `Dry run: group "svc" would be reset to earliest`) || !strings.Contains(r.stderr, `warning: group "svc" is Stable`) {
		t.Errorf("dry run on a live group: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	checkReset(t, r.stdout, groupStop, 0)
	if got := committed(t, c, "svc"); !maps.Equal(got, allPartitions(groupStop)) {
		t.Fatalf("the dry run changed the offsets: %v", got)
	}
	r = on(t, c, "group", "reset", "svc", "--to", "earliest", "--execute")
	r.wantCode(t, 1)
	if !strings.HasPrefix(r.stderr, "riffle: consumer group is active: ") || !strings.Contains(r.stderr, "nothing was reset") || r.stdout != "" {
		t.Errorf("reset of a live group: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	r = on(t, c, "group", "delete", "svc")
	r.wantCode(t, 1)
	if !strings.HasPrefix(r.stderr, `riffle: group "svc": NON_EMPTY_GROUP`) || r.stdout != "" {
		t.Errorf("delete of a live group: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	if got := committed(t, c, "svc"); !maps.Equal(got, allPartitions(groupStop)) {
		t.Fatalf("refused commands changed the offsets: %v", got)
	}

	// Once the member is gone, resets apply.
	stopConsumer()
	r = on(t, c, "group", "reset", "svc", "--to", "2", "--execute")
	r.wantCode(t, 0)
	if !strings.HasPrefix(r.stdout, `Reset group "svc" to offset 2:`) || r.stderr != "" {
		t.Errorf("reset: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	checkReset(t, r.stdout, groupStop, 2)
	if got := committed(t, c, "svc"); !maps.Equal(got, allPartitions(2)) {
		t.Fatalf("after reset to 2: %v", got)
	}

	var res groupResetJSON
	decode(t, on(t, c, "group", "reset", "svc", "--to", "latest", "--topic", "demo", "--execute", "-o", "json"), &res)
	if res.Group != "svc" || res.To != "latest" || !res.Executed || len(res.Partitions) != 6 {
		t.Fatalf("reset JSON = %+v", res)
	}
	for i, p := range res.Partitions {
		if p.Topic != "demo" || p.Partition != int32(i) || p.Current == nil || *p.Current != 2 || p.New != groupRecords {
			t.Errorf("partition reset JSON = %+v", p)
		}
	}
	if got := committed(t, c, "svc"); !maps.Equal(got, allPartitions(groupRecords)) {
		t.Fatalf("after reset to latest: %v", got)
	}

	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	r = on(t, c, "group", "reset", "svc", "--to", past)
	r.wantCode(t, 0)
	if !strings.Contains(r.stdout, "would be reset to "+past) || r.stderr != "" {
		t.Errorf("dry run to a time: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	checkReset(t, r.stdout, groupRecords, 0)

	r = on(t, c, "group", "lag", "svc")
	r.wantCode(t, 0)
	for p, row := range tableRows(t, r.stdout, "TOPIC") {
		if want := []string{"demo", fmt.Sprint(p), fmt.Sprint(groupRecords), fmt.Sprint(groupRecords), "0", "-"}; !equalFields(row, want) {
			t.Errorf("lag row %d after reset = %q, want %q", p, row, want)
		}
	}

	// The empty group is described; an unknown one fails on its own.
	r = on(t, c, "group", "describe", "svc", "nope")
	r.wantCode(t, 1)
	if !strings.Contains(r.stdout, "State:          Empty\n") || strings.Contains(r.stdout, "nope") {
		t.Errorf("describe stdout = %q", r.stdout)
	}
	if !strings.HasPrefix(r.stderr, `riffle: group "nope": GROUP_ID_NOT_FOUND`) || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("describe stderr = %q", r.stderr)
	}
	var list []groupListingJSON
	decode(t, on(t, c, "group", "list", "-o", "json"), &list)
	if len(list) != 1 || list[0] != (groupListingJSON{Group: "svc", State: "Empty", ProtocolType: "consumer"}) {
		t.Errorf("list JSON = %+v", list)
	}

	// delete
	r = on(t, c, "group", "delete", "svc", "nope")
	r.wantCode(t, 1)
	if r.stdout != "deleted group \"svc\"\n" {
		t.Errorf("delete stdout = %q", r.stdout)
	}
	if !strings.HasPrefix(r.stderr, `riffle: group "nope": GROUP_ID_NOT_FOUND`) || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("delete stderr = %q", r.stderr)
	}
	r = on(t, c, "group", "list")
	r.wantCode(t, 0)
	if rows := tableRows(t, r.stdout, "GROUP"); len(rows) != 0 {
		t.Errorf("groups listed after delete: %q", rows)
	}
	r = on(t, c, "group", "lag", "svc")
	r.wantCode(t, 1)
	if !strings.Contains(r.stderr, "GROUP_ID_NOT_FOUND") || r.stdout != "" {
		t.Errorf("lag of a deleted group: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	// Nothing to reset without offsets or --topic.
	r = on(t, c, "group", "reset", "svc", "--to", "earliest")
	r.wantCode(t, 1)
	if !strings.Contains(r.stderr, "no committed offsets to reset") {
		t.Errorf("reset of a group without offsets: stderr %q", r.stderr)
	}
}

// checkReset checks the CURRENT and NEW columns of a reset table.
func checkReset(t *testing.T, out string, current, next int64) {
	t.Helper()
	rows := tableRows(t, out, "TOPIC")
	if len(rows) != 6 {
		t.Fatalf("%d reset rows, want 6", len(rows))
	}
	for p, row := range rows {
		if want := []string{"demo", fmt.Sprint(p), fmt.Sprint(current), fmt.Sprint(next)}; !equalFields(row, want) {
			t.Errorf("reset row %d = %q, want %q", p, row, want)
		}
	}
}

func equalFields(got, want []string) bool {
	return fmt.Sprintf("%q", got) == fmt.Sprintf("%q", want)
}

func TestGroupUsageErrors(t *testing.T) {
	t.Parallel()
	dead := "127.0.0.1:1" // a usage error must be found before dialing
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"group", "lst"}, `unknown command "lst" for "riffle group" (did you mean "list"?)`},
		{[]string{"group", "list", "extra"}, `unknown command "extra"`},
		{[]string{"group", "describe"}, "requires at least 1 arg"},
		{[]string{"group", "describe", "g", "g"}, `group "g" given twice`},
		{[]string{"group", "describe", ""}, "empty group name"},
		{[]string{"group", "delete"}, "requires at least 1 arg"},
		{[]string{"group", "lag"}, "accepts 1 arg(s), received 0"},
		{[]string{"group", "lag", "a", "b"}, "accepts 1 arg(s), received 2"},
		{[]string{"group", "lag", "g", "-o", "yaml"}, "want table or json"},
		{[]string{"group", "reset", "g"}, "--to is required"},
		{[]string{"group", "reset", "g", "--to", "-1"}, "--to -1: offsets are not negative"},
		{[]string{"group", "reset", "g", "--to", "yesterday"}, `--to "yesterday": want earliest, latest, an offset or an RFC 3339 time`},
		{[]string{"group", "reset", "g", "--to", "earliest", "--topic", "a", "-t", "a"}, `topic "a" given twice`},
		{[]string{"group", "reset", "g", "--to", "earliest", "--topic", ""}, "--topic is empty"},
		{[]string{"group", "reset", "--to", "earliest"}, "accepts 1 arg(s), received 0"},
	} {
		r := runRiffle(t, append([]string{"--brokers", dead, "--timeout", "5s"}, tc.args...)...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, "riffle: ") || !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, "--help' for usage.") || r.stdout != "" {
			t.Errorf("riffle %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, r.code, r.stdout, r.stderr, tc.want)
		}
	}
}

// Against the embedded cluster (no --brokers) there are no groups yet.
func TestGroupListEmbedded(t *testing.T) {
	t.Setenv(envBrokers, "")
	r := runRiffle(t, "group", "list", "-o", "json")
	r.wantCode(t, 0)
	if strings.TrimSpace(r.stdout) != "[]" || !strings.Contains(r.stderr, "started an embedded") {
		t.Errorf("stdout %q, stderr %q", r.stdout, r.stderr)
	}
}

// A group with members but nothing committed: the total lag is unknown,
// not 0.
func TestGroupLagNothingCommitted(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	cs, err := riffle.NewConsumer(newGroupClient(t, c), riffle.ConsumerGroup("idle"), riffle.SubscribeTopics("demo"),
		riffle.HandleRecord(func(context.Context, *riffle.Record) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	deadline := time.Now().Add(20 * time.Second)
	var r result
	for {
		r = on(t, c, "group", "lag", "idle")
		if r.code == 0 && len(tableRows(t, r.stdout, "TOPIC")) == 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the member never showed up on 6 partitions")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if strings.Contains(r.stdout, "Total lag:  0") || !strings.Contains(r.stdout, "Total lag:  unknown (none of 6 partitions has a committed offset") {
		t.Errorf("lag output:\n%s", r.stdout)
	}
}
