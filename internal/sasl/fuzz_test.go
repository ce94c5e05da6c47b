package sasl

import (
	"errors"
	"strings"
	"testing"
)

// checkFuzzResult holds the invariants for any server input: no panic (the
// fuzzer checks that), a failure always classified, and no password in it.
func checkFuzzResult(t *testing.T, done bool, msg []byte, err error) {
	t.Helper()
	if err == nil {
		return
	}
	checkErr(t, err)
	if done || msg != nil {
		t.Fatalf("error %v returned with done=%v msg=%q", err, done, msg)
	}
	if !errors.Is(err, ErrProtocol) && !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("unclassified error: %v", err)
	}
}

func FuzzScramServerFirst(f *testing.F) {
	for _, seed := range []string{
		rfcServerFirst,
		rfcServerFirst + ",x=y",
		"m=ext," + rfcServerFirst,
		"e=other-error",
		"r=" + rfcServerNonce + ",s=,i=4096",
		"r=" + rfcServerNonce + ",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=99999999999",
		"",
		",,,",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		done, msg, err := rfcSession(t, false).Step(data)
		checkFuzzResult(t, done, msg, err)
		if err == nil {
			if done || !strings.HasPrefix(string(msg), "c=biws,r="+rfcClientNonce) {
				t.Fatalf("accepted %q but produced %v, %q", data, done, msg)
			}
		}
	})
}

func FuzzScramServerFinal(f *testing.F) {
	for _, seed := range []string{
		rfcServerFinal,
		rfcServerFinal + ",x=y",
		"v=",
		"e=invalid-proof",
		"v=****",
		"",
	} {
		f.Add([]byte(seed))
	}
	// Deriving keys costs a PBKDF2 run, so do it once and copy the session,
	// which is a plain value once past server-first.
	base := *rfcSession(f, true).(*scramSession)
	f.Fuzz(func(t *testing.T, data []byte) {
		sess := base
		done, msg, err := sess.Step(data)
		checkFuzzResult(t, done, msg, err)
		if err == nil && (!done || msg != nil) {
			t.Fatalf("accepted %q with done=%v msg=%q", data, done, msg)
		}
		if err == nil && !strings.HasPrefix(string(data), rfcServerFinal) {
			t.Fatalf("accepted a forged server-final %q", data)
		}
	})
}

func FuzzPlainStep(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("x"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sess, _, err := Plain("alice", "pencil").Start()
		if err != nil {
			t.Fatal(err)
		}
		done, msg, err := sess.Step(data)
		checkFuzzResult(t, done, msg, err)
	})
}
