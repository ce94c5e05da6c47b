//go:build linux

package rifftest_test

import (
	"errors"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/riffle-go/riffle/rifftest"
)

// A dial to a Blackhole hangs until the dialer's own timeout. (Linux only,
// like Blackhole itself, so that the example's output holds.)
func ExampleNewBlackhole() {
	b, err := rifftest.NewBlackhole()
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	_, err = (&net.Dialer{Timeout: 200 * time.Millisecond}).Dial("tcp", b.Addr())
	var nerr net.Error
	fmt.Println("timed out:", errors.As(err, &nerr) && nerr.Timeout())
	// Output: timed out: true
}
