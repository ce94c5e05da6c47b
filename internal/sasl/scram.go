package sasl

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"strconv"
	"strings"
	"unicode/utf8"
)

const (
	// minIterations is the RFC 7677 floor. Accepting fewer would let a
	// man-in-the-middle posing as the broker cheapen an offline brute force
	// of the proof we send.
	minIterations = 4096
	// maxIterations caps the PBKDF2 work a broker can make us do. Without a
	// cap a hostile broker could pin a client CPU for minutes per connection
	// attempt. Kafka's own ceiling is 16384; 1<<20 leaves generous headroom.
	maxIterations = 1 << 20
	// nonceBytes of crypto/rand entropy: RFC 5802 asks for a nonce that is
	// unpredictable; 24 bytes (192 bits) is well beyond guessing.
	nonceBytes = 24
	// maxServerErrorLen bounds how much of a server-chosen "e=" value ends up
	// in an error string, so a broker cannot flood logs through us.
	maxServerErrorLen = 64
	// gs2Header says: no channel binding, no authzid. Kafka supports neither.
	gs2Header = "n,,"
	// channelBinding is base64(gs2Header), echoed in client-final as "c=".
	channelBinding = "biws"
)

// scramAlgorithm binds a SCRAM mechanism name to its hash.
type scramAlgorithm struct {
	name    string
	newHash func() hash.Hash
}

var (
	scramSHA256 = &scramAlgorithm{name: "SCRAM-SHA-256", newHash: sha256.New}
	scramSHA512 = &scramAlgorithm{name: "SCRAM-SHA-512", newHash: sha512.New}
)

// ScramSHA256 returns the SCRAM-SHA-256 mechanism (RFC 7677) for user and
// pass. Unlike PLAIN, the password never crosses the wire and the server must
// prove it knows the stored credentials before the exchange succeeds.
func ScramSHA256(user, pass string) Mechanism {
	return scramMechanism{alg: scramSHA256, user: user, pass: secret(pass)}
}

// ScramSHA512 returns the SCRAM-SHA-512 mechanism for user and pass: the
// RFC 5802 exchange over SHA-512, as Kafka implements it. Kafka stores SCRAM
// credentials per hash, so the broker must hold SHA-512 credentials for user.
func ScramSHA512(user, pass string) Mechanism {
	return scramMechanism{alg: scramSHA512, user: user, pass: secret(pass)}
}

type scramMechanism struct {
	alg  *scramAlgorithm
	user string
	pass secret
	// nonce, when set, replaces the random client nonce. It exists so tests
	// can replay published test vectors; it is a field rather than a package
	// variable so parallel tests cannot race on it.
	nonce func() (string, error)
}

// Name implements [Mechanism].
func (m scramMechanism) Name() string { return m.alg.name }

// Start implements [Mechanism]. It rejects a username that is not valid UTF-8
// or contains NUL, since RFC 5802 cannot represent either and sending one
// would only earn an opaque rejection from the broker.
func (m scramMechanism) Start() (Session, []byte, error) {
	if !utf8.ValidString(m.user) || strings.IndexByte(m.user, 0) >= 0 {
		return nil, nil, fmt.Errorf("sasl: %s: username must be valid UTF-8 without NUL", m.alg.name)
	}
	newNonce := m.nonce
	if newNonce == nil {
		newNonce = randomNonce
	}
	nonce, err := newNonce()
	if err != nil {
		return nil, nil, fmt.Errorf("sasl: %s: generating nonce: %w", m.alg.name, err)
	}
	if nonce == "" || !isPrintable(nonce) {
		return nil, nil, fmt.Errorf("sasl: %s: invalid client nonce", m.alg.name)
	}
	bare := "n=" + escapeUsername(m.user) + ",r=" + nonce
	s := &scramSession{
		alg:             m.alg,
		user:            m.user,
		pass:            m.pass,
		clientNonce:     nonce,
		clientFirstBare: bare,
	}
	return s, []byte(gs2Header + bare), nil
}

