package awsmskiam

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/internal/saslfake"
	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*Cluster).run"))
}

const (
	accessKey = "AKIDEXAMPLE"
	secretKey = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
)

func staticCreds(session string) aws.CredentialsProvider {
	return aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secretKey, SessionToken: session, Source: "test"}, nil
	})
}

// verify checks a payload as MSK would, with its own SigV4 code (not the
// SDK's): the fields, then the signature recomputed from the secret.
func verify(payload []byte, secret, region string, now time.Time) error {
	var f map[string]string
	if err := json.Unmarshal(payload, &f); err != nil {
		return fmt.Errorf("payload is not a JSON object of strings: %v", err)
	}
	want := map[string]string{
		"version":             "2020_10_22",
		"action":              "kafka-cluster:Connect",
		"x-amz-algorithm":     "AWS4-HMAC-SHA256",
		"x-amz-signedheaders": "host",
		"x-amz-expires":       "900",
		"x-amz-date":          now.UTC().Format("20060102T150405Z"),
		"x-amz-credential":    accessKey + "/" + now.UTC().Format("20060102") + "/" + region + "/kafka-cluster/aws4_request",
	}
	for k, v := range want {
		if f[k] != v {
			return fmt.Errorf("%s = %q, want %q", k, f[k], v)
		}
	}
	if f["host"] == "" || !strings.HasPrefix(f["user-agent"], "riffle/") || f["x-amz-signature"] == "" {
		return fmt.Errorf("host %q, user-agent %q, signature %q", f["host"], f["user-agent"], f["x-amz-signature"])
	}
	// Canonical request of a presigned GET / with the host header signed.
	q := url.Values{}
	for k, v := range f {
		switch k {
		case "version", "host", "user-agent", "x-amz-signature":
		case "action":
			q.Set("Action", v)
		default:
			name := canonicalName(k)
			if name == "" {
				return fmt.Errorf("unexpected field %q", k)
			}
			q.Set(name, v)
		}
	}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var qs []string
	for _, k := range keys {
		qs = append(qs, awsEscape(k)+"="+awsEscape(q.Get(k)))
	}
	empty := sha256.Sum256(nil)
	canon := strings.Join([]string{"GET", "/", strings.Join(qs, "&"), "host:" + f["host"] + "\n", "host", hex.EncodeToString(empty[:])}, "\n")
	ch := sha256.Sum256([]byte(canon))
	date := now.UTC().Format("20060102")
	sts := strings.Join([]string{"AWS4-HMAC-SHA256", f["x-amz-date"], date + "/" + region + "/kafka-cluster/aws4_request", hex.EncodeToString(ch[:])}, "\n")
	mac := func(key []byte, s string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(s))
		return h.Sum(nil)
	}
	k := mac(mac(mac(mac([]byte("AWS4"+secret), date), region), "kafka-cluster"), "aws4_request")
	if sig := hex.EncodeToString(mac(k, sts)); sig != f["x-amz-signature"] {
		return fmt.Errorf("signature %s, recomputed %s", f["x-amz-signature"], sig)
	}
	return nil
}

// canonicalName is the query parameter a payload field was (the payload
// lower-cases them; SigV4 signs them as sent).
func canonicalName(k string) string {
	return map[string]string{
		"x-amz-algorithm":      "X-Amz-Algorithm",
		"x-amz-credential":     "X-Amz-Credential",
		"x-amz-date":           "X-Amz-Date",
		"x-amz-expires":        "X-Amz-Expires",
		"x-amz-signedheaders":  "X-Amz-SignedHeaders",
		"x-amz-security-token": "X-Amz-Security-Token",
	}[k]
}

// awsEscape is SigV4's URI encoding: everything but unreserved characters.
func awsEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("-_.~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func TestPayloadSignature(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 20, 30, 0, time.UTC)
	for _, session := range []string{"", "FwoGZXIvYXdzEXAMPLE/token+with=chars"} {
		m := Mechanism(Credentials(staticCreds(session))).(*mechanism)
		m.now = func() time.Time { return now }
		host := "b-1.mycluster.abc123.c2.kafka.eu-west-1.amazonaws.com"
		_, payload, err := m.Authenticate(context.Background(), riffle.SASLBroker{Addr: host + ":9098", Host: host})
		if err != nil {
			t.Fatal(err)
		}
		if err := verify(payload, secretKey, "eu-west-1", now); err != nil {
			t.Fatalf("session %q: %v\n%s", session, err, payload)
		}
		var f map[string]string
		json.Unmarshal(payload, &f)
		if f["x-amz-security-token"] != session {
			t.Errorf("x-amz-security-token %q, want %q", f["x-amz-security-token"], session)
		}
		if f["host"] != host {
			t.Errorf("host %q", f["host"])
		}
		if err := verify(payload, "another secret", "eu-west-1", now); err == nil {
			t.Fatal("the check accepts a signature made with another secret")
		}
	}
}

