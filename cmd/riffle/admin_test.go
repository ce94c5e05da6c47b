package main

import (
	"slices"
	"strings"
	"testing"
)

func TestACLCommands(t *testing.T) {
	t.Parallel()
	c := startCluster(t)

	r := on(t, c, "acl", "create", "--resource-type", "topic", "--resource", "orders", "--principal", "User:alice",
		"--operation", "read", "--operation", "describe")
	r.wantCode(t, 0)
	if want := "created ACL (TOPIC:LITERAL:orders, User:alice@*, READ ALLOW)\ncreated ACL (TOPIC:LITERAL:orders, User:alice@*, DESCRIBE ALLOW)\n"; r.stdout != want {
		t.Fatalf("create: %q", r.stdout)
	}
	r = on(t, c, "acl", "create", "--resource-type", "group", "--resource", "bill", "--pattern", "prefixed",
		"--principal", "User:bob", "--operation", "read", "--permission", "deny")
	r.wantCode(t, 0)

	r = on(t, c, "acl", "list")
	r.wantCode(t, 0)
	rows := tableRows(t, r.stdout, "RESOURCE-TYPE")
	if len(rows) != 3 || !slices.Equal(rows[2], []string{"GROUP", "bill", "PREFIXED", "User:bob", "*", "READ", "DENY"}) {
		t.Fatalf("list rows: %q", rows)
	}
	var acls []aclJSON
	r = on(t, c, "acl", "list", "--principal", "User:alice", "-o", "json")
	r.wantCode(t, 0)
	decode(t, r, &acls)
	if len(acls) != 2 || acls[0].Resource != "orders" || acls[0].Operation != "READ" {
		t.Fatalf("json: %+v", acls)
	}

	// Usage errors: a bad enum, a missing flag, delete without a filter.
	on(t, c, "acl", "create", "--resource-type", "tpoic", "--resource", "x", "--principal", "User:a", "--operation", "read").wantCode(t, 2)
	on(t, c, "acl", "create", "--resource-type", "topic", "--resource", "x", "--operation", "read").wantCode(t, 2)
	r = on(t, c, "acl", "delete")
	r.wantCode(t, 2)
	if !strings.Contains(r.stderr, "--all") {
		t.Fatalf("delete without a filter: %q", r.stderr)
	}

	r = on(t, c, "acl", "delete", "--principal", "User:alice", "--operation", "read")
	r.wantCode(t, 0)
	if r.stdout != "deleted ACL (TOPIC:LITERAL:orders, User:alice@*, READ ALLOW)\n" {
		t.Fatalf("delete: %q", r.stdout)
	}
	r = on(t, c, "acl", "list", "-o", "json")
	r.wantCode(t, 0)
	decode(t, r, &acls)
	if len(acls) != 2 {
		t.Fatalf("after delete: %+v", acls)
	}
}