// String implements [fmt.Stringer] without the password.
func (m scramMechanism) String() string {
	return fmt.Sprintf("%s(user=%q)", m.alg.name, m.user)
}

// GoString implements [fmt.GoStringer] without the password.
func (m scramMechanism) GoString() string {
	ctor := "ScramSHA256"
	if m.alg == scramSHA512 {
		ctor = "ScramSHA512"
	}
	return fmt.Sprintf("sasl.%s(%q, %s)", ctor, m.user, m.pass.GoString())
}

// Format implements [fmt.Formatter] so no verb can print the password.
func (m scramMechanism) Format(f fmt.State, verb rune) {
	formatSafe(f, verb, m.String(), m.GoString())
}

// LogValue implements [slog.LogValuer] without the password.
func (m scramMechanism) LogValue() slog.Value {
	return slog.GroupValue(slog.String("mechanism", m.alg.name), slog.String("user", m.user))
}

// randomNonce returns base64 of nonceBytes random bytes. Raw standard base64
// is all printable and comma-free, as RFC 5802 requires of a nonce.
func randomNonce() (string, error) {
	b := make([]byte, nonceBytes)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawStdEncoding.EncodeToString(b), nil
}

// escapeUsername applies RFC 5802's saslname encoding; "=" goes first so the
// "=" introduced by escaping "," is not escaped again.
func escapeUsername(user string) string {
	return strings.NewReplacer("=", "=3D", ",", "=2C").Replace(user)
}

type scramState uint8

const (
	awaitServerFirst scramState = iota
	awaitServerFinal
	scramDone
	scramFailed
)

func (st scramState) String() string {
	switch st {
	case awaitServerFirst:
		return "awaiting server-first"
	case awaitServerFinal:
		return "awaiting server-final"
	case scramDone:
		return "done"
	default:
		return "failed"
	}
}

type scramSession struct {
	alg             *scramAlgorithm
	user            string
	pass            secret // dropped once the salted password is derived
	clientNonce     string
	clientFirstBare string
	serverSignature []byte // expected "v=" value, known after server-first
	state           scramState
	err             error
}

// Step implements [Session].
func (s *scramSession) Step(challenge []byte) (bool, []byte, error) {
	switch s.state {
	case awaitServerFirst:
		msg, err := s.serverFirst(challenge)
		if err != nil {
			return false, nil, s.fail(err)
		}
		s.state = awaitServerFinal
		return false, msg, nil
	case awaitServerFinal:
		if err := s.serverFinal(challenge); err != nil {
			return false, nil, s.fail(err)
		}
		s.state = scramDone
		s.serverSignature = nil
		return true, nil, nil
	case scramDone:
		return false, nil, s.fail(failf(ErrProtocol, s.alg.name, "server message after authentication completed"))
	default:
		return false, nil, s.err
	}
}

// fail makes err sticky and drops secrets early: a failed session will never
// need them again, so there is no reason to keep them reachable.
func (s *scramSession) fail(err error) error {
	s.state = scramFailed
	s.err = err
	s.pass = ""
	s.serverSignature = nil
	return err
}

