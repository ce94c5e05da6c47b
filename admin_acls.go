package riffle

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/riffle-go/riffle/internal/errs"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ACLs (KIP-140; prefixed patterns KIP-290): describe, create and delete
// access control entries. Brokers keep ACLs cluster-wide, so every call
// goes to any broker. The enums below carry their wire values and print
// as Java's AdminClient names them (TOPIC, PREFIXED, READ, ALLOW).

// ACLResourceType is the kind of resource an ACL protects.
// ACLResourceAny only appears in filters.
type ACLResourceType int8

// ACLResourceUnknown is UNKNOWN.
const ACLResourceUnknown ACLResourceType = 0

// ACLResourceAny is ANY.
const ACLResourceAny ACLResourceType = 1

// ACLResourceTopic is TOPIC.
const ACLResourceTopic ACLResourceType = 2

// ACLResourceGroup is GROUP.
const ACLResourceGroup ACLResourceType = 3

// ACLResourceCluster is CLUSTER.
const ACLResourceCluster ACLResourceType = 4

// ACLResourceTransactionalID is TRANSACTIONAL_ID.
const ACLResourceTransactionalID ACLResourceType = 5

// ACLResourceDelegationToken is DELEGATION_TOKEN.
const ACLResourceDelegationToken ACLResourceType = 6

// ACLResourceUser is USER.
const ACLResourceUser ACLResourceType = 7

var aclResourceNames = []string{"UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"}

// String returns the Java name, e.g. TOPIC or TRANSACTIONAL_ID.
func (t ACLResourceType) String() string {
	return enumName(aclResourceNames, int8(t), "ACLResourceType")
}

// ParseACLResourceType parses a resource type by its name (any case; '-'
// for '_'), e.g. "topic" or "transactional-id".
func ParseACLResourceType(s string) (ACLResourceType, error) {
	n, err := parseEnum(aclResourceNames, s, "resource type")
	return ACLResourceType(n), err
}

// ACLPatternType says how an ACL's resource name matches resources.
// ACLPatternAny and ACLPatternMatch only appear in filters: Any matches
// ACLs of every pattern type by name as given, Match the ACLs that apply
// to the named resource (literal, the "*" wildcard and prefixes of it).
type ACLPatternType int8

// ACLPatternUnknown is UNKNOWN.
const ACLPatternUnknown ACLPatternType = 0

// ACLPatternAny is ANY.
const ACLPatternAny ACLPatternType = 1

// ACLPatternMatch is MATCH.
const ACLPatternMatch ACLPatternType = 2

// ACLPatternLiteral is LITERAL.
const ACLPatternLiteral ACLPatternType = 3

// ACLPatternPrefixed is PREFIXED.
const ACLPatternPrefixed ACLPatternType = 4

var aclPatternNames = []string{"UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED"}

// String returns LITERAL, PREFIXED, MATCH, ANY or UNKNOWN.
func (p ACLPatternType) String() string { return enumName(aclPatternNames, int8(p), "ACLPatternType") }

// ParseACLPatternType parses a pattern type by its name (any case).
func ParseACLPatternType(s string) (ACLPatternType, error) {
	n, err := parseEnum(aclPatternNames, s, "pattern type")
	return ACLPatternType(n), err
}

// ACLOperation is what an ACL allows or denies. ACLOperationAny only
// appears in filters; ACLOperationAll in an ACL covers every operation.
type ACLOperation int8

// ACLOperationUnknown is UNKNOWN.
const ACLOperationUnknown ACLOperation = 0

// ACLOperationAny is ANY.
const ACLOperationAny ACLOperation = 1

// ACLOperationAll is ALL.
const ACLOperationAll ACLOperation = 2

// ACLOperationRead is READ.
const ACLOperationRead ACLOperation = 3

// ACLOperationWrite is WRITE.
const ACLOperationWrite ACLOperation = 4

// ACLOperationCreate is CREATE.
const ACLOperationCreate ACLOperation = 5

// ACLOperationDelete is DELETE.
const ACLOperationDelete ACLOperation = 6

// ACLOperationAlter is ALTER.
const ACLOperationAlter ACLOperation = 7

// ACLOperationDescribe is DESCRIBE.
const ACLOperationDescribe ACLOperation = 8

// ACLOperationClusterAction is CLUSTER_ACTION.
const ACLOperationClusterAction ACLOperation = 9

// ACLOperationDescribeConfigs is DESCRIBE_CONFIGS.
const ACLOperationDescribeConfigs ACLOperation = 10

