package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a goroutine outlives the tests: every
// command must close its client and any embedded cluster before run
// returns. The environment riffle reads is cleared so a developer's
// RIFFLE_BROKERS cannot point the tests at a real cluster; tests that need
// it set it with t.Setenv.
func TestMain(m *testing.M) {
	os.Unsetenv(envBrokers)
	os.Unsetenv(envSASLPassword)
	os.Unsetenv(envScramPassword)
	goleak.VerifyTestMain(m)
}
