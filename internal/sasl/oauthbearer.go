package sasl

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// OAuthBearerName is the OAUTHBEARER mechanism (RFC 7628, KIP-255).
const OAuthBearerName = "OAUTHBEARER"

var (
	// b64token is RFC 6750 §2.1: what a bearer token may be. Anything
	// else (a control-A above all) would break the message's framing.
	b64token = regexp.MustCompile(`^[A-Za-z0-9\-._~+/]+=*$`)
	// extKey and extValue are RFC 7628 §3.1 as KIP-342 enforces them.
	extKey   = regexp.MustCompile(`^[A-Za-z]+$`)
	extValue = regexp.MustCompile(`^[\x21-\x7E \t\r\n]+$`)
)

// OAuthBearerMessage is the client's initial response (RFC 7628 §3.1):
//
//	n,[a=authzid],^Aauth=Bearer <token>[^Akey=value...]^A^A
//
// with extensions sorted by key so the message is deterministic. It fails
// on a token that is not an RFC 6750 b64token, an authzid with a comma or
// a control character, and extensions KIP-342 forbids: the key "auth", a
// key that is not letters only, an empty value or one with a control-A.
// Errors never contain the token.
func OAuthBearerMessage(authzid, token string, ext map[string]string) ([]byte, error) {
	if !b64token.MatchString(token) {
		return nil, fmt.Errorf("sasl: %s: the token is not an RFC 6750 bearer token (empty, or characters outside [A-Za-z0-9-._~+/=])", OAuthBearerName)
	}
	if strings.ContainsFunc(authzid, func(r rune) bool { return r == ',' || r == '=' || r < 0x20 || r == 0x7f }) {
		return nil, fmt.Errorf("sasl: %s: principal %q must not contain ',', '=' or control characters", OAuthBearerName, authzid)
	}
	if err := ValidateOAuthBearerExtensions(ext); err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString("n,")
	if authzid != "" {
		b.WriteString("a=")
		b.WriteString(authzid)
	}
	b.WriteString(",\x01auth=Bearer ")
	b.WriteString(token)
	keys := make([]string, 0, len(ext))
	for k := range ext {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteString("\x01")
		b.WriteString(k)
		b.WriteString("=")
		b.WriteString(ext[k])
	}
	b.WriteString("\x01\x01")
	return []byte(b.String()), nil
}

// ValidateOAuthBearerExtensions checks SASL extensions as KIP-342 does:
// keys are letters only and not "auth" (reserved for the token), values
// are non-empty printable ASCII, space, tab, CR or LF.
func ValidateOAuthBearerExtensions(ext map[string]string) error {
	for k, v := range ext {
		switch {
		case k == "auth":
			return fmt.Errorf("sasl: %s: extension key \"auth\" is reserved", OAuthBearerName)
		case !extKey.MatchString(k):
			return fmt.Errorf("sasl: %s: extension key %q must be letters only ([A-Za-z]+)", OAuthBearerName, k)
		case !extValue.MatchString(v):
			return fmt.Errorf("sasl: %s: extension %q has an empty value or one with characters outside RFC 7628's value set", OAuthBearerName, k)
		}
	}
	return nil
}

// OAuthBearerFailure is a server's error message (RFC 7628 §3.2.2), sent
// as a challenge in place of success.
type OAuthBearerFailure struct {
	Status              string `json:"status"`
	Scope               string `json:"scope,omitempty"`
	OpenIDConfiguration string `json:"openid-configuration,omitempty"`
}

// ParseOAuthBearerFailure reads a server's error message. A message that
// is not such JSON, or has no status, is ErrProtocol. The fields are
// server-controlled: they are cut to a sane length.
func ParseOAuthBearerFailure(challenge []byte) (OAuthBearerFailure, error) {
	var f OAuthBearerFailure
	if err := json.Unmarshal(challenge, &f); err != nil || f.Status == "" {
		return OAuthBearerFailure{}, failf(ErrProtocol, OAuthBearerName, "server message of %d bytes is not an RFC 7628 error (JSON with a status)", len(challenge))
	}
	f.Status = clip(f.Status)
	f.Scope = clip(f.Scope)
	f.OpenIDConfiguration = clip(f.OpenIDConfiguration)
	return f, nil
}

func clip(s string) string {
	if len(s) > 4*maxServerErrorLen {
		return s[:4*maxServerErrorLen] + "..."
	}
	return s
}
