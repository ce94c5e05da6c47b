package riffle_test

import (
	"context"
	"crypto/tls"
	"time"

	"github.com/riffle-go/riffle"
)

// fetchToken stands for a call to an identity provider, for instance
// golang.org/x/oauth2/clientcredentials' Config.Token.
func fetchToken(ctx context.Context) (token string, expiry time.Time, err error) {
	return "eyJhbGciOiJSUzI1NiJ9.e30.c2ln", time.Now().Add(time.Hour), nil
}

// OAUTHBEARER with a token from an identity provider. The client reuses
// a token for new connections until 80% of its lifetime, and connections
// re-authenticate before the session the broker granted ends (KIP-368).
func ExampleSASLOAuthBearer() {
	cl, err := riffle.NewClient(
		riffle.SeedBrokers("kafka-1:9093"),
		riffle.DialTLS(&tls.Config{}),
		riffle.SASL(riffle.SASLOAuthBearer(func(ctx context.Context) (riffle.OAuthBearerToken, error) {
			tok, expiry, err := fetchToken(ctx)
			if err != nil {
				return riffle.OAuthBearerToken{}, err
			}
			return riffle.OAuthBearerToken{
				Token:      tok,
				Expiry:     expiry,
				Extensions: map[string]string{"logicalCluster": "lkc-abc123"},
			}, nil
		})),
	)
	if err != nil {
		panic(err)
	}
	defer cl.Close()
}