// serverFirst parses server-first-message and builds client-final-message.
// Attribute order is fixed by RFC 5802 (r, s, i), so a strict positional parse
// is both correct and harder to confuse than a map of attributes.
func (s *scramSession) serverFirst(challenge []byte) ([]byte, error) {
	name := s.alg.name
	serverFirst := string(challenge)
	attrs := strings.Split(serverFirst, ",")
	if strings.HasPrefix(attrs[0], "m=") {
		return nil, failf(ErrProtocol, name, "server-first requires an unsupported mandatory extension")
	}
	if v, ok := strings.CutPrefix(attrs[0], "e="); ok {
		// Not in RFC 5802's grammar for this message, but some servers
		// reject early this way; honour it rather than calling it garbage.
		return nil, failf(ErrAuthFailed, name, "server error %s", quoteServerError(v))
	}
	if len(attrs) < 3 {
		return nil, failf(ErrProtocol, name, "server-first has %d attributes, want at least 3", len(attrs))
	}
	nonce, ok := strings.CutPrefix(attrs[0], "r=")
	if !ok {
		return nil, failf(ErrProtocol, name, "server-first lacks nonce attribute")
	}
	// The server must extend our nonce; otherwise the reply may be replayed
	// from another exchange and the proof would be computed over it.
	if !strings.HasPrefix(nonce, s.clientNonce) || len(nonce) == len(s.clientNonce) {
		return nil, failf(ErrProtocol, name, "server nonce does not extend client nonce")
	}
	if !isPrintable(nonce) {
		return nil, failf(ErrProtocol, name, "server nonce contains non-printable characters")
	}
	saltB64, ok := strings.CutPrefix(attrs[1], "s=")
	if !ok {
		return nil, failf(ErrProtocol, name, "server-first lacks salt attribute")
	}
	salt, err := decodeBase64(saltB64)
	if err != nil {
		return nil, failf(ErrProtocol, name, "salt is not valid base64")
	}
	if len(salt) == 0 {
		return nil, failf(ErrProtocol, name, "salt is empty")
	}
	iterStr, ok := strings.CutPrefix(attrs[2], "i=")
	if !ok {
		return nil, failf(ErrProtocol, name, "server-first lacks iteration count attribute")
	}
	iters, err := parseIterations(iterStr)
	if err != nil {
		return nil, failf(ErrProtocol, name, "%v", err)
	}
	if !validExtensions(attrs[3:]) {
		return nil, failf(ErrProtocol, name, "server-first has a malformed trailing attribute")
	}

	h := s.alg.newHash
	salted, err := pbkdf2.Key(h, string(s.pass), salt, iters, h().Size())
	if err != nil {
		// Only reachable under FIPS 140-only restrictions; the message
		// comes from crypto/pbkdf2 and carries no key material.
		return nil, fmt.Errorf("sasl: %s: deriving salted password: %w", name, err)
	}
	s.pass = ""

	clientFinalNoProof := "c=" + channelBinding + ",r=" + nonce
	authMessage := []byte(s.clientFirstBare + "," + serverFirst + "," + clientFinalNoProof)

	clientKey := hmacSum(h, salted, []byte("Client Key"))
	storedKey := hashSum(h, clientKey)
	proof := hmacSum(h, storedKey, authMessage) // ClientSignature, XORed in place below
	for i := range proof {
		proof[i] ^= clientKey[i]
	}
	serverKey := hmacSum(h, salted, []byte("Server Key"))
	s.serverSignature = hmacSum(h, serverKey, authMessage)
	clear(salted)
	clear(clientKey)
	clear(serverKey)

	enc := base64.StdEncoding
	msg := make([]byte, 0, len(clientFinalNoProof)+3+enc.EncodedLen(len(proof)))
	msg = append(msg, clientFinalNoProof...)
	msg = append(msg, ",p="...)
	msg = enc.AppendEncode(msg, proof)
	return msg, nil
}

