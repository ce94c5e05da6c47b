// Package awsmskiam is the AWS_MSK_IAM SASL mechanism for Riffle: it
// authenticates to Amazon MSK (and MSK Serverless) with AWS IAM
// credentials, as the Java client's aws-msk-iam-auth library does.
//
// It lives in a module of its own so that programs that do not use it do
// not get the AWS SDK in their module graph:
//
//	cl, err := riffle.NewClient(
//		riffle.SeedBrokers("b-1.mycluster.abc123.c2.kafka.eu-west-1.amazonaws.com:9098"),
//		riffle.DialTLS(&tls.Config{}),
//		riffle.SASL(awsmskiam.Mechanism()),
//	)
//
// Every authentication (each new connection, and each re-authentication
// before MSK's session ends) signs a fresh "kafka-cluster:Connect" request
// with AWS Signature Version 4, presigned for the broker's host, and sends
// it as the JSON payload MSK expects. Credentials come from the AWS SDK's
// default chain (environment, shared config and credentials files, web
// identity, ECS and EC2 roles) unless Credentials gives a provider; the
// region is the one in the broker's host name unless Region says.
package awsmskiam

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/riffle-go/riffle"
)

// Name is the SASL mechanism name.
const Name = "AWS_MSK_IAM"

const (
	// payloadVersion is the only payload version MSK accepts.
	payloadVersion = "2020_10_22"
	service        = "kafka-cluster"
	action         = "kafka-cluster:Connect"
	// expires is how long the signed request is valid, in seconds (the
	// Java library's 15 minutes).
	expires = "900"
)

// emptyPayloadHash is the SHA-256 of an empty body: the signed request has
// none.
var emptyPayloadHash = func() string { h := sha256.Sum256(nil); return hex.EncodeToString(h[:]) }()

// Option configures the mechanism.
type Option func(*mechanism)

// Credentials signs with p instead of the default credential chain. Wrap a
// provider that fetches (STS, SSO) in aws.NewCredentialsCache so that it
// does not fetch for every connection.
func Credentials(p aws.CredentialsProvider) Option {
	return func(m *mechanism) { m.creds = p }
}

// Region signs for region instead of the one in the broker's host name
// (needed when connecting through an address that is not the broker's
// AWS name, such as a private link or a tunnel). Default: the region in
// the host name, such as eu-west-1 in "b-1.c.abc.c2.kafka.eu-west-1.amazonaws.com",
// else the default configuration's region (AWS_REGION, shared config).
func Region(region string) Option { return func(m *mechanism) { m.region = region } }

// UserAgent is sent in the payload; MSK logs it, and IAM policies can test
// it with the aws:UserAgent condition key. Default "riffle/<version>
// (<go version>)".
func UserAgent(ua string) Option { return func(m *mechanism) { m.userAgent = ua } }

// Mechanism returns the AWS_MSK_IAM mechanism, for riffle.SASL. Use it
// over TLS only (MSK's IAM listener, port 9098, requires it). Printing it
// shows only its name and region: it holds no secret, only a provider.
func Mechanism(opts ...Option) riffle.SASLMechanism {
	m := &mechanism{userAgent: fmt.Sprintf("riffle/%s (%s)", riffle.Version, runtime.Version()), now: time.Now}
	for _, o := range opts {
		o(m)
	}
	return m
}

type mechanism struct {
	creds     aws.CredentialsProvider
	region    string
	userAgent string
	now       func() time.Time

	loadOnce sync.Mutex // guards the lazily loaded default configuration
	defaults *aws.Config
}

// Name implements riffle.SASLMechanism.
func (m *mechanism) Name() string { return Name }

// String implements fmt.Stringer.
func (m *mechanism) String() string {
	if m.region != "" {
		return fmt.Sprintf("%s(region=%s)", Name, m.region)
	}
	return Name
}

// LogValue implements slog.LogValuer.
func (m *mechanism) LogValue() slog.Value {
	return slog.GroupValue(slog.String("mechanism", Name), slog.String("region", m.region))
}

// Authenticate implements riffle.SASLMechanism: it signs a Connect request
// for broker's host and returns it as the first and only client message.
func (m *mechanism) Authenticate(ctx context.Context, broker riffle.SASLBroker) (riffle.SASLSession, []byte, error) {
	payload, err := m.payload(ctx, broker.Host)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", Name, err)
	}
	return &session{}, payload, nil
}

// payload builds the signed JSON the broker verifies.
func (m *mechanism) payload(ctx context.Context, host string) ([]byte, error) {
	if host == "" {
		return nil, errors.New("no broker host to sign for")
	}
	region := m.region
	if region == "" {
		region = RegionFromHost(host)
	}
	creds := m.creds
	if creds == nil || region == "" {
		def, err := m.defaultConfig(ctx)
		if err != nil {
			return nil, err
		}
		if creds == nil {
			creds = def.Credentials
		}
		if region == "" {
			region = def.Region
		}
	}
	if region == "" {
		return nil, fmt.Errorf("no region: the host %q does not name one, no default region is configured; use awsmskiam.Region", host)
	}
	if creds == nil {
		return nil, errors.New("no credentials provider")
	}
	c, err := creds.Retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("retrieving AWS credentials: %w", err)
	}
	q := url.Values{}
	q.Set("Action", action)
	q.Set("X-Amz-Expires", expires)
	u := url.URL{Scheme: "kafka", Host: host, Path: "/", RawQuery: q.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("host %q: %w", host, err)
	}
	signed, _, err := v4.NewSigner().PresignHTTP(ctx, c, req, emptyPayloadHash, service, region, m.now().UTC())
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	su, err := url.Parse(signed)
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	fields := map[string]string{
		"version":    payloadVersion,
		"host":       host,
		"user-agent": m.userAgent,
	}
	for k, v := range su.Query() {
		if len(v) > 0 {
			fields[strings.ToLower(k)] = v[0]
		}
	}
	return json.Marshal(fields)
}

// defaultConfig loads the SDK's default configuration once.
func (m *mechanism) defaultConfig(ctx context.Context) (*aws.Config, error) {
	m.loadOnce.Lock()
	defer m.loadOnce.Unlock()
	if m.defaults == nil {
		cfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("loading the default AWS configuration: %w", err)
		}
		m.defaults = &cfg
	}
	return m.defaults, nil
}

// session waits for MSK's answer: a JSON document (version, request id)
// on success; MSK reports a failure as an error code, which the client
// turns into riffle.ErrAuth.
type session struct{}

func (*session) Challenge(_ context.Context, c []byte) (bool, []byte, error) {
	if len(c) == 0 {
		return false, nil, errors.New(Name + ": empty server response")
	}
	return true, nil, nil
}

// awsSuffixes are the DNS suffixes of AWS partitions whose broker names
// end in ".<region><suffix>".
var awsSuffixes = []string{".amazonaws.com", ".amazonaws.com.cn", ".c2s.ic.gov", ".sc2s.sgov.gov"}

// RegionFromHost returns the AWS region in an MSK broker host name, such as
// "eu-west-1" for "b-1.mycluster.abc123.c2.kafka.eu-west-1.amazonaws.com",
// or "" if host is not such a name.
func RegionFromHost(host string) string {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, suffix := range awsSuffixes {
		rest, ok := strings.CutSuffix(host, suffix)
		if !ok {
			continue
		}
		if i := strings.LastIndexByte(rest, '.'); i >= 0 && i+1 < len(rest) {
			return rest[i+1:]
		}
	}
	return ""
}
