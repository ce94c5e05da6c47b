//go:build linux

package rifftest

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// listenNoBacklog returns a listening socket on a free loopback port with an
// accept backlog of 0. The net package always listens with the system's
// somaxconn backlog, which would take thousands of fillers to exhaust, so
// we make the socket ourselves.
func listenNoBacklog() (io.Closer, string, error) {
	// SOCK_CLOEXEC atomically, so a concurrent fork+exec elsewhere in the
	// test binary cannot inherit the socket and keep the port alive.
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, syscall.IPPROTO_TCP)
	if err != nil {
		return nil, "", fmt.Errorf("rifftest: blackhole socket: %w", err)
	}
	fail := func(op string, err error) (io.Closer, string, error) {
		syscall.Close(fd)
		return nil, "", fmt.Errorf("rifftest: blackhole %s: %w", op, err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return fail("bind", err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		return fail("listen", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		return fail("getsockname", err)
	}
	sa4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		return fail("getsockname", fmt.Errorf("unexpected address type %T", sa))
	}
	// An *os.File closes the descriptor exactly once and, through its
	// finalizer, even if a test forgets Close. The socket is blocking, so
	// os does not register it with the runtime poller; nothing ever reads
	// from it anyway.
	f := os.NewFile(uintptr(fd), "rifftest-blackhole")
	return f, fmt.Sprintf("127.0.0.1:%d", sa4.Port), nil
}