// ACLOperationAlterConfigs is ALTER_CONFIGS.
const ACLOperationAlterConfigs ACLOperation = 11

// ACLOperationIdempotentWrite is IDEMPOTENT_WRITE.
const ACLOperationIdempotentWrite ACLOperation = 12

// ACLOperationCreateTokens is CREATE_TOKENS.
const ACLOperationCreateTokens ACLOperation = 13

// ACLOperationDescribeTokens is DESCRIBE_TOKENS.
const ACLOperationDescribeTokens ACLOperation = 14

// ACLOperationTwoPhaseCommit is TWO_PHASE_COMMIT.
const ACLOperationTwoPhaseCommit ACLOperation = 15

var aclOperationNames = []string{"UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
	"CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS", "TWO_PHASE_COMMIT"}

// String returns the Java name, e.g. READ or DESCRIBE_CONFIGS.
func (o ACLOperation) String() string { return enumName(aclOperationNames, int8(o), "ACLOperation") }

// ParseACLOperation parses an operation by its name (any case; '-' for
// '_'), e.g. "read" or "describe-configs".
func ParseACLOperation(s string) (ACLOperation, error) {
	n, err := parseEnum(aclOperationNames, s, "operation")
	return ACLOperation(n), err
}

// ACLOperationSet is a set of ACL operations: what the client's principal
// may do with a resource, as brokers report it (KIP-430; Java's
// authorizedOperations). The zero value is not Known: the operations
// were not asked for, or the broker did not report them.
type ACLOperationSet struct {
	bits  uint32 // bit i: ACLOperation(i)
	known bool
}

// aclOperationsNotProvided is the bitfield of a response that does not
// report authorized operations (Integer.MIN_VALUE in Java).
const aclOperationsNotProvided int32 = math.MinInt32

// aclOperationsOf decodes a response's authorized-operations bitfield, in
// which bit i set means ACLOperation(i) is allowed. As Java's admin client
// does, it leaves out UNKNOWN, ANY and ALL, which name no operation one
// may perform; it keeps the bits of operations newer than this client,
// which print as ACLOperation(n).
func aclOperationsOf(field int32) ACLOperationSet {
	if field == aclOperationsNotProvided {
		return ACLOperationSet{}
	}
	const none = 1<<ACLOperationUnknown | 1<<ACLOperationAny | 1<<ACLOperationAll
	return ACLOperationSet{bits: uint32(field) &^ none, known: true}
}

// Known reports whether the set was reported: false when the operations
// were not asked for (IncludeAuthorizedOperations) or the broker did not
// report them (too old, or it omitted them).
func (s ACLOperationSet) Known() bool { return s.known }

// Has reports whether op is in the set.
func (s ACLOperationSet) Has(op ACLOperation) bool {
	return op >= 0 && op < 32 && s.bits&(1<<uint(op)) != 0
}

// Operations returns the operations of the set in wire-value order (READ
// before WRITE); nil when the set is not Known, empty when it is known to
// be empty.
func (s ACLOperationSet) Operations() []ACLOperation {
	if !s.known {
		return nil
	}
	out := []ACLOperation{}
	for i := range 32 {
		if s.bits&(1<<uint(i)) != 0 {
			out = append(out, ACLOperation(i))
		}
	}
	return out
}

// String returns the operations' Java names, comma-separated (e.g.
// "READ,DESCRIBE"); "none" for a known empty set, "unknown" for a set
// that is not Known.
func (s ACLOperationSet) String() string {
	ops := s.Operations()
	switch {
	case ops == nil:
		return "unknown"
	case len(ops) == 0:
		return "none"
	}
	names := make([]string, len(ops))
	for i, op := range ops {
		names[i] = op.String()
	}
	return strings.Join(names, ",")
}

// ACLPermission says whether an ACL allows or denies its operation.
// ACLPermissionAny only appears in filters.
type ACLPermission int8

// ACLPermissionUnknown is UNKNOWN.
const ACLPermissionUnknown ACLPermission = 0

// ACLPermissionAny is ANY.
const ACLPermissionAny ACLPermission = 1

// ACLPermissionDeny is DENY.
const ACLPermissionDeny ACLPermission = 2

// ACLPermissionAllow is ALLOW.
const ACLPermissionAllow ACLPermission = 3

var aclPermissionNames = []string{"UNKNOWN", "ANY", "DENY", "ALLOW"}

