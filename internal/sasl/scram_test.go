package sasl

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"hash"
	"strings"
	"testing"
)

// RFC 7677 §3 test vector. The server signature is the one printed in the RFC
// and used by other SCRAM implementations; it is also recomputed
// independently in TestScramSHA256RFC7677Vector.
const (
	rfcUser        = "user"
	rfcPass        = "pencil"
	rfcClientNonce = "rOprNGfwEbeRWgbNEkqO"
	rfcServerNonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	rfcServerFirst = "r=" + rfcServerNonce + ",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
	rfcClientFinal = "c=biws,r=" + rfcServerNonce + ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
	rfcServerFinal = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
)

// rfcSession returns a SCRAM-SHA-256 session for the RFC 7677 vector, started
// and, if afterFirst, past server-first.
func rfcSession(t testing.TB, afterFirst bool) Session {
	t.Helper()
	sess, _, err := withNonce(t, ScramSHA256(rfcUser, rfcPass), rfcClientNonce).Start()
	if err != nil {
		t.Fatal(err)
	}
	if afterFirst {
		if _, _, err := sess.Step([]byte(rfcServerFirst)); err != nil {
			t.Fatal(err)
		}
	}
	return sess
}

func TestScramSHA256RFC7677Vector(t *testing.T) {
	t.Parallel()
	m := withNonce(t, ScramSHA256(rfcUser, rfcPass), rfcClientNonce)
	if m.Name() != "SCRAM-SHA-256" {
		t.Errorf("Name() = %q", m.Name())
	}
	sess, msg, err := m.Start()
	checkErr(t, err)
	if err != nil {
		t.Fatal(err)
	}
	if want := "n,,n=user,r=" + rfcClientNonce; string(msg) != want {
		t.Errorf("client-first = %q, want %q", msg, want)
	}
	done, msg, err := sess.Step([]byte(rfcServerFirst))
	checkErr(t, err)
	if err != nil || done {
		t.Fatalf("Step(server-first) = %v, %q, %v", done, msg, err)
	}
	if string(msg) != rfcClientFinal {
		t.Errorf("client-final = %q\nwant %q", msg, rfcClientFinal)
	}
	done, msg, err = sess.Step([]byte(rfcServerFinal))
	checkErr(t, err)
	if err != nil || !done || msg != nil {
		t.Fatalf("Step(server-final) = %v, %q, %v; want true, nil, nil", done, msg, err)
	}

	// Cross-check both constants with the independent reference server.
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	srv := newTestServer(sha256.New, rfcUser, rfcPass, salt, 4096, strings.TrimPrefix(rfcServerNonce, rfcClientNonce))
	if sf, err := srv.first([]byte("n,,n=user,r=" + rfcClientNonce)); err != nil || sf != rfcServerFirst {
		t.Fatalf("reference server-first = %q, %v", sf, err)
	}
	if sf, err := srv.final([]byte(rfcClientFinal)); err != nil || sf != rfcServerFinal {
		t.Fatalf("reference server-final = %q, %v; want %q", sf, err, rfcServerFinal)
	}
}

func TestScramEndToEnd(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		mech  func(user, pass string) Mechanism
		h     func() hash.Hash
		user  string
		pass  string
		iters int
	}{
		{"SHA-512", ScramSHA512, sha512.New, "alice", "s3cr3t-Pa55w0rd!", 4096},
		{"SHA-512 escaped user", ScramSHA512, sha512.New, "a=b,c", "hunter2-longer-than-most", 8192},
		{"SHA-256", ScramSHA256, sha256.New, "bob", "s3cr3t-Pa55w0rd!", 4096},
		{"SHA-256 utf-8 user", ScramSHA256, sha256.New, "bøb", "pencil", 5000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newTestServer(tt.h, tt.user, tt.pass, []byte("some salt bytes"), tt.iters, "server-part-123")
			// Default random nonce: exercises the production path.
			sess, msg, err := tt.mech(tt.user, tt.pass).Start()
			checkErr(t, err)
			if err != nil {
				t.Fatal(err)
			}
			serverFirst, err := srv.first(msg)
			if err != nil {
				t.Fatalf("server rejected client-first %q: %v", msg, err)
			}
			done, msg, err := sess.Step([]byte(serverFirst))
			checkErr(t, err)
			if err != nil || done {
				t.Fatalf("Step(server-first) = %v, %v", done, err)
			}
			serverFinal, err := srv.final(msg)
			if err != nil {
				t.Fatalf("server rejected client-final %q: %v", msg, err)
			}
			if serverFinal != "" && serverFinal[0] == 'e' {
				t.Fatalf("server rejected proof: %s", serverFinal)
			}
			done, msg, err = sess.Step([]byte(serverFinal))
			checkErr(t, err)
			if err != nil || !done || msg != nil {
				t.Fatalf("Step(server-final) = %v, %q, %v", done, msg, err)
			}
		})
	}
}

