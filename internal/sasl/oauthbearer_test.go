package sasl

import (
	"errors"
	"strings"
	"testing"
)

func TestOAuthBearerMessage(t *testing.T) {
	for _, tc := range []struct {
		name, authz, token string
		ext                map[string]string
		want               string
	}{
		{"plain", "", "abc.def-ghi_", nil, "n,,\x01auth=Bearer abc.def-ghi_\x01\x01"},
		{"principal", "alice", "t0k=", nil, "n,a=alice,\x01auth=Bearer t0k=\x01\x01"},
		{"extensions sorted", "", "tok", map[string]string{"traceId": "x y", "logicalCluster": "lkc-1"},
			"n,,\x01auth=Bearer tok\x01logicalCluster=lkc-1\x01traceId=x y\x01\x01"},
	} {
		got, err := OAuthBearerMessage(tc.authz, tc.token, tc.ext)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if string(got) != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestOAuthBearerMessageRejects(t *testing.T) {
	const secret = "s3cr3t"
	for _, tc := range []struct {
		name, authz, token string
		ext                map[string]string
	}{
		{"empty token", "", "", nil},
		{"control-A in token", "", secret + "\x01x=y", nil},
		{"space in token", "", secret + " x", nil},
		{"comma in principal", "a,b", secret, nil},
		{"reserved key", "", secret, map[string]string{"auth": "x"}},
		{"digit in key", "", secret, map[string]string{"k1": "x"}},
		{"empty key", "", secret, map[string]string{"": "x"}},
		{"empty value", "", secret, map[string]string{"k": ""}},
		{"control-A in value", "", secret, map[string]string{"k": "a\x01b"}},
		{"non-ASCII value", "", secret, map[string]string{"k": "é"}},
	} {
		_, err := OAuthBearerMessage(tc.authz, tc.token, tc.ext)
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: error shows the token: %v", tc.name, err)
		}
	}
}

func TestParseOAuthBearerFailure(t *testing.T) {
	f, err := ParseOAuthBearerFailure([]byte(`{"status":"invalid_token","scope":"kafka","openid-configuration":"https://idp/.well-known"}`))
	if err != nil || f.Status != "invalid_token" || f.Scope != "kafka" || f.OpenIDConfiguration != "https://idp/.well-known" {
		t.Fatalf("got %+v, %v", f, err)
	}
	for _, bad := range []string{"", "x", `{"scope":"a"}`, `{"status":1}`, `[]`} {
		if _, err := ParseOAuthBearerFailure([]byte(bad)); !errors.Is(err, ErrProtocol) {
			t.Errorf("%q: %v, want ErrProtocol", bad, err)
		}
	}
	f, _ = ParseOAuthBearerFailure([]byte(`{"status":"` + strings.Repeat("x", 10000) + `"}`))
	if len(f.Status) > 300 {
		t.Errorf("status not clipped: %d bytes", len(f.Status))
	}
}

func FuzzParseOAuthBearerFailure(f *testing.F) {
	f.Add([]byte(`{"status":"invalid_token"}`))
	f.Fuzz(func(t *testing.T, b []byte) { ParseOAuthBearerFailure(b) })
}
