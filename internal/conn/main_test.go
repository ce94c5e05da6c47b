package conn

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test must leave nothing running: a Conn owns its reader goroutine,
// a failed Dial owns nothing, and the fake brokers stop on cleanup.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