// TestScramWrongPassword checks that the independent server rejects a proof
// made with another password and that its e= reply becomes ErrAuthFailed.
func TestScramWrongPassword(t *testing.T) {
	t.Parallel()
	srv := newTestServer(sha512.New, "alice", "s3cr3t-Pa55w0rd!", []byte("salt"), 4096, "srv")
	sess, msg, err := ScramSHA512("alice", "pencil").Start()
	if err != nil {
		t.Fatal(err)
	}
	serverFirst, err := srv.first(msg)
	if err != nil {
		t.Fatal(err)
	}
	_, msg, err = sess.Step([]byte(serverFirst))
	if err != nil {
		t.Fatal(err)
	}
	serverFinal, err := srv.final(msg)
	if err != nil || serverFinal != "e=invalid-proof" {
		t.Fatalf("server-final = %q, %v; want e=invalid-proof", serverFinal, err)
	}
	_, _, err = sess.Step([]byte(serverFinal))
	checkErr(t, err)
	if !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("err = %v, want ErrAuthFailed", err)
	}
}

func TestScramServerFirstErrors(t *testing.T) {
	t.Parallel()
	const salt = ",s=W22ZaJ0SNY7soEsUEjb6gQ=="
	const nonce = "r=" + rfcServerNonce
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"empty", "", ErrProtocol},
		{"garbage", "hello world", ErrProtocol},
		{"missing nonce", "s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", ErrProtocol},
		{"nonce not extending ours", "r=XXXXNGfwEbeRWgbNEkqO%hvY" + salt + ",i=4096", ErrProtocol},
		{"nonce prefix of ours", "r=rOprNG" + salt + ",i=4096", ErrProtocol},
		{"nonce equal to ours", "r=" + rfcClientNonce + salt + ",i=4096", ErrProtocol},
		{"nonce non-printable", "r=" + rfcClientNonce + "\x01abc" + salt + ",i=4096", ErrProtocol},
		{"nonce with space", "r=" + rfcClientNonce + " abc" + salt + ",i=4096", ErrProtocol},
		{"missing salt", nonce + ",i=4096", ErrProtocol},
		{"salt attribute wrong", nonce + ",x=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", ErrProtocol},
		{"bad base64 salt", nonce + ",s=!!!!,i=4096", ErrProtocol},
		{"unpadded salt", nonce + ",s=W22ZaJ0SNY7soEsUEjb6gQ,i=4096", ErrProtocol},
		{"salt with newline", nonce + ",s=W22ZaJ0SNY7s\noEsUEjb6gQ==,i=4096", ErrProtocol},
		{"empty salt", nonce + ",s=,i=4096", ErrProtocol},
		{"missing iterations", nonce + salt, ErrProtocol},
		{"empty iterations", nonce + salt + ",i=", ErrProtocol},
		{"non-numeric iterations", nonce + salt + ",i=lots", ErrProtocol},
		{"signed iterations", nonce + salt + ",i=+4096", ErrProtocol},
		{"negative iterations", nonce + salt + ",i=-4096", ErrProtocol},
		{"iterations too low", nonce + salt + ",i=4095", ErrProtocol},
		{"iterations zero", nonce + salt + ",i=0", ErrProtocol},
		{"iterations too high", nonce + salt + ",i=1048577", ErrProtocol},
		{"iterations overflow", nonce + salt + ",i=99999999999999999999", ErrProtocol},
		{"wrong order", "s=W22ZaJ0SNY7soEsUEjb6gQ==," + nonce + ",i=4096", ErrProtocol},
		{"mandatory extension", "m=foo," + nonce + salt + ",i=4096", ErrProtocol},
		{"malformed trailing attribute", nonce + salt + ",i=4096,garbage", ErrProtocol},
		{"empty trailing attribute", nonce + salt + ",i=4096,", ErrProtocol},
		{"server error", "e=unknown-user", ErrAuthFailed},
		{"server error other-error", "e=other-error", ErrAuthFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sess := rfcSession(t, false)
			done, msg, err := sess.Step([]byte(tt.in))
			checkErr(t, err)
			if !errors.Is(err, tt.want) || done || msg != nil {
				t.Fatalf("Step(%q) = %v, %q, %v; want %v", tt.in, done, msg, err, tt.want)
			}
			if errors.Is(err, ErrProtocol) && errors.Is(err, ErrAuthFailed) {
				t.Fatalf("error %v matches both sentinels", err)
			}
			// A failed session stays failed, even if fed the correct message.
			if _, _, err2 := sess.Step([]byte(rfcServerFirst)); err2 != err {
				t.Fatalf("Step after failure = %v, want %v", err2, err)
			}
		})
	}
}

func TestScramServerFirstAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
	}{
		{"rfc vector", rfcServerFirst},
		{"trailing extension", rfcServerFirst + ",x=1"},
		{"kafka-style extension", rfcServerFirst + ",tokenauth=true"},
		{"leading zero iterations", "r=" + rfcServerNonce + ",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=04096"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			done, msg, err := rfcSession(t, false).Step([]byte(tt.in))
			checkErr(t, err)
			if err != nil || done || !strings.HasPrefix(string(msg), "c=biws,r="+rfcServerNonce+",p=") {
				t.Fatalf("Step(%q) = %v, %q, %v", tt.in, done, msg, err)
			}
		})
	}
}

func TestParseIterations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int // 0 means error
	}{
		{"4096", 4096},
		{"1048576", 1 << 20},
		{"1048577", 0},
		{"4095", 0},
		{"", 0},
		{"+4096", 0},
		{" 4096", 0},
		{"4096 ", 0},
		{"0x1000", 0},
		{"12345678901", 0},
	}
	for _, tt := range tests {
		got, err := parseIterations(tt.in)
		if tt.want == 0 {
			if err == nil {
				t.Errorf("parseIterations(%q) = %d, want error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parseIterations(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestScramServerFinal(t *testing.T) {
	t.Parallel()
	wrongSig := base64.StdEncoding.EncodeToString(make([]byte, sha256.Size))
	tests := []struct {
		name string
		in   string
		want error // nil means success
	}{
		{"valid", rfcServerFinal, nil},
		{"valid with extension", rfcServerFinal + ",x=y", nil},
		{"wrong signature", "v=" + wrongSig, ErrAuthFailed},
		{"signature off by one bit", "v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=", ErrAuthFailed},
		// A corrupted copy of the vector's signature that circulates; it
		// shares a 23-character prefix with the real one.
		{"corrupted rfc signature", "v=6rriTRBi23WpRR/wtup+mMhK1jaJZcNOtbmHjJ2OIJk=", ErrAuthFailed},
		{"other-error", "e=other-error", ErrAuthFailed},
		{"invalid-proof", "e=invalid-proof", ErrAuthFailed},
		{"empty error", "e=", ErrAuthFailed},
		{"long error", "e=" + strings.Repeat("x", 10000), ErrAuthFailed},
		{"empty", "", ErrProtocol},
		{"no verifier", "x=6rriTRBi23WpRR/wtup+mMhK1jaJZcNOtbmHjJ2OIJk=", ErrProtocol},
		{"bad base64", "v=****", ErrProtocol},
		{"empty signature", "v=", ErrProtocol},
		{"truncated signature", "v=6rriTRBi23WpRR/wtup+mMhK", ErrProtocol},
		{"too long signature", "v=" + base64.StdEncoding.EncodeToString(make([]byte, 64)), ErrProtocol},
		{"malformed extension", rfcServerFinal + ",junk", ErrProtocol},
		{"server-first again", rfcServerFirst, ErrProtocol},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sess := rfcSession(t, true)
			done, msg, err := sess.Step([]byte(tt.in))
			checkErr(t, err)
			if tt.want == nil {
				if err != nil || !done || msg != nil {
					t.Fatalf("Step(%q) = %v, %q, %v; want true, nil, nil", tt.in, done, msg, err)
				}
				return
			}
			if !errors.Is(err, tt.want) || done || msg != nil {
				t.Fatalf("Step(%q) = %v, %q, %v; want %v", tt.in, done, msg, err, tt.want)
			}
			if _, _, err2 := sess.Step([]byte(rfcServerFinal)); err2 != err {
				t.Fatalf("Step after failure = %v, want %v (errors must be sticky)", err2, err)
			}
		})
	}
}

func TestScramErrorTruncatesServerError(t *testing.T) {
	t.Parallel()
	_, _, err := rfcSession(t, true).Step([]byte("e=" + strings.Repeat("x", 10000)))
	checkErr(t, err)
	if err == nil || len(err.Error()) > 200 {
		t.Fatalf("error not bounded: %d bytes", len(err.Error()))
	}
}

func TestScramStepAfterDone(t *testing.T) {
	t.Parallel()
	sess := rfcSession(t, true)
	if done, _, err := sess.Step([]byte(rfcServerFinal)); err != nil || !done {
		t.Fatal(done, err)
	}
	done, msg, err := sess.Step([]byte(rfcServerFinal))
	checkErr(t, err)
	if !errors.Is(err, ErrProtocol) || done || msg != nil {
		t.Fatalf("Step after done = %v, %q, %v; want ErrProtocol", done, msg, err)
	}
}

func TestScramUsernameEscaping(t *testing.T) {
	t.Parallel()
	tests := []struct {
		user, want string
	}{
		{"user", "user"},
		{"a=b", "a=3Db"},
		{"a,b", "a=2Cb"},
		{"=,", "=3D=2C"},
		{",=", "=2C=3D"},
		{"=2C", "=3D2C"},
		{"ü", "ü"},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.user, func(t *testing.T) {
			t.Parallel()
			for _, ctor := range []func(string, string) Mechanism{ScramSHA256, ScramSHA512} {
				_, msg, err := withNonce(t, ctor(tt.user, "pencil"), "abc").Start()
				checkErr(t, err)
				if err != nil {
					t.Fatal(err)
				}
				if want := "n,,n=" + tt.want + ",r=abc"; string(msg) != want {
					t.Errorf("client-first = %q, want %q", msg, want)
				}
			}
		})
	}
}

func TestScramStartErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		mech Mechanism
	}{
		{"invalid utf-8 user", ScramSHA256("\xff", "pencil")},
		{"NUL in user", ScramSHA512("a\x00b", "pencil")},
		{"empty nonce", withNonce(t, ScramSHA256("u", "pencil"), "")},
		{"nonce with comma", withNonce(t, ScramSHA256("u", "pencil"), "a,b")},
		{"nonce erroring", func() Mechanism {
			m := ScramSHA256("u", "pencil").(scramMechanism)
			m.nonce = func() (string, error) { return "", errors.New("no entropy") }
			return m
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sess, msg, err := tt.mech.Start()
			checkErr(t, err)
			if err == nil || sess != nil || msg != nil {
				t.Fatalf("Start() = %v, %q, %v; want error", sess, msg, err)
			}
		})
	}
}

func TestRandomNonce(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 100 {
		n, err := randomNonce()
		if err != nil {
			t.Fatal(err)
		}
		raw, err := base64.RawStdEncoding.DecodeString(n)
		if err != nil || len(raw) < 24 {
			t.Fatalf("nonce %q: %d bytes, %v; want >= 24 bytes of base64", n, len(raw), err)
		}
		if !isPrintable(n) {
			t.Fatalf("nonce %q not printable", n)
		}
		if seen[n] {
			t.Fatalf("nonce %q repeated", n)
		}
		seen[n] = true
	}
	// Two sessions of one mechanism must not share a nonce.
	m := ScramSHA256("u", "pencil")
	_, a, _ := m.Start()
	_, b, _ := m.Start()
	if string(a) == string(b) {
		t.Fatalf("two Starts produced the same client-first %q", a)
	}
}
