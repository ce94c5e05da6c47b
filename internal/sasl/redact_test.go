package sasl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
)

func TestNoPasswordInOutput(t *testing.T) {
	t.Parallel()
	const pass = "s3cr3t-Pa55w0rd!"
	mechs := []Mechanism{
		Plain("alice", pass),
		PlainWithAuthzID("admin", "alice", pass),
		ScramSHA256("alice", pass),
		ScramSHA512("alice", pass),
	}
	var values []any
	for _, m := range mechs {
		values = append(values, m, reflect.ValueOf(m))
		sess, _, err := m.Start()
		if err != nil {
			t.Fatal(err)
		}
		values = append(values, sess, reflect.ValueOf(sess).Elem())
	}
	// A SCRAM session past server-first holds key material instead.
	values = append(values, rfcSession(t, true), secret(pass))

	verbs := []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T", "%10v", "%-20s", "%#x", "%+q"}
	hexPass := fmt.Sprintf("%x", pass)
	for _, v := range values {
		for _, verb := range verbs {
			out := fmt.Sprintf(verb, v)
			if strings.Contains(out, pass) || strings.Contains(out, "pencil") || strings.Contains(strings.ToLower(out), hexPass) {
				t.Errorf("fmt.Sprintf(%q, %T) = %q leaks the password", verb, v, out)
			}
		}
		// Wrapped in a struct and a slice, as in a logged config.
		for _, out := range []string{
			fmt.Sprintf("%+v", struct{ M any }{v}),
			fmt.Sprintf("%#v", []any{v}),
			fmt.Sprint(v),
			fmt.Sprintln(v),
		} {
			if strings.Contains(out, pass) {
				t.Errorf("%T printed in a container leaks the password: %q", v, out)
			}
		}
		j, _ := json.Marshal(v)
		if bytes.Contains(j, []byte(pass)) {
			t.Errorf("json.Marshal(%T) = %s leaks the password", v, j)
		}
	}

	var buf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewJSONHandler(&buf, nil), slog.NewTextHandler(&buf, nil)} {
		log := slog.New(h)
		for _, v := range values {
			log.Info("auth", "v", v)
		}
	}
	if out := buf.String(); strings.Contains(out, pass) {
		t.Errorf("slog output leaks the password:\n%s", out)
	} else if !strings.Contains(out, "alice") {
		t.Errorf("slog output lost the username:\n%s", out)
	}
}

func TestFormattingIsUseful(t *testing.T) {
	t.Parallel()
	tests := []struct {
		format string
		v      any
		want   string
	}{
		{"%v", Plain("alice", "pencil"), `PLAIN(user="alice")`},
		{"%s", PlainWithAuthzID("admin", "alice", "pencil"), `PLAIN(authzid="admin", user="alice")`},
		{"%#v", Plain("alice", "pencil"), `sasl.Plain("alice", "[REDACTED]")`},
		{"%v", ScramSHA512("alice", "pencil"), `SCRAM-SHA-512(user="alice")`},
		{"%#v", ScramSHA256("alice", "pencil"), `sasl.ScramSHA256("alice", "[REDACTED]")`},
		{"%q", ScramSHA256("a", "pencil"), `"SCRAM-SHA-256(user=\"a\")"`},
		{"%v", secret("pencil"), "[REDACTED]"},
	}
	for _, tt := range tests {
		if got := fmt.Sprintf(tt.format, tt.v); got != tt.want {
			t.Errorf("Sprintf(%q) = %q, want %q", tt.format, got, tt.want)
		}
	}
}
