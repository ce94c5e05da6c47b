package sasl

import (
	"errors"
	"testing"
)

func TestPlainMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		mech Mechanism
		want string
	}{
		{"no authzid", Plain("alice", "s3cr3t-Pa55w0rd!"), "\x00alice\x00s3cr3t-Pa55w0rd!"},
		{"authzid", PlainWithAuthzID("admin", "alice", "s3cr3t-Pa55w0rd!"), "admin\x00alice\x00s3cr3t-Pa55w0rd!"},
		{"empty authzid", PlainWithAuthzID("", "alice", "pencil"), "\x00alice\x00pencil"},
		{"utf-8 and separators", Plain("ü,=ser", "pencil"), "\x00ü,=ser\x00pencil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.mech.Name(); got != "PLAIN" {
				t.Errorf("Name() = %q, want PLAIN", got)
			}
			sess, msg, err := tt.mech.Start()
			checkErr(t, err)
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			if string(msg) != tt.want {
				t.Errorf("message = %q, want %q", msg, tt.want)
			}
			done, next, err := sess.Step(nil)
			checkErr(t, err)
			if err != nil || !done || next != nil {
				t.Fatalf("Step(empty) = %v, %q, %v; want true, nil, nil", done, next, err)
			}
		})
	}
}

func TestPlainStepErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		steps [][]byte // the last step must fail
	}{
		{"non-empty reply", [][]byte{[]byte("hello")}},
		{"reply after done", [][]byte{{}, {}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sess, _, err := Plain("alice", "pencil").Start()
			if err != nil {
				t.Fatal(err)
			}
			for i, step := range tt.steps {
				done, msg, err := sess.Step(step)
				checkErr(t, err)
				if i < len(tt.steps)-1 {
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					continue
				}
				if !errors.Is(err, ErrProtocol) || done || msg != nil {
					t.Fatalf("last step = %v, %q, %v; want ErrProtocol", done, msg, err)
				}
				// Errors are sticky: a retry must not turn into success.
				if _, _, err2 := sess.Step(nil); err2 != err {
					t.Fatalf("Step after failure = %v, want %v", err2, err)
				}
			}
		})
	}
}

func TestPlainRejectsNUL(t *testing.T) {
	t.Parallel()
	for _, m := range []Mechanism{
		Plain("al\x00ice", "pencil"),
		Plain("alice", "pen\x00cil"),
		PlainWithAuthzID("ad\x00min", "alice", "pencil"),
	} {
		sess, msg, err := m.Start()
		checkErr(t, err)
		if err == nil || sess != nil || msg != nil {
			t.Errorf("%v: Start() = %v, %q, %v; want error", m, sess, msg, err)
		}
	}
}
