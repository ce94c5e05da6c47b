package cluster

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test leaves nothing running: Close stops the metadata owner, the
// reaper and every dial.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// kfake's own goroutines may take a moment to exit after Close.
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*Cluster).run"),
	)
}
