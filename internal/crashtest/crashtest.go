// Package crashtest holds the mechanics shared by the child-process crash
// tests: a test re-executes its own test binary as a child (selected by an
// environment variable), SIGKILLs it at chosen points, starts it again, and
// checks what survived against what the child logged.
//
// The package is test support: only _test.go files import it, and it
// imports nothing but the standard library.
package crashtest

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// RunChild is called from an init function of the test package: it runs
// before TestMain (and so before goleak). Unless the environment variable
// envVar is "1" it returns at once. Otherwise the process is a crash child:
// RunChild runs child, which is to run until the process is killed, and
// never returns to the test machinery. If child returns an error,
// RunChild prints it to stderr after name and a colon, and exits with
// status 2.
func RunChild(envVar, name string, child func() error) {
	if os.Getenv(envVar) != "1" {
		return
	}
	if err := child(); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(2)
	}
	os.Exit(0) // unreachable: the child runs until killed
}

// OpenLog opens, for the child, the log at path that it appends to (and
// the parent reads with a Log), creating it if need be. Each Write on the
// returned file is one unbuffered append.
func OpenLog(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
}

// Output collects a child's stdout and stderr: exec copies into it
// concurrently. Its zero value is ready to use.
type Output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

// String returns what was written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// Child is a crash child: the test binary, re-executed to run one test.
type Child struct {
	cmd    *exec.Cmd
	out    *Output
	exited chan struct{}
}

// Start starts the test binary as a child running only the test named
// test, with env (each "KEY=value") added to this process's environment.
// It waits for the child in the background (see Exited) and registers a
// cleanup with t that stops it. A child that fails to start fails the
// test.
func Start(t testing.TB, test string, env []string) *Child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env...)
	out := &Output{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &Child{cmd: cmd, out: out, exited: make(chan struct{})}
	go func() {
		cmd.Wait() // "signal: killed"
		close(c.exited)
	}()
	t.Cleanup(c.Stop)
	return c
}

// Output returns the child's stdout and stderr.
func (c *Child) Output() *Output { return c.out }

// Exited reports whether the child has exited (and was waited for).
func (c *Child) Exited() bool {
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

// Kill SIGKILLs the child and waits for it to exit. Failing to signal it
// (a child that already exited) fails the test.
func (c *Child) Kill(t testing.TB) {
	t.Helper()
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-c.exited
}

// Stop SIGKILLs the child, if it still runs, and waits for it to exit. It
// may be called any number of times.
func (c *Child) Stop() {
	c.cmd.Process.Kill()
	<-c.exited
}

// Await polls cond every interval until it holds. If the child exits
// first, the test fails with the child's output. If timeout passes first,
// the child is killed and the test fails with state's description of how
// far things got, and the child's output. run, the number of the child's
// run, and what, what is awaited, name the wait in the messages.
func (c *Child) Await(t testing.TB, run int, what string, timeout, interval time.Duration, state func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if c.Exited() {
			t.Fatalf("run %d: the child exited while waiting for %s; its output:\n%s", run, what, c.out)
		}
		if time.Now().After(deadline) {
			c.Kill(t)
			t.Fatalf("run %d: timed out waiting for %s (%s); child output:\n%s", run, what, state(), c.out)
		}
		time.Sleep(interval)
	}
}

// Log reads the log a child appends lines to, incrementally.
type Log struct {
	path string
	off  int64
	part []byte // incomplete trailing line
}

// NewLog returns a Log reading the file at path.
func NewLog(path string) *Log { return &Log{path: path} }

// Poll returns the complete lines appended since the last call, without
// their newlines; an incomplete trailing line is returned, whole, by a
// later call. A log the child has not yet created has no lines. Failing
// to read the log fails the test.
func (l *Log) Poll(t testing.TB) []string {
	t.Helper()
	f, err := os.Open(l.path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(l.off, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	l.off += int64(len(b))
	b = append(l.part, b...)
	var lines []string
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			break
		}
		lines = append(lines, string(b[:i]))
		b = b[i+1:]
	}
	l.part = append([]byte(nil), b...)
	return lines
}
