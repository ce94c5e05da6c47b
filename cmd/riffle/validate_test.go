package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/riffle-go/riffle/rifftest"
)

// topicPartitions returns the partition count topic list shows for topic,
// "" when it is not listed.
func topicPartitions(t *testing.T, c *rifftest.Cluster, topic string) string {
	t.Helper()
	r := on(t, c, "topic", "list")
	r.wantCode(t, 0)
	if row := findRow(tableRows(t, r.stdout, "NAME"), topic); row != nil {
		return row[1]
	}
	return ""
}

// TestValidateOnlyCommands: --validate-only on topic create, topic
// add-partitions and config set/delete reports what would happen, fails
// per item as the real command does, and changes nothing.
func TestValidateOnlyCommands(t *testing.T) {
	t.Parallel()
	c := startCluster(t)

	r := on(t, c, "topic", "create", "orders", "-p", "4", "-r", "2", "--validate-only")
	r.wantCode(t, 0)
	if r.stdout != "would create topic \"orders\"\n" || r.stderr != "" {
		t.Fatalf("validate create: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	if n := topicPartitions(t, c, "orders"); n != "" {
		t.Fatalf("validate-only create made orders (%s partitions)", n)
	}
	r = on(t, c, "topic", "create", "demo", "wide", "-r", "9", "--validate-only")
	r.wantCode(t, 1)
	if r.stdout != "" || !strings.Contains(r.stderr, `topic "demo": TOPIC_ALREADY_EXISTS`) || !strings.Contains(r.stderr, `topic "wide": INVALID_REPLICATION_FACTOR`) {
		t.Fatalf("invalid topics: stdout %q, stderr %q", r.stdout, r.stderr)
	}

	r = on(t, c, "topic", "add-partitions", "demo", "-p", "8", "--validate-only")
	r.wantCode(t, 0)
	if r.stdout != "would raise topic \"demo\" to 8 partitions\n" {
		t.Fatalf("validate add-partitions: %q", r.stdout)
	}
	if n := topicPartitions(t, c, "demo"); n != "6" {
		t.Fatalf("demo has %s partitions after a validate-only raise, want 6", n)
	}
	r = on(t, c, "topic", "add-partitions", "demo", "nope", "-p", "2", "--validate-only")
	r.wantCode(t, 1)
	if !strings.Contains(r.stderr, `topic "demo": INVALID_PARTITIONS`) || !strings.Contains(r.stderr, `topic "nope": UNKNOWN_TOPIC_OR_PARTITION`) {
		t.Fatalf("invalid raise: stderr %q", r.stderr)
	}
	r = on(t, c, "topic", "add-partitions", "demo", "-p", "8")
	r.wantCode(t, 0)
	if r.stdout != "raised topic \"demo\" to 8 partitions\n" {
		t.Fatalf("add-partitions: %q", r.stdout)
	}
	if n := topicPartitions(t, c, "demo"); n != "8" {
		t.Fatalf("demo has %s partitions after the raise, want 8", n)
	}
	on(t, c, "topic", "add-partitions", "demo").wantCode(t, 2)

	r = on(t, c, "config", "set", "--topic", "demo", "retention.ms=3600000", "--validate-only")
	r.wantCode(t, 0)
	if r.stdout != "would set retention.ms=3600000 on topic \"demo\"\n" {
		t.Fatalf("validate set: %q", r.stdout)
	}
	var cfgs []configInfo
	decode(t, on(t, c, "config", "describe", "--topic", "demo", "-o", "json"), &cfgs)
	if slices.ContainsFunc(cfgs, func(c configInfo) bool { return c.Name == "retention.ms" }) {
		t.Fatalf("validate-only set changed retention.ms: %+v", cfgs)
	}
	r = on(t, c, "config", "set", "--broker", "1", "log.retention.ms=soon", "--validate-only")
	r.wantCode(t, 1)
	if !strings.Contains(r.stderr, "broker 1: INVALID_REQUEST") {
		t.Fatalf("invalid broker value: stderr %q", r.stderr)
	}

	on(t, c, "config", "set", "--topic", "demo", "retention.ms=3600000").wantCode(t, 0)
	r = on(t, c, "config", "delete", "--topic", "demo", "retention.ms", "--validate-only")
	r.wantCode(t, 0)
	if r.stdout != "would delete retention.ms on topic \"demo\"\n" {
		t.Fatalf("validate delete: %q", r.stdout)
	}
	decode(t, on(t, c, "config", "describe", "--topic", "demo", "-o", "json"), &cfgs)
	if !slices.ContainsFunc(cfgs, func(c configInfo) bool { return c.Name == "retention.ms" && c.Value != nil && *c.Value == "3600000" }) {
		t.Fatalf("validate-only delete removed retention.ms: %+v", cfgs)
	}
	r = on(t, c, "config", "delete", "--topic", "demo", "retention.ms")
	r.wantCode(t, 0)
	if r.stdout != "deleted retention.ms on topic \"demo\"\n" {
		t.Fatalf("delete: %q", r.stdout)
	}
}

// TestClusterAuthorizedOperations: kfake without ACLs allows everything,
// so every cluster operation it knows is reported.
func TestClusterAuthorizedOperations(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	want := []string{"READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE"}

	r := on(t, c, "cluster", "--authorized-operations")
	r.wantCode(t, 0)
	if line := "Authorized:  " + strings.Join(want, ", ") + "\n"; !strings.Contains(r.stdout, line) {
		t.Fatalf("no %q in\n%s", line, r.stdout)
	}
	if len(tableRows(t, r.stdout, "ID")) != 3 {
		t.Fatalf("broker table lost:\n%s", r.stdout)
	}
	r = on(t, c, "cluster")
	r.wantCode(t, 0)
	if strings.Contains(r.stdout, "Authorized:") {
		t.Fatalf("operations shown without the flag:\n%s", r.stdout)
	}

	var cl clusterJSON
	decode(t, on(t, c, "cluster", "--authorized-operations", "-o", "json"), &cl)
	if cl.AuthorizedOperations == nil || !slices.Equal(*cl.AuthorizedOperations, want) {
		t.Fatalf("JSON authorized_operations = %v", cl.AuthorizedOperations)
	}
	r = on(t, c, "cluster", "-o", "json")
	r.wantCode(t, 0)
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["authorized_operations"]; ok {
		t.Fatalf("authorized_operations without the flag: %s", r.stdout)
	}
}
