package riffle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAdminScram creates credentials with the salted password computed
// here and proves them right by logging in with them: kfake checks the
// SCRAM exchange against the stored salted password.
func TestAdminScram(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-256", "admin", "admin-secret"))
	// The first alteration is answered NOT_CONTROLLER for every user, as
	// a broker that lost the controllership would: it must be retried.
	var alters atomic.Int32
	fake.ControlKey(int16(kmsg.AlterUserSCRAMCredentials), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if alters.Add(1) > 1 {
			return nil, nil, false
		}
		req := kr.(*kmsg.AlterUserSCRAMCredentialsRequest)
		resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
		for _, u := range req.Upsertions {
			r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			r.User, r.ErrorCode = u.Name, 41
			resp.Results = append(resp.Results, r)
		}
		return resp, nil, true
	})
	admin := SASL(SASLScramSHA256("admin", "admin-secret"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), admin)
	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	res, err := adm.AlterUserScramCredentials(ctx,
		// kfake's SCRAM exchange always announces 4096 iterations
		// (whatever the credential's), so logins are checked with 4096;
		// grace's 8192 is checked by DescribeUserScramCredentials.
		ScramUpsertion("carol", ScramSHA512, 4096, "carol-pw"),
		ScramUpsertion("grace", ScramSHA512, 8192, "grace-pw"),
		ScramUpsertion("dave", ScramSHA256, 0, "dave-pw"),
		ScramUpsertion("erin", ScramSHA256, 0, ""),
		ScramUpsertion("frank", 7, 0, "x"),
	)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 5 || res[0].Err != nil || res[1].Err != nil || res[2].Err != nil ||
		!errors.Is(res[3].Err, ErrInvalidConfig) || !errors.Is(res[4].Err, ErrInvalidConfig) {
		t.Fatalf("results: %+v", res)
	}
	if alters.Load() != 2 {
		t.Fatalf("%d alter requests, want 2 (NOT_CONTROLLER retried)", alters.Load())
	}
	if strings.Contains(res.Err().Error(), "pw") {
		t.Fatalf("a password in an error: %v", res.Err())
	}

	login := func(m SASLMechanism) error {
		c := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), SASL(m))
		_, err := c.Admin().ListTopics(ctx)
		return err
	}
	if err := login(SASLScramSHA512("carol", "carol-pw")); err != nil {
		t.Fatalf("carol cannot log in with the credential set: %v", err)
	}
	if err := login(SASLScramSHA256("dave", "dave-pw")); err != nil {
		t.Fatalf("dave cannot log in: %v", err)
	}
	if err := login(SASLScramSHA512("carol", "wrong")); !errors.Is(err, ErrAuth) {
		t.Fatalf("wrong password: %v", err)
	}

	desc, err := adm.DescribeUserScramCredentials(ctx, "grace", "nobody")
	if err != nil || len(desc) != 2 {
		t.Fatalf("describe: %+v %v", desc, err)
	}
	if desc[0].Err != nil || len(desc[0].Credentials) != 1 || desc[0].Credentials[0] != (ScramCredentialInfo{ScramSHA512, 8192}) {
		t.Fatalf("grace: %+v", desc[0])
	}
	if !errors.Is(desc[1].Err, ErrResourceNotFound) {
		t.Fatalf("nobody: %+v", desc[1])
	}
	all, err := adm.DescribeUserScramCredentials(ctx)
	if err != nil || len(all) != 4 || all[0].User != "admin" || all[1].User != "carol" || all[2].User != "dave" || all[3].User != "grace" {
		t.Fatalf("all users: %+v %v", all, err)
	}

	res, err = adm.AlterUserScramCredentials(ctx, ScramDeletion("dave", ScramSHA256), ScramDeletion("nobody", ScramSHA256))
	if err != nil || res[0].Err != nil || !errors.Is(res[1].Err, ErrResourceNotFound) {
		t.Fatalf("delete: %+v %v", res, err)
	}
	if err := login(SASLScramSHA256("dave", "dave-pw")); !errors.Is(err, ErrAuth) {
		t.Fatalf("dave still logs in after deletion: %v", err)
	}
}

