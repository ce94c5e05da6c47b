package integration_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// Client quotas: set for a user, a user and client id together, and an
// IP; described through exact, strict and any-name filters; an unknown
// quota key refused; removed again. Quota changes reach the brokers
// through the metadata log (DescribeClientQuotas polls).
func TestClientQuotas(t *testing.T) {
	need(t)
	adm := client(t).Admin()
	ctx := timeout(t, 2*time.Minute)
	user, cid := name(t, "u"), name(t, "c")
	const ip = "203.0.113.7" // TEST-NET-3: no client of the suite
	u := riffle.QuotaEntityComponent{Type: riffle.QuotaEntityUser, Name: user}
	c := riffle.QuotaEntityComponent{Type: riffle.QuotaEntityClientID, Name: cid}
	a := riffle.QuotaEntityComponent{Type: riffle.QuotaEntityIP, Name: ip}
	alts := []riffle.ClientQuotaAlteration{
		{Entity: []riffle.QuotaEntityComponent{u}, Ops: []riffle.QuotaOp{{Key: "producer_byte_rate", Value: 1 << 20}, {Key: "request_percentage", Value: 200}}},
		{Entity: []riffle.QuotaEntityComponent{c, u}, Ops: []riffle.QuotaOp{{Key: "consumer_byte_rate", Value: 2 << 20}}},
		{Entity: []riffle.QuotaEntityComponent{a}, Ops: []riffle.QuotaOp{{Key: "connection_creation_rate", Value: 100}}},
	}
	t.Cleanup(func() {
		var rm []riffle.ClientQuotaAlteration
		for _, alt := range alts {
			r := riffle.ClientQuotaAlteration{Entity: alt.Entity}
			for _, op := range alt.Ops {
				r.Ops = append(r.Ops, riffle.QuotaOp{Key: op.Key, Remove: true})
			}
			rm = append(rm, r)
		}
		_, _ = adm.AlterClientQuotas(timeout(t, 30*time.Second), rm...)
	})
	res, err := adm.AlterClientQuotas(ctx, alts...)
	if err != nil || len(res) != 3 {
		t.Fatalf("AlterClientQuotas: %v %v", res, err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("AlterClientQuotas %v: %v", r.Entity, r.Err)
		}
	}
	res, err = adm.AlterClientQuotas(ctx, riffle.ClientQuotaAlteration{Entity: []riffle.QuotaEntityComponent{u}, Ops: []riffle.QuotaOp{{Key: "no_such_rate", Value: 1}}})
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, errInvalidRequestCode) {
		t.Errorf("AlterClientQuotas with an unknown key: %v %v, want INVALID_REQUEST", res, err)
	}

	// entities renders what a filter returns, e.g. "client-id=…,user=…:consumer_byte_rate=2.097152e+06".
	entities := func(f riffle.ClientQuotaFilter) ([]string, error) {
		qs, err := adm.DescribeClientQuotas(ctx, f)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, q := range qs {
			var parts []string
			for _, e := range q.Entity {
				parts = append(parts, e.String())
			}
			for _, k := range slices.Sorted(maps.Keys(q.Values)) {
				parts = append(parts, fmt.Sprintf("%s=%g", k, q.Values[k]))
			}
			out = append(out, fmt.Sprint(parts))
		}
		return out, nil
	}
	byUser := riffle.ClientQuotaFilter{Components: []riffle.QuotaFilterComponent{{Type: riffle.QuotaEntityUser, Match: riffle.QuotaMatchExact, Name: user}}}
	wantUser := fmt.Sprint([]string{"user=" + user, "producer_byte_rate=1.048576e+06", "request_percentage=200"})
	wantBoth := fmt.Sprint([]string{"client-id=" + cid, "user=" + user, "consumer_byte_rate=2.097152e+06"})
	eventually(t, time.Minute, "the quotas described", func() error {
		got, err := entities(byUser)
		if err != nil {
			return err
		}
		if want := []string{wantBoth, wantUser}; !slices.Equal(got, want) {
			return fmt.Errorf("user filter: %q, want %q", got, want)
		}
		return nil
	})
	strict := byUser
	strict.Strict = true
	if got, err := entities(strict); err != nil || !slices.Equal(got, []string{wantUser}) {
		t.Errorf("strict user filter: %q %v, want %q", got, err, wantUser)
	}
	byClient := riffle.ClientQuotaFilter{Components: []riffle.QuotaFilterComponent{{Type: riffle.QuotaEntityClientID, Match: riffle.QuotaMatchExact, Name: cid}}}
	if got, err := entities(byClient); err != nil || !slices.Equal(got, []string{wantBoth}) {
		t.Errorf("client-id filter: %q %v, want %q", got, err, wantBoth)
	}
	anyIP := riffle.ClientQuotaFilter{Components: []riffle.QuotaFilterComponent{{Type: riffle.QuotaEntityIP, Match: riffle.QuotaMatchAny}}}
	if got, err := entities(anyIP); err != nil || !slices.Contains(got, fmt.Sprint([]string{"ip=" + ip, "connection_creation_rate=100"})) {
		t.Errorf("any-IP filter: %q %v", got, err)
	}

	res, err = adm.AlterClientQuotas(ctx, riffle.ClientQuotaAlteration{Entity: []riffle.QuotaEntityComponent{u},
		Ops: []riffle.QuotaOp{{Key: "producer_byte_rate", Remove: true}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("removing producer_byte_rate: %v %v", res, err)
	}
	eventually(t, time.Minute, "producer_byte_rate removed", func() error {
		got, err := entities(strict)
		if err != nil {
			return err
		}
		if want := fmt.Sprint([]string{"user=" + user, "request_percentage=200"}); !slices.Equal(got, []string{want}) {
			return fmt.Errorf("%q, want %q", got, want)
		}
		return nil
	})
}
