package riffle

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle/rifftest"
)

// refusedAddrs returns n loopback addresses nobody listens on.
func refusedAddrs(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, ln.Addr().String())
		ln.Close()
	}
	return addrs
}

// notKafka listens and answers every connection with an HTTP response, as
// a client pointed at the wrong port would see.
func notKafka(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			nc.SetDeadline(time.Now().Add(5 * time.Second))
			nc.Read(make([]byte, 512))
			nc.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
			nc.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

func namesEvery(t *testing.T, err error, addrs []string) {
	t.Helper()
	for _, a := range addrs {
		if !strings.Contains(err.Error(), a) {
			t.Errorf("error %q does not name %s", err, a)
		}
	}
}

// TestPermanentFailuresAreReturned checks that when every attempt fails
// for a reason retrying cannot fix, Ping and Admin calls stop retrying and
// return that reason, instead of running to the deadline and returning a
// bare context error.
func TestPermanentFailuresAreReturned(t *testing.T) {
	tlsCluster := rifftest.New(t, rifftest.SelfSignedTLS())
	tests := []struct {
		name  string
		opts  []Option
		check func(error) bool
	}{
		{"tls not trusted", []Option{SeedBrokers(tlsCluster.Addrs()...), DialTLS(&tls.Config{})}, func(err error) bool {
			var ue *UnreachableError
			return errors.As(err, &ue) && ue.Addrs[0].Cause() == "tls"
		}},
		{"not kafka", []Option{SeedBrokers(notKafka(t), notKafka(t))}, func(err error) bool {
			return errors.Is(err, ErrUnreachable) && errors.Is(err, ErrMalformedResponse)
		}},
	}
	calls := map[string]func(context.Context, *Client) error{
		"ping": func(ctx context.Context, cl *Client) error { return cl.Ping(ctx) },
		"create": func(ctx context.Context, cl *Client) error {
			_, err := cl.Admin().CreateTopics(ctx, TopicSpec{Name: "x"})
			return err
		},
		"list": func(ctx context.Context, cl *Client) error { _, err := cl.Admin().ListTopics(ctx); return err },
	}
	for _, tt := range tests {
		for name, call := range calls {
			t.Run(tt.name+"/"+name, func(t *testing.T) {
				cl := newTestClient(t, tt.opts...)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				err := call(ctx, cl)
				if !tt.check(err) {
					t.Fatalf("error does not carry the cause: %v", err)
				}
				if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
					t.Fatalf("retried a permanent failure until the deadline: %v", err)
				}
				if IsRetriable(err) {
					t.Fatalf("permanent failure reported as retriable: %v", err)
				}
			})
		}
	}
}

// TestRetryTimeoutIsNamed checks that when the retry budget runs out (the
// caller's context has no deadline), the error names RetryTimeout and
// carries the last cause, matching both context.DeadlineExceeded and it.
func TestRetryTimeoutIsNamed(t *testing.T) {
	addrs := refusedAddrs(t, 2)
	cl := newTestClient(t, SeedBrokers(addrs...), RetryTimeout(time.Second)) // time for both dials on a loaded machine
	for name, call := range map[string]func() error{
		"ping": func() error { return cl.Ping(context.Background()) },
		"create": func() error {
			_, err := cl.Admin().CreateTopics(context.Background(), TopicSpec{Name: "x"})
			return err
		},
		"list": func() error { _, err := cl.Admin().ListTopics(context.Background()); return err },
	} {
		err := call()
		if err == nil || !strings.HasPrefix(err.Error(), "gave up after RetryTimeout 1s: ") {
			t.Errorf("%s: error does not name RetryTimeout: %v", name, err)
			continue
		}
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrUnreachable) {
			t.Errorf("%s: error %v does not match DeadlineExceeded and ErrUnreachable", name, err)
		}
		if strings.Count(err.Error(), "gave up") != 1 {
			t.Errorf("%s: nested retries show: %v", name, err)
		}
		namesEvery(t, err, addrs)
	}
}

// TestDeadlineKeepsUnreachableError checks that a caller's deadline ending
// the retries still yields the unreachable error, with every address and
// cause, wrapping the context's error: for refused seeds, and for seeds
// whose dials are still hanging when the deadline comes.
func TestDeadlineKeepsUnreachableError(t *testing.T) {
	refused := refusedAddrs(t, 2)
	hanging := []string{"10.255.255.1:9092", "10.255.255.2:9092"}
	d := &blackholeDialer{dead: map[string]bool{hanging[0]: true, hanging[1]: true}}
	for _, tc := range []struct {
		name  string
		addrs []string
		opts  []Option
	}{
		{"refused", refused, nil},
		{"hanging", hanging, []Option{Dialer(d.dial), DialStagger(10 * time.Millisecond)}},
	} {
		cl := newTestClient(t, append(tc.opts, SeedBrokers(tc.addrs...))...)
		for name, call := range map[string]func(context.Context) error{
			"brokers": func(ctx context.Context) error { _, err := cl.Brokers(ctx); return err },
			"create": func(ctx context.Context) error {
				_, err := cl.Admin().CreateTopics(ctx, TopicSpec{Name: "x"})
				return err
			},
			"list": func(ctx context.Context) error { _, err := cl.Admin().ListTopics(ctx); return err },
		} {
			// Long enough for every address to be tried (and, hanging,
			// to be dialing) on a loaded machine.
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := call(ctx)
			cancel()
			var ue *UnreachableError
			if !errors.As(err, &ue) || !errors.Is(err, ErrUnreachable) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s/%s: want an unreachable error wrapping the deadline, got %v", tc.name, name, err)
				continue
			}
			namesEvery(t, err, tc.addrs)
		}
	}
}