func TestScramAlterationHidesPassword(t *testing.T) {
	alt := ScramUpsertion("u", ScramSHA256, 0, "hunter2")
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		if out := fmt.Sprintf(verb, alt); strings.Contains(out, "hunter2") {
			t.Fatalf("%s prints the password: %s", verb, out)
		}
	}
	if m, err := ParseScramMechanism("scram-sha-512"); err != nil || m != ScramSHA512 || m.String() != "SCRAM-SHA-512" {
		t.Fatal(m, err)
	}
	if _, err := ParseScramMechanism("md5"); !errors.Is(err, ErrInvalidConfig) {
		t.Fatal(err)
	}
}

func TestAdminClientQuotas(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(2))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	alice := []QuotaEntityComponent{{Type: QuotaEntityUser, Name: "alice"}}
	aliceApp := []QuotaEntityComponent{{Type: QuotaEntityUser, Name: "alice"}, {Type: QuotaEntityClientID, Name: "app"}}
	defUser := []QuotaEntityComponent{{Type: QuotaEntityUser, Default: true}}
	res, err := adm.AlterClientQuotas(ctx,
		ClientQuotaAlteration{Entity: alice, Ops: []QuotaOp{{Key: "producer_byte_rate", Value: 1024}, {Key: "consumer_byte_rate", Value: 2048}}},
		ClientQuotaAlteration{Entity: aliceApp, Ops: []QuotaOp{{Key: "request_percentage", Value: 50}}},
		ClientQuotaAlteration{Entity: nil, Ops: []QuotaOp{{Key: "producer_byte_rate", Value: 1}}},
		ClientQuotaAlteration{Entity: defUser, Ops: []QuotaOp{{Key: "producer_byte_rate", Value: 100}}},
	)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 4 || res[0].Err != nil || res[1].Err != nil || !errors.Is(res[2].Err, ErrInvalidConfig) || res[3].Err != nil {
		t.Fatalf("alter: %+v", res)
	}

	all, err := adm.DescribeClientQuotas(ctx, ClientQuotaFilter{})
	if err != nil || len(all) != 3 {
		t.Fatalf("describe all: %+v %v", all, err)
	}
	exact, err := adm.DescribeClientQuotas(ctx, ClientQuotaFilter{
		Components: []QuotaFilterComponent{{Type: QuotaEntityUser, Match: QuotaMatchExact, Name: "alice"}}, Strict: true})
	if err != nil || len(exact) != 1 || exact[0].Values["producer_byte_rate"] != 1024 || exact[0].Values["consumer_byte_rate"] != 2048 {
		t.Fatalf("alice strict: %+v %v", exact, err)
	}
	defs, err := adm.DescribeClientQuotas(ctx, ClientQuotaFilter{
		Components: []QuotaFilterComponent{{Type: QuotaEntityUser, Match: QuotaMatchDefault}}})
	if err != nil || len(defs) != 1 || !defs[0].Entity[0].Default || defs[0].Values["producer_byte_rate"] != 100 {
		t.Fatalf("default user: %+v %v", defs, err)
	}
	if _, err := adm.DescribeClientQuotas(ctx, ClientQuotaFilter{Components: []QuotaFilterComponent{{Type: "user", Match: 9}}}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("bad match: %v", err)
	}

	// Removing a quota.
	res, err = adm.AlterClientQuotas(ctx, ClientQuotaAlteration{Entity: alice, Ops: []QuotaOp{{Key: "producer_byte_rate", Remove: true}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("remove: %+v %v", res, err)
	}
	exact, err = adm.DescribeClientQuotas(ctx, ClientQuotaFilter{
		Components: []QuotaFilterComponent{{Type: QuotaEntityUser, Match: QuotaMatchExact, Name: "alice"}}, Strict: true})
	if err != nil || len(exact) != 1 || len(exact[0].Values) != 1 {
		t.Fatalf("after remove: %+v %v", exact, err)
	}
}

func TestAdminDescribeFeatures(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fm, err := cl.Admin().DescribeFeatures(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(fm.Finalized) == 0 || fm.FinalizedEpoch < 0 {
		t.Fatalf("no finalized features from kfake: %+v", fm)
	}
	// The client's own negotiation saw the same levels.
	cn, err := cl.cl.AnyConn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range fm.Finalized {
		if v := cn.Versions(); v.Feature(name) != r.Max {
			t.Fatalf("feature %s: %d here, %d negotiated", name, r.Max, v.Feature(name))
		}
	}
}
