package conn

import (
	"errors"
	"net"
	"syscall"
)

func isRefused(err *net.OpError) bool {
	return errors.Is(err, syscall.ECONNREFUSED)
}
