package riffle

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// kfake's own listener/handler goroutines may take a moment to
		// exit after Close; they belong to the test broker, not to us.
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*Cluster).run"),
	)
}
