package riffle

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

func TestACLEnums(t *testing.T) {
	if s := ACLResourceTransactionalID.String(); s != "TRANSACTIONAL_ID" {
		t.Fatalf("String %q", s)
	}
	if s := ACLOperation(99).String(); s != "ACLOperation(99)" {
		t.Fatalf("out of range String %q", s)
	}
	for _, tc := range []struct {
		in   string
		want ACLOperation
	}{{"read", ACLOperationRead}, {"describe-configs", ACLOperationDescribeConfigs}, {" ALL ", ACLOperationAll}} {
		got, err := ParseACLOperation(tc.in)
		if err != nil || got != tc.want {
			t.Fatalf("ParseACLOperation(%q) = %v, %v", tc.in, got, err)
		}
	}
	for _, bad := range []string{"", "unknown", "reed"} {
		if _, err := ParseACLOperation(bad); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("ParseACLOperation(%q): %v", bad, err)
		}
	}
	if p, err := ParseACLPatternType("prefixed"); err != nil || p != ACLPatternPrefixed {
		t.Fatal(p, err)
	}
	if p, err := ParseACLPermission("Deny"); err != nil || p != ACLPermissionDeny {
		t.Fatal(p, err)
	}
	if r, err := ParseACLResourceType("transactional-id"); err != nil || r != ACLResourceTransactionalID {
		t.Fatal(r, err)
	}
}

func TestAdminACLs(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(2))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	readOrders := ACLBinding{ResourceType: ACLResourceTopic, ResourceName: "orders", Principal: "User:alice",
		Operation: ACLOperationRead, Permission: ACLPermissionAllow}
	writePrefix := ACLBinding{ResourceType: ACLResourceTopic, ResourceName: "ord", PatternType: ACLPatternPrefixed,
		Principal: "User:bob", Host: "10.0.0.1", Operation: ACLOperationWrite, Permission: ACLPermissionDeny}
	group := ACLBinding{ResourceType: ACLResourceGroup, ResourceName: "billing", Principal: "User:alice",
		Operation: ACLOperationRead, Permission: ACLPermissionAllow}
	noPrincipal := ACLBinding{ResourceType: ACLResourceTopic, ResourceName: "x", Operation: ACLOperationRead, Permission: ACLPermissionAllow}
	anyOp := ACLBinding{ResourceType: ACLResourceTopic, ResourceName: "x", Principal: "User:a", Operation: ACLOperationAny, Permission: ACLPermissionAllow}

	res, err := adm.CreateACLs(ctx, readOrders, noPrincipal, writePrefix, anyOp, group)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 5 || res[0].Err != nil || res[2].Err != nil || res[4].Err != nil {
		t.Fatalf("create: %+v", res)
	}
	if !errors.Is(res[1].Err, ErrInvalidConfig) || !errors.Is(res[3].Err, ErrInvalidConfig) {
		t.Fatalf("invalid bindings must fail alone, typed: %+v", res)
	}
	if res[0].ACL.Host != "*" || res[0].ACL.PatternType != ACLPatternLiteral {
		t.Fatalf("defaults not filled in: %+v", res[0].ACL)
	}

	all, err := adm.DescribeACLs(ctx, ACLFilter{})
	if err != nil || len(all) != 3 {
		t.Fatalf("describe all: %+v %v", all, err)
	}
	// Sorted: topics before groups, names in order.
	if all[0].ResourceName != "ord" || all[1].ResourceName != "orders" || all[2].ResourceType != ACLResourceGroup {
		t.Fatalf("order: %+v", all)
	}
	if all[0] != (ACLBinding{ACLResourceTopic, "ord", ACLPatternPrefixed, "User:bob", "10.0.0.1", ACLOperationWrite, ACLPermissionDeny}) {
		t.Fatalf("round trip: %+v", all[0])
	}
	alice, err := adm.DescribeACLs(ctx, ACLFilter{Principal: "User:alice", ResourceType: ACLResourceTopic})
	if err != nil || len(alice) != 1 || alice[0].ResourceName != "orders" {
		t.Fatalf("describe alice's topics: %+v %v", alice, err)
	}
	if _, err := adm.DescribeACLs(ctx, ACLFilter{Operation: 42}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("bad filter: %v", err)
	}

	del, err := adm.DeleteACLs(ctx,
		ACLFilter{Principal: "User:alice"},
		ACLFilter{ResourceName: "nothing-here"},
		ACLFilter{Permission: 9},
	)
	if err != nil {
		t.Fatal(err)
	}
	if len(del) != 3 || del[0].Err != nil || len(del[0].Deleted) != 2 || del[1].Err != nil || len(del[1].Deleted) != 0 {
		t.Fatalf("delete: %+v", del)
	}
	if del[0].Deleted[0].ACL.ResourceName != "orders" || del[0].Deleted[1].ACL.ResourceName != "billing" || del[0].Deleted[0].Err != nil {
		t.Fatalf("deleted: %+v", del[0].Deleted)
	}
	if !errors.Is(del[2].Err, ErrInvalidConfig) {
		t.Fatalf("bad filter must fail alone: %+v", del[2])
	}
	left, err := adm.DescribeACLs(ctx, ACLFilter{})
	if err != nil || len(left) != 1 || left[0].Principal != "User:bob" {
		t.Fatalf("left after delete: %+v %v", left, err)
	}
}