// String returns ALLOW, DENY, ANY or UNKNOWN.
func (p ACLPermission) String() string { return enumName(aclPermissionNames, int8(p), "ACLPermission") }

// ParseACLPermission parses a permission by its name (any case).
func ParseACLPermission(s string) (ACLPermission, error) {
	n, err := parseEnum(aclPermissionNames, s, "permission")
	return ACLPermission(n), err
}

func enumName(names []string, v int8, typ string) string {
	if v >= 0 && int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, v)
}

func parseEnum(names []string, s, what string) (int8, error) {
	up := strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(s), "-", "_"))
	for i, n := range names {
		if i > 0 && n == up { // UNKNOWN is not something to ask for
			return int8(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown ACL %s %q (want one of %s)", ErrInvalidConfig, what, s, strings.Join(names[1:], ", "))
}

// ACLBinding is one ACL: Principal may (or may not, per Permission) do
// Operation on the resources of ResourceType that ResourceName matches
// per PatternType, from Host.
type ACLBinding struct {
	ResourceType ACLResourceType
	// ResourceName is the topic, group or transactional id name, or a
	// prefix of it (ACLPatternPrefixed), "*" for every one, and
	// "kafka-cluster" for the cluster.
	ResourceName string
	// PatternType is ACLPatternLiteral or ACLPatternPrefixed; zero means
	// literal in CreateACLs.
	PatternType ACLPatternType
	// Principal is e.g. "User:alice", or "User:*" for every user.
	Principal string
	// Host is the client address the ACL applies to; "" means every host
	// ("*") in CreateACLs.
	Host       string
	Operation  ACLOperation
	Permission ACLPermission
}

// String renders the binding as Java does, roughly:
// (TOPIC:LITERAL:orders, User:alice@*, READ ALLOW).
func (b ACLBinding) String() string {
	return fmt.Sprintf("(%s:%s:%s, %s@%s, %s %s)", b.ResourceType, b.PatternType, b.ResourceName, b.Principal, b.Host, b.Operation, b.Permission)
}

// ACLFilter selects ACLs for DescribeACLs and DeleteACLs. Its zero value
// matches every ACL: a zero enum means any (ACLResourceAny,
// ACLPatternAny, ACLOperationAny, ACLPermissionAny), an empty string any
// name, principal or host.
type ACLFilter struct {
	ResourceType ACLResourceType
	ResourceName string
	// PatternType ACLPatternMatch selects the ACLs that apply to
	// ResourceName (literal ones, the wildcard, and matching prefixes).
	PatternType ACLPatternType
	Principal   string
	Host        string
	Operation   ACLOperation
	Permission  ACLPermission
}

// wire returns the filter with its zero values made "any", or an error
// for a value out of range.
func (f ACLFilter) wire() (ACLFilter, error) {
	if f.ResourceType == ACLResourceUnknown {
		f.ResourceType = ACLResourceAny
	}
	if f.PatternType == ACLPatternUnknown {
		f.PatternType = ACLPatternAny
	}
	if f.Operation == ACLOperationUnknown {
		f.Operation = ACLOperationAny
	}
	if f.Permission == ACLPermissionUnknown {
		f.Permission = ACLPermissionAny
	}
	switch {
	case f.ResourceType < 0 || f.ResourceType > ACLResourceUser:
		return f, fmt.Errorf("%w: ACL filter resource type %v", ErrInvalidConfig, f.ResourceType)
	case f.PatternType < 0 || f.PatternType > ACLPatternPrefixed:
		return f, fmt.Errorf("%w: ACL filter pattern type %v", ErrInvalidConfig, f.PatternType)
	case f.Operation < 0 || f.Operation > ACLOperationTwoPhaseCommit:
		return f, fmt.Errorf("%w: ACL filter operation %v", ErrInvalidConfig, f.Operation)
	case f.Permission < 0 || f.Permission > ACLPermissionAllow:
		return f, fmt.Errorf("%w: ACL filter permission %v", ErrInvalidConfig, f.Permission)
	}
	return f, nil
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// wire returns the binding with its defaults filled in, or an error
// saying what is missing or out of range.
func (b ACLBinding) wire() (ACLBinding, error) {
	if b.PatternType == ACLPatternUnknown {
		b.PatternType = ACLPatternLiteral
	}
	if b.Host == "" {
		b.Host = "*"
	}
	var bad string
	switch {
	case b.ResourceType < ACLResourceTopic || b.ResourceType > ACLResourceUser:
		bad = "resource type " + b.ResourceType.String()
	case b.ResourceName == "":
		bad = "empty resource name"
	case b.PatternType != ACLPatternLiteral && b.PatternType != ACLPatternPrefixed:
		bad = "pattern type " + b.PatternType.String() + " (want LITERAL or PREFIXED)"
	case b.Principal == "":
		bad = "empty principal (want e.g. User:alice)"
	case b.Operation < ACLOperationAll || b.Operation > ACLOperationTwoPhaseCommit:
		bad = "operation " + b.Operation.String()
	case b.Permission != ACLPermissionAllow && b.Permission != ACLPermissionDeny:
		bad = "permission " + b.Permission.String() + " (want ALLOW or DENY)"
	}
	if bad != "" {
		return b, fmt.Errorf("%w: ACL %v: %s", ErrInvalidConfig, b, bad)
	}
	return b, nil
}

// DescribeACLs returns the ACLs filter matches, sorted by resource type,
// name, pattern, principal, host, operation and permission. A broker
// error (e.g. SECURITY_DISABLED when the cluster has no authorizer,
// CLUSTER_AUTHORIZATION_FAILED) fails the call; so does a filter value
// out of range (ErrInvalidConfig).
func (a *Admin) DescribeACLs(ctx context.Context, filter ACLFilter) ([]ACLBinding, error) {
	f, err := filter.wire()
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceType(f.ResourceType)
	req.ResourceName = optString(f.ResourceName)
	req.ResourcePatternType = kmsg.ACLResourcePatternType(f.PatternType)
	req.Principal = optString(f.Principal)
	req.Host = optString(f.Host)
	req.Operation = kmsg.ACLOperation(f.Operation)
	req.PermissionType = kmsg.ACLPermissionType(f.Permission)
	resp, err := a.c.cl.RequestAny(ctx, req)
	if err != nil {
		return nil, err
	}
	r := resp.(*kmsg.DescribeACLsResponse)
	if err := withMessage(r.ErrorCode, r.ErrorMessage); err != nil {
		return nil, fmt.Errorf("describing ACLs: %w", err)
	}
	out := []ACLBinding{}
	for _, res := range r.Resources {
		for _, acl := range res.ACLs {
			out = append(out, ACLBinding{
				ResourceType: ACLResourceType(res.ResourceType), ResourceName: res.ResourceName,
				PatternType: ACLPatternType(res.ResourcePatternType), Principal: acl.Principal, Host: acl.Host,
				Operation: ACLOperation(acl.Operation), Permission: ACLPermission(acl.PermissionType),
			})
		}
	}
	sortACLs(out)
	return out, nil
}

func sortACLs(acls []ACLBinding) {
	sort.Slice(acls, func(i, j int) bool { return aclLess(acls[i], acls[j]) })
}

func aclLess(a, b ACLBinding) bool {
	switch {
	case a.ResourceType != b.ResourceType:
		return a.ResourceType < b.ResourceType
	case a.ResourceName != b.ResourceName:
		return a.ResourceName < b.ResourceName
	case a.PatternType != b.PatternType:
		return a.PatternType < b.PatternType
	case a.Principal != b.Principal:
		return a.Principal < b.Principal
	case a.Host != b.Host:
		return a.Host < b.Host
	case a.Operation != b.Operation:
		return a.Operation < b.Operation
	}
	return a.Permission < b.Permission
}

// ACLResult is the outcome of creating one ACL. Err is nil on success,
// wraps ErrInvalidConfig for a binding rejected before sending (nothing
// was sent for it), or is the broker's *KafkaError.
type ACLResult struct {
	// ACL is the binding as sent (Host "*" and PatternType literal when
	// they were left zero).
	ACL ACLBinding
	Err error
}

// ACLResults is one result per ACL, in request order.
type ACLResults []ACLResult

// Err joins the per-ACL errors (nil if every ACL was created).
func (rs ACLResults) Err() error {
	var all []error
	for _, r := range rs {
		if r.Err != nil {
			all = append(all, fmt.Errorf("ACL %v: %w", r.ACL, r.Err))
		}
	}
	return errors.Join(all...)
}

// CreateACLs creates ACLs, one result per ACL, in request order. Creating
// an ACL that exists already succeeds.
func (a *Admin) CreateACLs(ctx context.Context, acls ...ACLBinding) (ACLResults, error) {
	out := make(ACLResults, len(acls))
	req := kmsg.NewPtrCreateACLsRequest()
	var sent []int // indexes of out, per creation
	for i, b := range acls {
		w, err := b.wire()
		out[i] = ACLResult{ACL: w, Err: err}
		if err != nil {
			continue
		}
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType = kmsg.ACLResourceType(w.ResourceType)
		c.ResourceName = w.ResourceName
		c.ResourcePatternType = kmsg.ACLResourcePatternType(w.PatternType)
		c.Principal = w.Principal
		c.Host = w.Host
		c.Operation = kmsg.ACLOperation(w.Operation)
		c.PermissionType = kmsg.ACLPermissionType(w.Permission)
		req.Creations = append(req.Creations, c)
		sent = append(sent, i)
	}
	if len(sent) == 0 {
		return out, nil
	}
	resp, err := a.c.cl.RequestAny(ctx, req)
	if err != nil {
		return nil, err
	}
	results := resp.(*kmsg.CreateACLsResponse).Results
	for k, i := range sent {
		if k >= len(results) {
			out[i].Err = fmt.Errorf("%w: %d results for %d ACLs", errs.ErrMalformed, len(results), len(sent))
			continue
		}
		out[i].Err = withMessage(results[k].ErrorCode, results[k].ErrorMessage)
	}
	return out, nil
}

// DeletedACL is one ACL a DeleteACLs filter matched. Err is nil when it
// was deleted.
type DeletedACL struct {
	ACL ACLBinding
	Err error
}

// DeleteACLsResult is the outcome of one DeleteACLs filter.
type DeleteACLsResult struct {
	Filter ACLFilter
	// Deleted are the ACLs the filter matched, sorted; empty when it
	// matched none (which is no error).
	Deleted []DeletedACL
	// Err is the filter's error: a value out of range (ErrInvalidConfig,
	// nothing sent), or the broker's, e.g. CLUSTER_AUTHORIZATION_FAILED.
	Err error
}

// DeleteACLs deletes the ACLs each filter matches (a zero filter matches
// every ACL), one result per filter, in request order.
func (a *Admin) DeleteACLs(ctx context.Context, filters ...ACLFilter) ([]DeleteACLsResult, error) {
	out := make([]DeleteACLsResult, len(filters))
	req := kmsg.NewPtrDeleteACLsRequest()
	var sent []int
	for i, f := range filters {
		out[i].Filter = f
		w, err := f.wire()
		if err != nil {
			out[i].Err = err
			continue
		}
		rf := kmsg.NewDeleteACLsRequestFilter()
		rf.ResourceType = kmsg.ACLResourceType(w.ResourceType)
		rf.ResourceName = optString(w.ResourceName)
		rf.ResourcePatternType = kmsg.ACLResourcePatternType(w.PatternType)
		rf.Principal = optString(w.Principal)
		rf.Host = optString(w.Host)
		rf.Operation = kmsg.ACLOperation(w.Operation)
		rf.PermissionType = kmsg.ACLPermissionType(w.Permission)
		req.Filters = append(req.Filters, rf)
		sent = append(sent, i)
	}
	if len(sent) == 0 {
		return out, nil
	}
	resp, err := a.c.cl.RequestAny(ctx, req)
	if err != nil {
		return nil, err
	}
	results := resp.(*kmsg.DeleteACLsResponse).Results
	for k, i := range sent {
		if k >= len(results) {
			out[i].Err = fmt.Errorf("%w: %d results for %d filters", errs.ErrMalformed, len(results), len(sent))
			continue
		}
		r := results[k]
		out[i].Err = withMessage(r.ErrorCode, r.ErrorMessage)
		out[i].Deleted = make([]DeletedACL, 0, len(r.MatchingACLs))
		for _, m := range r.MatchingACLs {
			out[i].Deleted = append(out[i].Deleted, DeletedACL{ACL: ACLBinding{
				ResourceType: ACLResourceType(m.ResourceType), ResourceName: m.ResourceName,
				PatternType: ACLPatternType(m.ResourcePatternType), Principal: m.Principal, Host: m.Host,
				Operation: ACLOperation(m.Operation), Permission: ACLPermission(m.PermissionType),
			}, Err: withMessage(m.ErrorCode, m.ErrorMessage)})
		}
		sort.SliceStable(out[i].Deleted, func(x, y int) bool {
			return aclLess(out[i].Deleted[x].ACL, out[i].Deleted[y].ACL)
		})
	}
	return out, nil
}
