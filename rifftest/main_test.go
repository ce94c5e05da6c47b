package rifftest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests: a Cluster
// whose Close left kfake's listeners, run loop or per-connection readers
// behind would be a leak in every user's test suite too. No kfake goroutine
// needs ignoring: Close stops the listeners and the run loop, and each
// connection's goroutines exit once the cluster dies; goleak's retries
// cover the moments they take to get there.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
