package riffle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/riffle-go/riffle/internal/sasl"
)

// OAuthBearerToken is what an OAUTHBEARER token source returns: a bearer
// token (RFC 6750, typically a JWT) and what the client needs to know about
// it. Printing it never shows Token.
type OAuthBearerToken struct {
	// Token is the bearer token sent to the broker.
	Token string
	// Expiry is when the token stops being valid. The client reuses a
	// token for new connections until 80% of its lifetime has passed (as
	// the Java client's sasl.login.refresh.window.factor), then asks the
	// source again; it never sends a token past Expiry. Zero means
	// unknown: the source is called for every authentication.
	Expiry time.Time
	// Principal, if set, is the authorization identity (the gs2 "a="
	// field): the broker acts as this principal if the token allows it.
	// Usually empty: the broker takes the principal from the token.
	Principal string
	// Extensions are SASL extensions (KIP-342) sent with the token, such
	// as "logicalCluster" on Confluent Cloud. Keys are letters only and
	// not "auth"; values are non-empty printable ASCII (RFC 7628).
	Extensions map[string]string
}

// String shows the token's expiry, principal and extension keys; never
// the token or the extension values.
func (t OAuthBearerToken) String() string {
	var b strings.Builder
	b.WriteString("OAuthBearerToken(")
	if t.Expiry.IsZero() {
		b.WriteString("expiry unknown")
	} else {
		b.WriteString("expires " + t.Expiry.UTC().Format(time.RFC3339))
	}
	if t.Principal != "" {
		fmt.Fprintf(&b, ", principal=%q", t.Principal)
	}
	if len(t.Extensions) > 0 {
		fmt.Fprintf(&b, ", extensions=%v", slices.Sorted(maps.Keys(t.Extensions)))
	}
	b.WriteString(")")
	return b.String()
}

// GoString is String: %#v must not print the token either.
func (t OAuthBearerToken) GoString() string { return "riffle." + t.String() }

// Format makes every fmt verb print String, so none reaches the token.
func (t OAuthBearerToken) Format(f fmt.State, verb rune) {
	formatRedacted(f, verb, t.String(), t.GoString())
}

// LogValue logs the expiry and principal, never the token.
func (t OAuthBearerToken) LogValue() slog.Value {
	return slog.GroupValue(slog.Time("expiry", t.Expiry), slog.String("principal", t.Principal),
		slog.Any("extensions", slices.Sorted(maps.Keys(t.Extensions))))
}

// OAuthBearerError is the broker's rejection of an OAUTHBEARER token: its
// RFC 7628 §3.2.2 error message. The error returned by the client matches
// ErrAuth (and ErrSASLAuthentication when the broker says so, as Kafka
// does) and holds an *OAuthBearerError, which errors.As finds.
type OAuthBearerError struct {
	// Status is the broker's status, e.g. "invalid_token" (RFC 6750).
	Status string
	// Scope is the scope the broker wants, if it said.
	Scope string
	// OpenIDConfiguration is the identity provider's discovery URL, if
	// the broker said.
	OpenIDConfiguration string
}

func (e *OAuthBearerError) Error() string {
	s := fmt.Sprintf("token rejected: status %q", e.Status)
	if e.Scope != "" {
		s += fmt.Sprintf(", scope %q", e.Scope)
	}
	if e.OpenIDConfiguration != "" {
		s += fmt.Sprintf(", openid-configuration %q", e.OpenIDConfiguration)
	}
	return s
}

// SASLOAuthBearer is SASL/OAUTHBEARER (RFC 7628, KIP-255) with tokens from
// source, which fetches one from an identity provider (for instance with
// golang.org/x/oauth2's client credentials flow). Use it only over TLS:
// whoever reads the token can replay it until it expires.
//
// source is called with the authentication's context when a connection
// needs a token and none is cached (see OAuthBearerToken.Expiry), by one
// connection at a time. An error from it, an expired token or one that
// is not a valid bearer token, and extensions KIP-342 forbids fail the
// authentication with an error matching ErrAuth that wraps source's
// error: the call that needed the connection fails without retrying, so a
// source that may fail transiently should retry within ctx itself.
func SASLOAuthBearer(source func(ctx context.Context) (OAuthBearerToken, error)) SASLMechanism {
	return &oauthBearer{source: source, sem: make(chan struct{}, 1)}
}

