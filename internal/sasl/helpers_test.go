package sasl

import (
	"crypto/hmac"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"testing"
)

// testPasswords lists every password used in this package's tests, so any
// error seen by checkErr can be checked against all of them.
var testPasswords = []string{"pencil", "s3cr3t-Pa55w0rd!", "hunter2-longer-than-most"}

// checkErr asserts that err, however it is formatted, contains no password.
// Every test that produces an error passes it through here.
func checkErr(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	for _, out := range []string{err.Error(), fmt.Sprintf("%v", err), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
		for _, p := range testPasswords {
			if strings.Contains(out, p) {
				t.Fatalf("error output %q contains password %q", out, p)
			}
		}
	}
}

// withNonce fixes the client nonce of a SCRAM mechanism.
func withNonce(t testing.TB, m Mechanism, nonce string) Mechanism {
	t.Helper()
	sm, ok := m.(scramMechanism)
	if !ok {
		t.Fatalf("%T is not a SCRAM mechanism", m)
	}
	sm.nonce = func() (string, error) { return nonce, nil }
	return sm
}

// refPBKDF2 is an independent PBKDF2-HMAC (RFC 8018 §5.2) so the end-to-end
// test does not check crypto/pbkdf2 against itself.
func refPBKDF2(h func() hash.Hash, password string, salt []byte, iter int) []byte {
	prf := hmac.New(h, []byte(password))
	// One block suffices: SCRAM's key length equals the hash size.
	prf.Write(salt)
	prf.Write(binary.BigEndian.AppendUint32(nil, 1))
	u := prf.Sum(nil)
	out := append([]byte(nil), u...)
	for i := 1; i < iter; i++ {
		prf.Reset()
		prf.Write(u)
		u = prf.Sum(u[:0])
		subtle.XORBytes(out, out, u)
	}
	return out
}

func refHMAC(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// testServer is a minimal SCRAM server following RFC 5802 §3 from the
// server's point of view: it stores only StoredKey and ServerKey and verifies
// the client's proof the way a broker does.
type testServer struct {
	h           func() hash.Hash
	user        string
	salt        []byte
	iters       int
	serverNonce string

	storedKey, serverKey []byte
	clientFirstBare      string
	serverFirst          string
	nonce                string
}

func newTestServer(h func() hash.Hash, user, pass string, salt []byte, iters int, serverNonce string) *testServer {
	salted := refPBKDF2(h, pass, salt, iters)
	clientKey := refHMAC(h, salted, "Client Key")
	d := h()
	d.Write(clientKey)
	return &testServer{
		h: h, user: user, salt: salt, iters: iters, serverNonce: serverNonce,
		storedKey: d.Sum(nil),
		serverKey: refHMAC(h, salted, "Server Key"),
	}
}

func unescapeSaslname(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == ',':
			return "", errors.New("unescaped comma")
		case s[i] != '=':
			b.WriteByte(s[i])
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
			i += 2
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
			i += 2
		default:
			return "", errors.New("bad escape")
		}
	}
	return b.String(), nil
}

func (s *testServer) first(clientFirst []byte) (string, error) {
	bare, ok := strings.CutPrefix(string(clientFirst), "n,,")
	if !ok {
		return "", errors.New("bad gs2 header")
	}
	parts := strings.Split(bare, ",")
	if len(parts) != 2 || !strings.HasPrefix(parts[0], "n=") || !strings.HasPrefix(parts[1], "r=") {
		return "", fmt.Errorf("bad client-first %q", bare)
	}
	user, err := unescapeSaslname(parts[0][2:])
	if err != nil {
		return "", err
	}
	if user != s.user {
		return "", fmt.Errorf("user %q, want %q", user, s.user)
	}
	s.clientFirstBare = bare
	s.nonce = parts[1][2:] + s.serverNonce
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(s.salt) + ",i=" + strconv.Itoa(s.iters)
	return s.serverFirst, nil
}

func (s *testServer) final(clientFinal []byte) (string, error) {
	withoutProof, proofB64, ok := strings.Cut(string(clientFinal), ",p=")
	if !ok {
		return "", errors.New("no proof")
	}
	if withoutProof != "c=biws,r="+s.nonce {
		return "", fmt.Errorf("bad client-final %q", withoutProof)
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil {
		return "", err
	}
	authMessage := s.clientFirstBare + "," + s.serverFirst + "," + withoutProof
	clientSig := refHMAC(s.h, s.storedKey, authMessage)
	if len(proof) != len(clientSig) {
		return "e=invalid-proof", nil
	}
	clientKey := make([]byte, len(proof))
	subtle.XORBytes(clientKey, proof, clientSig)
	d := s.h()
	d.Write(clientKey)
	if !hmac.Equal(d.Sum(nil), s.storedKey) {
		return "e=invalid-proof", nil
	}
	return "v=" + base64.StdEncoding.EncodeToString(refHMAC(s.h, s.serverKey, authMessage)), nil
}
