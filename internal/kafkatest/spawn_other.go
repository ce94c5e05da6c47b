//go:build !linux

package kafkatest

import (
	"os"
	"os/exec"
	"syscall"
)

// Elsewhere than Linux there is no parent-death signal: Close and the
// cleanup of a test kill the brokers, a crash of the test binary does not.
// The harness is developed and run in CI on Linux.

func startProcess(cmd *exec.Cmd) error {
	return cmd.Start()
}

func signalGroup(pid int, sig syscall.Signal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	if sig == syscall.SIGKILL {
		return p.Kill()
	}
	return p.Signal(sig)
}

const diesWithParent = false

// jvmsOf is Linux only (it reads /proc).
func jvmsOf(string) []int { return nil }