// serverFinal verifies server-final-message. Success requires the server's
// signature: a server that cannot produce it does not hold our credentials,
// so treating "no error" as success would let an impostor broker through.
func (s *scramSession) serverFinal(challenge []byte) error {
	name := s.alg.name
	first, rest, hasRest := strings.Cut(string(challenge), ",")
	if v, ok := strings.CutPrefix(first, "e="); ok {
		return failf(ErrAuthFailed, name, "server error %s", quoteServerError(v))
	}
	v, ok := strings.CutPrefix(first, "v=")
	if !ok {
		return failf(ErrProtocol, name, "server-final lacks verifier attribute")
	}
	if hasRest && !validExtensions(strings.Split(rest, ",")) {
		return failf(ErrProtocol, name, "server-final has a malformed trailing attribute")
	}
	sig, err := decodeBase64(v)
	if err != nil {
		return failf(ErrProtocol, name, "server signature is not valid base64")
	}
	if len(sig) != len(s.serverSignature) {
		return failf(ErrProtocol, name, "server signature is %d bytes, want %d", len(sig), len(s.serverSignature))
	}
	// hmac.Equal is constant time, so timing does not leak how much of a
	// forged signature was right.
	if !hmac.Equal(sig, s.serverSignature) {
		return failf(ErrAuthFailed, name, "server signature mismatch")
	}
	return nil
}

// String implements [fmt.Stringer]; the session holds key material, so it
// gets the same treatment as the mechanisms.
func (s scramSession) String() string {
	return fmt.Sprintf("%s session(user=%q, state=%s)", s.alg.name, s.user, s.state)
}

// GoString implements [fmt.GoStringer].
func (s scramSession) GoString() string { return "&sasl." + s.String() }

// Format implements [fmt.Formatter] so no verb can print key material.
func (s scramSession) Format(f fmt.State, verb rune) {
	formatSafe(f, verb, s.String(), s.GoString())
}

// LogValue implements [slog.LogValuer].
func (s scramSession) LogValue() slog.Value {
	return slog.GroupValue(slog.String("mechanism", s.alg.name), slog.String("user", s.user),
		slog.String("state", s.state.String()))
}

func hmacSum(h func() hash.Hash, key, data []byte) []byte {
	mac := hmac.New(h, key)
	mac.Write(data)
	return mac.Sum(nil)
}

func hashSum(h func() hash.Hash, data []byte) []byte {
	d := h()
	d.Write(data)
	return d.Sum(nil)
}

var errNotBase64 = errors.New("not base64")

// decodeBase64 is strict standard base64. Go's decoder silently skips CR and
// LF; rejecting them keeps one canonical encoding per value.
func decodeBase64(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, errNotBase64
	}
	return base64.StdEncoding.Strict().DecodeString(s)
}

// parseIterations accepts only plain decimal digits: strconv alone would also
// take a sign, and the bounds check must see the real value.
func parseIterations(v string) (int, error) {
	if v == "" || len(v) > 10 || strings.Trim(v, "0123456789") != "" {
		return 0, errors.New("iteration count is not a decimal number")
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, errors.New("iteration count is not a decimal number")
	}
	if n < minIterations {
		return 0, fmt.Errorf("iteration count %d below minimum %d", n, minIterations)
	}
	if n > maxIterations {
		return 0, fmt.Errorf("iteration count %d above maximum %d", n, maxIterations)
	}
	return n, nil
}

// validExtensions checks optional trailing attributes for key=value syntax.
// Their content is ignored, as RFC 5802 requires for unknown extensions, but
// a shape check catches truncated or concatenated messages. Keys may be longer
// than RFC 5802's single letter because Kafka's extensions (e.g. "tokenauth")
// are.
func validExtensions(attrs []string) bool {
	for _, a := range attrs {
		key, _, ok := strings.Cut(a, "=")
		if !ok || key == "" {
			return false
		}
		for i := 0; i < len(key); i++ {
			c := key[i]
			if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' {
				return false
			}
		}
	}
	return true
}

// isPrintable reports whether s matches RFC 5802's "printable": ASCII 0x21
// to 0x7E except ','.
func isPrintable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == ',' {
			return false
		}
	}
	return true
}

// quoteServerError quotes and truncates a server-chosen error value, keeping
// errors single-line and bounded however hostile the server.
func quoteServerError(v string) string {
	if len(v) > maxServerErrorLen {
		return strconv.Quote(v[:maxServerErrorLen]) + "..."
	}
	return strconv.Quote(v)
}