func TestConfigCommands(t *testing.T) {
	t.Parallel()
	c := startCluster(t)

	r := on(t, c, "config", "set", "--topic", "demo", "retention.ms=3600000", "cleanup.policy=compact")
	r.wantCode(t, 0)
	r = on(t, c, "config", "describe", "--topic", "demo")
	r.wantCode(t, 0)
	rows := tableRows(t, r.stdout, "NAME")
	if got := findRow(rows, "retention.ms"); len(got) < 2 || got[1] != "3600000" {
		t.Fatalf("retention.ms row %q in\n%s", got, r.stdout)
	}
	r = on(t, c, "config", "delete", "--topic", "demo", "retention.ms")
	r.wantCode(t, 0)
	var cfgs []configInfo
	r = on(t, c, "config", "describe", "--topic", "demo", "-o", "json")
	r.wantCode(t, 0)
	decode(t, r, &cfgs)
	for _, cf := range cfgs {
		if cf.Name == "retention.ms" {
			t.Fatalf("retention.ms still set after delete: %+v", cf)
		}
	}

	// Brokers: one by id, and the cluster-wide default.
	r = on(t, c, "config", "set", "--broker", "1", "log.retention.ms=1234")
	r.wantCode(t, 0)
	if r.stdout != "set log.retention.ms=1234 on broker 1\n" {
		t.Fatalf("set broker: %q", r.stdout)
	}
	r = on(t, c, "config", "describe", "--broker", "1", "-o", "json")
	r.wantCode(t, 0)
	decode(t, r, &cfgs)
	found := false
	for _, cf := range cfgs {
		found = found || (cf.Name == "log.retention.ms" && cf.Value != nil && *cf.Value == "1234")
	}
	if !found {
		t.Fatalf("log.retention.ms not in %+v", cfgs)
	}
	on(t, c, "config", "describe", "--broker", "default", "--all").wantCode(t, 0)

	// A missing topic fails with status 1, a broker id that does not
	// exist too; bad targets are usage errors.
	r = on(t, c, "config", "describe", "--topic", "nope")
	r.wantCode(t, 1)
	if !strings.Contains(r.stderr, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("missing topic: %q", r.stderr)
	}
	on(t, c, "config", "describe", "--broker", "42").wantCode(t, 1)
	on(t, c, "config", "describe").wantCode(t, 2)
	on(t, c, "config", "describe", "--topic", "demo", "--broker", "1").wantCode(t, 2)
	on(t, c, "config", "set", "--broker", "x", "a=b").wantCode(t, 2)
	on(t, c, "config", "set", "--topic", "demo", "novalue").wantCode(t, 2)
	// Logger levels are per broker.
	on(t, c, "config", "describe", "--topic", "demo", "--loggers").wantCode(t, 2)
	on(t, c, "config", "describe", "--broker", "default", "--loggers").wantCode(t, 2)
	on(t, c, "config", "set", "--loggers", "kafka.log.LogCleaner=DEBUG").wantCode(t, 2)
}

// TestConfigGroupCommands: --group describes, sets and deletes a group's
// configs (kfake has GROUP config resources: share.* and consumer.*
// names), validate-only changes nothing, and an unknown name fails with
// the broker's INVALID_CONFIG.
func TestConfigGroupCommands(t *testing.T) {
	t.Parallel()
	c := startCluster(t)

	r := on(t, c, "config", "set", "--group", "jobs", "share.auto.offset.reset=earliest", "share.isolation.level=read_committed")
	r.wantCode(t, 0)
	if want := "set share.auto.offset.reset=earliest on group \"jobs\"\nset share.isolation.level=read_committed on group \"jobs\"\n"; r.stdout != want {
		t.Fatalf("set: %q", r.stdout)
	}
	r = on(t, c, "config", "describe", "--group", "jobs")
	r.wantCode(t, 0)
	rows := tableRows(t, r.stdout, "NAME")
	if len(rows) != 2 || !slices.Equal(rows[0], []string{"share.auto.offset.reset", "earliest", "group", "config"}) ||
		!slices.Equal(rows[1], []string{"share.isolation.level", "read_committed", "group", "config"}) {
		t.Fatalf("describe rows %q in\n%s", rows, r.stdout)
	}
	var cfgs []configInfo
	r = on(t, c, "config", "describe", "--group", "jobs", "--all", "-o", "json")
	r.wantCode(t, 0)
	decode(t, r, &cfgs)
	if len(cfgs) <= 2 || !slices.ContainsFunc(cfgs, func(c configInfo) bool {
		return c.Name == "share.record.lock.duration.ms" && c.Source == "DEFAULT_CONFIG"
	}) {
		t.Fatalf("--all: %+v", cfgs)
	}

	r = on(t, c, "config", "set", "--group", "jobs", "share.auto.offset.reset=latest", "--validate-only")
	r.wantCode(t, 0)
	if r.stdout != "would set share.auto.offset.reset=latest on group \"jobs\"\n" {
		t.Fatalf("validate set: %q", r.stdout)
	}
	r = on(t, c, "config", "delete", "--group", "jobs", "share.isolation.level")
	r.wantCode(t, 0)
	if r.stdout != "deleted share.isolation.level on group \"jobs\"\n" {
		t.Fatalf("delete: %q", r.stdout)
	}
	decode(t, on(t, c, "config", "describe", "--group", "jobs", "-o", "json"), &cfgs)
	if len(cfgs) != 1 || cfgs[0].Name != "share.auto.offset.reset" || cfgs[0].Value == nil || *cfgs[0].Value != "earliest" {
		t.Fatalf("after a validate-only set and a delete: %+v", cfgs)
	}

	r = on(t, c, "config", "set", "--group", "jobs", "no.such.config=1")
	r.wantCode(t, 1)
	if !strings.Contains(r.stderr, `group "jobs": INVALID_CONFIG`) {
		t.Fatalf("unknown config: stderr %q", r.stderr)
	}
	on(t, c, "config", "describe", "--group", "jobs", "--topic", "demo").wantCode(t, 2)
	on(t, c, "config", "set", "--group", "jobs", "--broker", "1", "a=b").wantCode(t, 2)
	on(t, c, "config", "delete", "--group", "jobs", "--loggers", "a").wantCode(t, 2)
}

