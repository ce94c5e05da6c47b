package riffle_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/rifftest"
)

// UnreachableError and KafkaError are types of the root package (not
// aliases of internal ones, which go doc shows without fields or
// methods); the client's errors still reach them with errors.As and
// errors.Is, as a user writes them.

func TestUnreachableErrorAs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // refused from now on
	cl, err := riffle.NewClient(riffle.SeedBrokers(addr), riffle.RetryTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	err = cl.Ping(context.Background())

	var ue *riffle.UnreachableError
	if !errors.As(err, &ue) {
		t.Fatalf("errors.As(%v, *UnreachableError) = false", err)
	}
	if len(ue.Addrs) != 1 || ue.Addrs[0].Addr != addr || ue.Addrs[0].NodeID != -1 || !strings.Contains(ue.Addrs[0].Cause(), "refused") {
		t.Fatalf("addrs %+v", ue.Addrs)
	}
	if !ue.Retriable() || !riffle.IsRetriable(ue) {
		t.Error("a refused address is worth retrying")
	}
	if !errors.Is(ue, riffle.ErrUnreachable) || !errors.Is(err, riffle.ErrUnreachable) {
		t.Error("not ErrUnreachable")
	}
	if !strings.Contains(err.Error(), ue.Error()) || !strings.Contains(ue.Error(), addr) {
		t.Errorf("messages differ: %q, %q", err, ue)
	}
	// Built by hand, it behaves the same.
	mine := &riffle.UnreachableError{Addrs: []riffle.AddrError{{Addr: "a:1", NodeID: 3, Err: errors.New("boom")}}, Ctx: context.DeadlineExceeded}
	if !errors.Is(mine, riffle.ErrUnreachable) || !errors.Is(mine, context.DeadlineExceeded) || !strings.Contains(mine.Error(), "a:1 (failed: boom)") {
		t.Errorf("hand-made: %v", mine)
	}
}

func TestKafkaErrorAsIs(t *testing.T) {
	c := rifftest.New(t, rifftest.Topic("events", 1))
	cl, err := riffle.NewClient(riffle.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cl.Admin().CreateTopics(ctx, riffle.TopicSpec{Name: "events", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	err = fmt.Errorf("wrapped: %w", res[0].Err)

	var ke *riffle.KafkaError
	if !errors.As(err, &ke) {
		t.Fatalf("errors.As(%v, *KafkaError) = false", err)
	}
	if ke.Code != 36 || ke.Name != "TOPIC_ALREADY_EXISTS" || ke.Retriable || ke.Description == "" || ke.Error() != res[0].Err.Error() {
		t.Fatalf("got %+v", *ke)
	}
	for _, tc := range []struct {
		name        string
		err, target error
		want        bool
	}{
		{"client error, sentinel", err, riffle.ErrTopicAlreadyExists, true},
		{"client error, other sentinel", err, riffle.ErrNotLeaderForPartition, false},
		{"client error, built by hand", err, &riffle.KafkaError{Code: 36}, true},
		{"client error, other code by hand", err, &riffle.KafkaError{Code: 6}, false},
		{"As result, sentinel", ke, riffle.ErrTopicAlreadyExists, true},
		{"sentinel, As result", riffle.ErrTopicAlreadyExists, ke, true},
		{"by hand, sentinel", &riffle.KafkaError{Code: 6}, riffle.ErrNotLeaderForPartition, true},
		{"by hand, KafkaErrorForCode", &riffle.KafkaError{Code: 45}, riffle.KafkaErrorForCode(45), true},
	} {
		if got := errors.Is(tc.err, tc.target); got != tc.want {
			t.Errorf("%s: errors.Is = %v", tc.name, got)
		}
	}
	if !riffle.IsRetriable(fmt.Errorf("x: %w", riffle.ErrNotLeaderForPartition)) {
		t.Error("NOT_LEADER_FOR_PARTITION is retriable")
	}
}
