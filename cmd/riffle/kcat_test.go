package main

import (
	"io"
	"slices"
	"strings"
	"testing"
)

// -C and -P stand for consume and produce wherever they are, but not as
// the value of a flag.
func TestKcatMode(t *testing.T) {
	t.Parallel()
	root := (&app{}).rootCmd()
	for _, tc := range []struct {
		in, want []string
	}{
		{[]string{"-C", "-b", "h:9092", "-t", "orders", "-e"}, []string{"consume", "-b", "h:9092", "-t", "orders", "-e"}},
		{[]string{"-b", "h", "-P", "-t", "orders"}, []string{"produce", "-b", "h", "-t", "orders"}},
		{[]string{"-C", "orders", "-o", "beginning"}, []string{"consume", "orders", "-o", "beginning"}},
		// Values that look like the modes stay values.
		{[]string{"-P", "-t", "t", "-K", "-C"}, []string{"produce", "-t", "t", "-K", "-C"}},
		{[]string{"-C", "-t", "t", "-eK", "-P"}, []string{"consume", "-t", "t", "-eK", "-P"}},
		{[]string{"-C", "-t", "t", "--key-separator", "-P"}, []string{"consume", "-t", "t", "--key-separator", "-P"}},
		{[]string{"-C", "-t", "t", "--", "-P"}, []string{"consume", "-t", "t", "--", "-P"}},
		// Short flags combine.
		{[]string{"-Ce", "-t", "t"}, []string{"consume", "-e", "-t", "t"}},
		{[]string{"-qCb", "h", "-t", "t"}, []string{"consume", "-qb", "h", "-t", "t"}},
		{[]string{"-PK:", "-t", "t"}, []string{"produce", "-K:", "-t", "t"}},
		{[]string{"--consume", "-t", "t"}, []string{"consume", "-t", "t"}},
		// Without a mode nothing changes.
		{[]string{"consume", "orders", "-K", "-C"}, []string{"consume", "orders", "-K", "-C"}},
		{[]string{"topic", "list"}, []string{"topic", "list"}},
	} {
		got, err := kcatMode(root, tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("kcatMode(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range [][]string{
		{"-C", "-P", "-t", "t"},
		{"-C", "consume", "t"},
		{"produce", "-P", "t"},
	} {
		if _, err := kcatMode(root, in); err == nil {
			t.Errorf("kcatMode(%q) succeeded, want a usage error", in)
		}
	}
}

// -X sets the flag each property maps to, with the value translated.
func TestProperties(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd   []string
		props []string
		want  map[string]string // flag: value
	}{
		{[]string{"consume"}, []string{"isolation.level=read_committed", "group.id=billing", "auto.offset.reset=smallest", "client.id=etl-1"},
			map[string]string{"isolation": "read_committed", "group": "billing", "from": "earliest", "client-id": "etl-1"}},
		{[]string{"consume"}, []string{"auto.offset.reset=largest", "bootstrap.servers=a:1,b:2"},
			map[string]string{"from": "latest", "brokers": "[a:1,b:2]"}},
		{[]string{"produce"}, []string{"acks=-1", "compression.codec=zstd", "linger.ms=20", "metadata.broker.list=k:9092"},
			map[string]string{"acks": "all", "compression": "zstd", "linger": "20ms", "brokers": "[k:9092]"}},
		{[]string{"produce"}, []string{"request.required.acks=1", "queue.buffering.max.ms=0.5"},
			map[string]string{"acks": "1", "linger": "500µs"}},
		{[]string{"cluster"}, []string{"security.protocol=sasl_ssl", "sasl.mechanisms=SCRAM-SHA-512", "sasl.username=alice", "sasl.password=pw",
			"ssl.ca.location=ca.pem", "ssl.certificate.location=c.pem", "ssl.key.location=k.pem", "bootstrap.servers=k:9093"},
			map[string]string{"tls": "true", "sasl-mechanism": "SCRAM-SHA-512", "sasl-user": "alice", "sasl-password": "pw",
				"tls-ca": "ca.pem", "tls-cert": "c.pem", "tls-key": "k.pem"}},
		{[]string{"topic", "list"}, []string{"enable.ssl.certificate.verification=false", "bootstrap.servers=k:9093"},
			map[string]string{"tls-insecure": "true"}},
	} {
		a := &app{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
		root := a.rootCmd()
		cmd, _, err := root.Find(tc.cmd)
		if err != nil {
			t.Fatal(err)
		}
		var args []string
		for _, p := range tc.props {
			args = append(args, "-X", p)
		}
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		if err := a.applyProperties(cmd); err != nil {
			t.Errorf("%q -X %q: %v", tc.cmd, tc.props, err)
			continue
		}
		for flag, want := range tc.want {
			if got := cmd.Flags().Lookup(flag).Value.String(); got != want && !(flag == "tls" && a.tlsEnabled()) {
				t.Errorf("%q -X %q: --%s = %q, want %q", tc.cmd, tc.props, flag, got, want)
			}
		}
	}
}

// Unknown or conflicting properties, the modes' misuse and a missing
// topic are usage errors, found before dialing.
func TestKcatUsageErrors(t *testing.T) {
	t.Parallel()
	dead := "127.0.0.1:1"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-C", "-t", "t", "-X", "fetch.wait.max.ms=10"}, "-X fetch.wait.max.ms: unknown property; riffle knows acks, auto.offset.reset, bootstrap.servers,"},
		{[]string{"-C", "-t", "t", "-X", "isolation.level"}, `-X "isolation.level": want KEY=VALUE`},
		{[]string{"-C", "-t", "t", "-X", "isolation.level=serializable"}, `--isolation "serializable": want read_uncommitted or read_committed`},
		{[]string{"-C", "-t", "t", "-X", "auto.offset.reset=none"}, "-X auto.offset.reset=none: want earliest or latest"},
		{[]string{"-C", "-t", "t", "-X", "group.id=a", "-G", "b"}, "-X group.id sets --group, which is given already"},
		{[]string{"-C", "-t", "t", "-X", "group.id=a", "-X", "group.id=b"}, "-X group.id sets --group, which is given already"},
		{[]string{"-P", "-t", "t", "-X", "isolation.level=read_committed"}, "-X isolation.level (--isolation) does not apply to riffle produce"},
		{[]string{"-P", "-t", "t", "-X", "linger.ms=soon"}, "-X linger.ms=soon: want milliseconds"},
		{[]string{"-P", "-t", "t", "-X", "acks=2"}, "-X acks=2: want all (-1), 1 or 0"},
		{[]string{"-X", "sasl.mechanism=GSSAPI", "cluster"}, "want one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"},
		{[]string{"-X", "security.protocol=TLS", "cluster"}, "-X security.protocol=TLS: want one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"},
		{[]string{"-X", "security.protocol=SASL_SSL", "cluster"}, "needs a SASL mechanism"},
		{[]string{"-X", "security.protocol=PLAINTEXT", "--tls", "cluster"}, "is without TLS"},
		{[]string{"-X", "security.protocol=SSL", "-X", "sasl.mechanism=PLAIN", "-X", "sasl.username=u", "-X", "sasl.password=p", "cluster"}, "is without SASL"},
		{[]string{"-C", "-P", "-t", "t"}, "-C (consume) and -P (produce) exclude each other"},
		{[]string{"-CP", "-t", "t"}, "-C (consume) and -P (produce) exclude each other"},
		{[]string{"--consume=true"}, "take no value"},
		{[]string{"-C"}, "consume needs a topic: riffle consume TOPIC, or -t TOPIC"},
		{[]string{"produce"}, "produce needs a topic"},
		{[]string{"consume", "a", "-t", "b"}, `the topic is given twice, as the argument "a" and as -t "b"`},
		{[]string{"-q", "-v", "cluster"}, "-q (--quiet) and -v (--verbose) exclude each other"},
	} {
		r := runRiffle(t, append([]string{"-b", dead, "--timeout", "5s"}, tc.args...)...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, "riffle: ") || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
			t.Errorf("riffle %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, r.code, r.stdout, r.stderr, tc.want)
		}
	}
}

// kcat's own command lines, produce then consume, with -q: only the
// records on stdout, nothing on stderr.
func TestKcatProduceConsume(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	b := strings.Join(c.Addrs(), ",")
	withStdin(t, "alice:hello\nbob:world\n")
	r := runRiffle(t, "-P", "-b", b, "-t", "demo", "-K", ":", "-p", "1", "-q", "-X", "acks=all", "-X", "client.id=kcat-test")
	r.wantCode(t, 0)
	if r.stdout != "" || r.stderr != "" {
		t.Errorf("-P -q: stdout %q, stderr %q; want nothing", r.stdout, r.stderr)
	}
	r = runRiffle(t, "-b", b, "-C", "-t", "demo", "-o", "beginning", "-e", "-K", "=", "-q")
	r.wantCode(t, 0)
	if r.stdout != "alice=hello\nbob=world\n" || r.stderr != "" {
		t.Errorf("-C -q: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	// Without -q, the summary is there.
	r = runRiffle(t, "-b", b, "-C", "-t", "demo", "-e", "-X", "auto.offset.reset=earliest")
	r.wantCode(t, 0)
	if r.stdout != "hello\nworld\n" || !strings.Contains(r.stderr, "2 records in ") {
		t.Errorf("-C: stdout %q, stderr %q", r.stdout, r.stderr)
	}
}
