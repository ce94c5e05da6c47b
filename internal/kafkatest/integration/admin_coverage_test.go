package integration_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/riffle-go/riffle"
)

// adminCoverage names, for every exported method of *riffle.Admin and
// *riffle.ValidateOnlyAdmin, the test of this suite that calls it against
// the real broker. A method added to either type fails
// TestEveryAdminMethodMeetsKafka until it has a real-broker test here.
var adminCoverage = map[string]string{
	"Admin.AbortTransaction":              "TestAbortHangingTransaction",
	"Admin.AlterClientQuotas":             "TestClientQuotas",
	"Admin.AlterGroupConfigs":             "TestGroupAdmin",
	"Admin.AlterGroupOffsets":             "TestGroupAdmin",
	"Admin.AlterPartitionReassignments":   "TestReassignAndElectLeaders",
	"Admin.AlterReplicaLogDirs":           "TestAlterReplicaLogDirs",
	"Admin.AlterShareGroupOffsets":        "TestShareGroupOffsetsAdmin",
	"Admin.AlterTopicConfigs":             "TestTopicConfigsValidateOnly",
	"Admin.AlterUserScramCredentials":     "TestScramCredentialsLogIn",
	"Admin.CreateACLs":                    "TestAdminAuthorization",
	"Admin.CreatePartitions":              "TestAdminBasics",
	"Admin.CreateTopics":                  "TestReassignAndElectLeaders",
	"Admin.DeleteACLs":                    "TestACLsEnforced",
	"Admin.DeleteGroupOffsets":            "TestGroupAdmin",
	"Admin.DeleteGroups":                  "TestGroupAdmin",
	"Admin.DeleteRecords":                 "TestAdminBasics",
	"Admin.DeleteShareGroupOffsets":       "TestShareGroupOffsetsAdmin",
	"Admin.DeleteTopics":                  "TestAdminBasics",
	"Admin.DescribeACLs":                  "TestACLsEnforced",
	"Admin.DescribeBrokerConfigs":         "TestBrokerConfigsSynonyms",
	"Admin.DescribeBrokerLoggers":         "TestBrokerLoggers",
	"Admin.DescribeClientQuotas":          "TestClientQuotas",
	"Admin.DescribeCluster":               "TestAdminAuthorization",
	"Admin.DescribeFeatures":              "TestAdminBasics",
	"Admin.DescribeGroupConfigs":          "TestGroupAdmin",
	"Admin.DescribeGroups":                "TestGroupAdmin",
	"Admin.DescribeLogDirs":               "TestReassignAndElectLeaders",
	"Admin.DescribeProducers":             "TestTransactionAdmin",
	"Admin.DescribeShareGroupOffsets":     "TestShareGroupOffsetsAdmin",
	"Admin.DescribeShareGroups":           "TestShareGroupAcceptReleaseReject",
	"Admin.DescribeTopicConfigs":          "TestTopicConfigsValidateOnly",
	"Admin.DescribeTopics":                "TestAdminAuthorization",
	"Admin.DescribeTransactions":          "TestTransactionAdmin",
	"Admin.DescribeUserScramCredentials":  "TestScramCredentialsLogIn",
	"Admin.ElectLeaders":                  "TestReassignAndElectLeaders",
	"Admin.FetchOffsets":                  "TestGroupAdmin",
	"Admin.GroupLag":                      "TestGroupAdmin",
	"Admin.IncrementalAlterBrokerConfigs": "TestBrokerConfigsSynonyms",
	"Admin.IncrementalAlterBrokerLoggers": "TestBrokerLoggers",
	"Admin.ListGroups":                    "TestGroupAdmin",
	"Admin.ListOffsets":                   "TestAdminBasics",
	"Admin.ListOffsetsIsolated":           "TestTransactionAdmin",
	"Admin.ListPartitionReassignments":    "TestReassignAndElectLeaders",
	"Admin.ListShareGroups":               "TestShareGroupOffsetsAdmin",
	"Admin.ListTopics":                    "TestAdminBasics",
	"Admin.ListTransactions":              "TestTransactionAdmin",
	"Admin.PreviewResetOffsets":           "TestGroupAdmin",
	"Admin.ResetOffsets":                  "TestGroupAdmin",
	"Admin.UpdateFeatures":                "TestUpdateFeatures",
	"Admin.ValidateOnly":                  "TestTopicConfigsValidateOnly",

	"ValidateOnlyAdmin.AlterGroupConfigs":             "TestGroupAdmin",
	"ValidateOnlyAdmin.AlterTopicConfigs":             "TestTopicConfigsValidateOnly",
	"ValidateOnlyAdmin.CreatePartitions":              "TestTopicConfigsValidateOnly",
	"ValidateOnlyAdmin.CreateTopics":                  "TestTopicConfigsValidateOnly",
	"ValidateOnlyAdmin.IncrementalAlterBrokerConfigs": "TestBrokerConfigsSynonyms",
	"ValidateOnlyAdmin.IncrementalAlterBrokerLoggers": "TestBrokerLoggers",
	"ValidateOnlyAdmin.UpdateFeatures":                "TestUpdateFeatures",
}

// Every exported Admin method (and ValidateOnlyAdmin's) is in
// adminCoverage, and the test named there calls it: a method of that name
// is called in the test's body (a ValidateOnlyAdmin method's test also
// calls ValidateOnly). Needs no broker: it reads this package's sources.
func TestEveryAdminMethodMeetsKafka(t *testing.T) {
	var methods []string
	for _, typ := range []reflect.Type{reflect.TypeFor[*riffle.Admin](), reflect.TypeFor[*riffle.ValidateOnlyAdmin]()} {
		for m := range typ.Methods() {
			methods = append(methods, typ.Elem().Name()+"."+m.Name)
		}
	}
	if len(methods) < 50 {
		t.Fatalf("only %d methods found by reflection: %v", len(methods), methods)
	}
	calls := calledIn(t)
	for _, m := range methods {
		test, ok := adminCoverage[m]
		if !ok {
			t.Errorf("%s has no real-broker test: call it from one in internal/kafkatest/integration and add it to adminCoverage", m)
			continue
		}
		typ, method, _ := strings.Cut(m, ".")
		called, ok := calls[test]
		switch {
		case !ok:
			t.Errorf("%s: adminCoverage names %s, which is no function of this package", m, test)
		case !called[method]:
			t.Errorf("%s: %s does not call %s", m, test, method)
		case typ == "ValidateOnlyAdmin" && !called["ValidateOnly"]:
			t.Errorf("%s: %s does not call ValidateOnly", m, test)
		}
	}
	for m := range adminCoverage {
		if !slices.Contains(methods, m) {
			t.Errorf("adminCoverage lists %s, which riffle does not have", m)
		}
	}
}

// calledIn returns, for every function of this package's test files, the
// names of the methods called in it (x.Name(...)).
func calledIn(t *testing.T) map[string]map[string]bool {
	t.Helper()
	files, err := filepath.Glob("*_test.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("reading the package's tests: %v %v", files, err)
	}
	fset := token.NewFileSet()
	out := map[string]map[string]bool{}
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil || fd.Recv != nil {
				continue
			}
			called := map[string]bool{}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok {
					if s, ok := c.Fun.(*ast.SelectorExpr); ok {
						called[s.Sel.Name] = true
					}
				}
				return true
			})
			out[fd.Name.Name] = called
		}
	}
	return out
}