func TestRecordsDelete(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	r := on(t, c, "produce", "demo", "-p", "0", "--count", "5")
	r.wantCode(t, 0)
	r = on(t, c, "records", "delete", "--topic", "demo", "--partition", "0", "--before", "3")
	r.wantCode(t, 0)
	if r.stdout != "demo[0]: low watermark 3\n" {
		t.Fatalf("delete: %q", r.stdout)
	}
	r = on(t, c, "records", "delete", "--topic", "demo", "--partition", "0,1", "--before", "end")
	r.wantCode(t, 0)
	if r.stdout != "demo[0]: low watermark 5\ndemo[1]: low watermark 0\n" {
		t.Fatalf("delete to end: %q", r.stdout)
	}
	// One bad partition among good ones: reported, exit 1.
	r = on(t, c, "records", "delete", "--topic", "demo", "--partition", "2,99", "--before", "0")
	r.wantCode(t, 1)
	if r.stdout != "demo[2]: low watermark 0\n" || !strings.Contains(r.stderr, "demo[99]") {
		t.Fatalf("bad partition: %q %q", r.stdout, r.stderr)
	}
	on(t, c, "records", "delete", "--topic", "demo", "--partition", "0").wantCode(t, 2)
	on(t, c, "records", "delete", "--topic", "demo", "--partition", "0", "--before", "-3").wantCode(t, 2)
}

func TestUserScram(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	r := on(t, c, "user", "scram", "set", "alice", "--password", "pw-alice", "--iterations", "8192")
	r.wantCode(t, 0)
	if r.stdout != "updated SCRAM credentials of user \"alice\"\n" || strings.Contains(r.stdout+r.stderr, "pw-alice") {
		t.Fatalf("set: %q %q", r.stdout, r.stderr)
	}
	on(t, c, "user", "scram", "set", "bob", "--password", "pw-bob", "--mechanism", "scram-sha-256").wantCode(t, 0)

	r = on(t, c, "user", "scram", "list")
	r.wantCode(t, 0)
	rows := tableRows(t, r.stdout, "USER")
	if len(rows) != 2 || !slices.Equal(rows[0], []string{"alice", "SCRAM-SHA-512", "8192"}) || !slices.Equal(rows[1], []string{"bob", "SCRAM-SHA-256", "4096"}) {
		t.Fatalf("list: %q", rows)
	}
	var users []scramUserJSON
	r = on(t, c, "user", "scram", "list", "alice", "nobody", "-o", "json")
	r.wantCode(t, 1)
	r.code = 0 // decode wants a success; the failure was checked above
	decode(t, r, &users)
	if len(users) != 2 || users[0].Credentials[0].Iterations != 8192 || users[1].Error == "" {
		t.Fatalf("json: %+v", users)
	}

	r = on(t, c, "user", "scram", "delete", "bob", "nobody", "--mechanism", "SCRAM-SHA-256")
	r.wantCode(t, 1)
	if r.stdout != "updated SCRAM credentials of user \"bob\"\n" || !strings.Contains(r.stderr, "nobody") {
		t.Fatalf("delete: %q %q", r.stdout, r.stderr)
	}
	on(t, c, "user", "scram", "set", "carol").wantCode(t, 2) // no password
	on(t, c, "user", "scram", "delete", "carol").wantCode(t, 2)
	on(t, c, "user", "scram", "set", "carol", "--password", "x", "--mechanism", "md5").wantCode(t, 2)
}