// refreshFactor is the share of a token's lifetime after which a new
// token is fetched (Java's sasl.login.refresh.window.factor default).
const refreshFactor = 0.8

type oauthBearer struct {
	source func(ctx context.Context) (OAuthBearerToken, error)
	sem    chan struct{} // one source call at a time; honours ctx

	mu      sync.Mutex
	cached  OAuthBearerToken
	refresh time.Time // when cached is to be replaced; zero: nothing cached
}

// Name implements SASLMechanism.
func (o *oauthBearer) Name() string { return sasl.OAuthBearerName }

// String implements fmt.Stringer.
func (o *oauthBearer) String() string { return sasl.OAuthBearerName }

// GoString implements fmt.GoStringer.
func (o *oauthBearer) GoString() string { return "riffle.SASLOAuthBearer(...)" }

// Format makes every verb print the name, never the cached token.
func (o *oauthBearer) Format(f fmt.State, verb rune) {
	formatRedacted(f, verb, o.String(), o.GoString())
}

// LogValue logs the mechanism name.
func (o *oauthBearer) LogValue() slog.Value {
	return slog.GroupValue(slog.String("mechanism", sasl.OAuthBearerName))
}

// Authenticate implements SASLMechanism.
func (o *oauthBearer) Authenticate(ctx context.Context, _ SASLBroker) (SASLSession, []byte, error) {
	tok, err := o.token(ctx)
	if err != nil {
		return nil, nil, err
	}
	msg, err := sasl.OAuthBearerMessage(tok.Principal, tok.Token, tok.Extensions)
	if err != nil {
		return nil, nil, err
	}
	return &oauthBearerSession{}, msg, nil
}

// token returns the cached token, or a new one from the source.
func (o *oauthBearer) token(ctx context.Context) (OAuthBearerToken, error) {
	if t, ok := o.fresh(); ok {
		return t, nil
	}
	select {
	case o.sem <- struct{}{}:
	case <-ctx.Done():
		return OAuthBearerToken{}, fmt.Errorf("waiting for the token source: %w", ctx.Err())
	}
	defer func() { <-o.sem }()
	if t, ok := o.fresh(); ok { // another connection fetched it meanwhile
		return t, nil
	}
	if o.source == nil {
		return OAuthBearerToken{}, errors.New("SASLOAuthBearer: nil token source")
	}
	now := time.Now()
	t, err := o.source(ctx)
	if err != nil {
		return OAuthBearerToken{}, fmt.Errorf("token source: %w", err)
	}
	if !t.Expiry.IsZero() && !t.Expiry.After(time.Now()) {
		return OAuthBearerToken{}, fmt.Errorf("token source returned a token that expired at %s", t.Expiry.UTC().Format(time.RFC3339))
	}
	if !t.Expiry.IsZero() {
		t.Extensions = maps.Clone(t.Extensions)
		o.mu.Lock()
		o.cached, o.refresh = t, now.Add(time.Duration(float64(t.Expiry.Sub(now))*refreshFactor))
		o.mu.Unlock()
	}
	return t, nil
}

func (o *oauthBearer) fresh() (OAuthBearerToken, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.refresh.IsZero() || !time.Now().Before(o.refresh) {
		return OAuthBearerToken{}, false
	}
	return o.cached, true
}

// oauthBearerSession waits for the broker's verdict: an empty challenge is
// success; an error message is answered with 0x01 (RFC 7628 §3.2.3), after
// which the broker fails the exchange.
type oauthBearerSession struct{ done bool }

func (s *oauthBearerSession) Challenge(_ context.Context, c []byte) (bool, []byte, error) {
	if s.done {
		return false, nil, fmt.Errorf("%w: %s: server message after authentication completed", sasl.ErrProtocol, sasl.OAuthBearerName)
	}
	s.done = true
	if len(c) == 0 {
		return true, nil, nil
	}
	f, err := sasl.ParseOAuthBearerFailure(c)
	if err != nil {
		return false, []byte{0x01}, err
	}
	return false, []byte{0x01}, &OAuthBearerError{Status: f.Status, Scope: f.Scope, OpenIDConfiguration: f.OpenIDConfiguration}
}
