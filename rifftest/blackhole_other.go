//go:build !linux

package rifftest

import (
	"errors"
	"io"
)

// listenNoBacklog is unsupported off Linux: what a backlog of 0 means, and
// whether a full queue drops SYNs or refuses them, differs between kernels,
// and a Blackhole that sometimes refuses would make tests flaky.
func listenNoBacklog() (io.Closer, string, error) {
	return nil, "", errors.New("rifftest: Blackhole is only supported on linux")
}