func TestRegionFromHost(t *testing.T) {
	for host, want := range map[string]string{
		"b-1.c.abc.c2.kafka.eu-west-1.amazonaws.com":           "eu-west-1",
		"boot-abc.c1.kafka-serverless.us-east-2.amazonaws.com": "us-east-2",
		"b-2.c.x.c3.kafka.cn-north-1.amazonaws.com.cn":         "cn-north-1",
		"127.0.0.1":       "",
		"amazonaws.com":   "",
		"x.amazonaws.com": "",
	} {
		if got := RegionFromHost(host); got != want {
			t.Errorf("%s: %q, want %q", host, got, want)
		}
	}
}

// TestMSKIAM authenticates through a fake broker front that checks every
// payload's signature as MSK would.
func TestMSKIAM(t *testing.T) {
	kf, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer kf.Close()
	var mu sync.Mutex
	var checked []error
	fake, err := saslfake.New(kf.ListenAddrs(), saslfake.Config{
		Mechanisms:      []string{Name},
		SessionLifetime: time.Hour,
		Validate: func(a saslfake.Auth) ([]byte, error) {
			var f map[string]string
			json.Unmarshal(a.Bytes, &f)
			now, _ := time.Parse("20060102T150405Z", f["x-amz-date"])
			err := verify(a.Bytes, secretKey, "us-east-1", now)
			mu.Lock()
			checked = append(checked, err)
			mu.Unlock()
			if err != nil {
				return nil, errors.New("Access denied")
			}
			return []byte(`{"version":"2020_10_22","request-id":"abc"}`), nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	cl, err := riffle.NewClient(riffle.SeedBrokers(fake.Addrs()...),
		riffle.SASL(Mechanism(Region("us-east-1"), Credentials(staticCreds("tok")))))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topics, err := cl.Admin().ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(topics) != 1 || topics[0].Name != "t" {
		t.Fatalf("topics %+v", topics)
	}
	mu.Lock()
	if len(checked) == 0 {
		t.Fatal("the fake checked no payload")
	}
	for _, err := range checked {
		if err != nil {
			t.Error(err)
		}
	}
	mu.Unlock()

	// The wrong secret: MSK says no, the client says ErrAuth at once.
	bad := aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: "wrong"}, nil
	})
	cl2, err := riffle.NewClient(riffle.SeedBrokers(fake.Addrs()...), riffle.SASL(Mechanism(Region("us-east-1"), Credentials(bad))))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	_, err = cl2.Admin().ListTopics(ctx)
	if !errors.Is(err, riffle.ErrAuth) || ctx.Err() != nil || !strings.Contains(err.Error(), "Access denied") || !strings.Contains(err.Error(), Name) {
		t.Fatalf("wrong secret: want ErrAuth naming %s and the broker's message, got %v", Name, err)
	}
	if strings.Contains(err.Error(), "wrong") {
		t.Fatalf("error shows the secret: %v", err)
	}

	// A provider that fails: the error says why, and nothing is sent.
	errSTS := errors.New("sts unavailable")
	failing := aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return aws.Credentials{}, errSTS })
	cl3, err := riffle.NewClient(riffle.SeedBrokers(fake.Addrs()...), riffle.SASL(Mechanism(Region("us-east-1"), Credentials(failing))))
	if err != nil {
		t.Fatal(err)
	}
	defer cl3.Close()
	if _, err = cl3.Admin().ListTopics(ctx); !errors.Is(err, riffle.ErrAuth) || !errors.Is(err, errSTS) {
		t.Fatalf("failing provider: want ErrAuth wrapping its error, got %v", err)
	}
}

func TestNoRegion(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	m := Mechanism(Credentials(staticCreds("")))
	_, _, err := m.Authenticate(context.Background(), riffle.SASLBroker{Addr: "10.0.0.1:9098", Host: "10.0.0.1"})
	if err == nil || !strings.Contains(err.Error(), "awsmskiam.Region") {
		t.Fatalf("want an error pointing at Region, got %v", err)
	}
}

func TestNeverPrintsSecrets(t *testing.T) {
	m := Mechanism(Credentials(staticCreds("sess")), Region("eu-west-1"))
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		if out := fmt.Sprintf(verb, m); strings.Contains(out, secretKey) || strings.Contains(out, "sess") {
			t.Errorf("%s prints a secret: %s", verb, out)
		}
	}
}
