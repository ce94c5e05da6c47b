package kafkatest

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
)

// Linux: every JVM gets its own process group (so a signal reaches all of
// it) and PR_SET_PDEATHSIG SIGKILL, so it dies with the test binary even
// when that panics, times out or is killed, and Close never runs.
//
// The death signal fires when the thread that forked the child exits, not
// the process: a Go runtime thread can go away (a goroutine that locked it
// exits), which would kill a broker in the middle of a test. So every child
// is started from one goroutine locked to its thread for the life of the
// process.

type spawnReq struct {
	cmd *exec.Cmd
	err chan error
}

var (
	spawnOnce sync.Once
	spawnCh   chan spawnReq
)

func startProcess(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnCh = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: this thread lives as long as the process
			for r := range spawnCh {
				r.err <- r.cmd.Start()
			}
		}()
	})
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	r := spawnReq{cmd: cmd, err: make(chan error, 1)}
	spawnCh <- r
	return <-r.err
}

// signalGroup signals the process group led by pid.
func signalGroup(pid int, sig syscall.Signal) error {
	return syscall.Kill(-pid, sig)
}

// diesWithParent says whether children die with the test binary.
const diesWithParent = true

// jvmsOf returns the pids of live processes whose command line names dir
// (the -Driffle.kafkatest.dir= every node's JVM is given), from /proc.
func jvmsOf(dir string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	mark := []byte("-Driffle.kafkatest.dir=" + dir + "\x00")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(b, mark) {
			out = append(out, pid)
		}
	}
	return out
}
