package conn

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/riffle-go/riffle/internal/errs"
)

// answerRaw returns a serve function that reads what the client sends
// first, writes answer (as a server that is not Kafka would) and closes.
func answerRaw(answer []byte) func(*brokerConn) {
	return func(bc *brokerConn) {
		buf := make([]byte, 4096)
		if _, err := bc.Read(buf); err != nil {
			return
		}
		if answer != nil {
			bc.Write(answer)
		}
	}
}

// A peer that is not a Kafka broker, or not configured as the client is,
// gets a dial error saying what it is instead of a size-prefix error, not
// worth retrying: an HTTP server; a TLS listener reached without TLS (its
// alert or handshake record where the size prefix goes); a plaintext
// server reached with TLS.
func TestDialNotKafka(t *testing.T) {
	cert, pool := selfSigned(t)
	alert := []byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x0a}             // fatal unexpected_message, as a JDK broker sends
	hello := []byte{0x16, 0x03, 0x01, 0x00, 0x04, 0x0e, 0x00, 0x00, 0x00} // a handshake record
	httpReply := []byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
	kafkaish := []byte{0, 0, 0, 6, 0, 0, 0, 1, 0, 35} // a plaintext Kafka-like frame
	for _, tc := range []struct {
		name   string
		tls    bool
		serve  func(*brokerConn)
		stage  Stage
		reason string
	}{
		{"http", false, answerRaw(httpReply), StageAPIVersions, reasonHTTP},
		{"http/0.9", false, answerRaw([]byte("<!DOCTYPE HTML>\n<html>")), StageAPIVersions, reasonHTTP},
		{"ssh", false, answerRaw([]byte("SSH-2.0-OpenSSH_9.6\r\n")), StageAPIVersions, "the server answered with text"},
		{"tls alert to plaintext", false, answerRaw(alert), StageAPIVersions, reasonSpeaksTLS},
		{"tls handshake to plaintext", false, answerRaw(hello), StageAPIVersions, reasonSpeaksTLS},
		{"plaintext to tls", true, answerRaw(kafkaish), StageTLS, reasonNoTLS},
		{"http to tls", true, answerRaw(httpReply), StageTLS, reasonHTTP},
		{"https", true, func(bc *brokerConn) {
			tc := tls.Server(bc.Conn, &tls.Config{Certificates: []tls.Certificate{cert}})
			answerRaw(httpReply)(&brokerConn{Conn: tc, done: bc.done})
			tc.Close()
		}, StageAPIVersions, reasonHTTP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb := newFakeBroker(t, tc.serve)
			cfg := testConfig()
			if tc.tls {
				cfg.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
			}
			de := dialErr(t, context.Background(), cfg, fb.Addr())
			var nk *NotKafkaError
			if !errors.As(de, &nk) || !strings.HasPrefix(nk.Reason, tc.reason) {
				t.Fatalf("dial error %v (%T): want a *NotKafkaError saying %q", de, de.Err, tc.reason)
			}
			if !strings.Contains(de.Error(), tc.reason) || strings.Contains(de.Error(), "size prefix") {
				t.Errorf("error text %q: want %q, not the size prefix", de.Error(), tc.reason)
			}
			if de.Stage != tc.stage || !errors.Is(de, errs.ErrMalformed) || errs.IsRetriable(de) {
				t.Errorf("dial error %v: stage %q, malformed %v, retriable %v; want %q, true, false",
					de, de.Stage, errors.Is(de, errs.ErrMalformed), errs.IsRetriable(de), tc.stage)
			}
		})
	}

	// A server that closes on a ClientHello (a Kafka listener without TLS
	// does) may not speak TLS: a hint, still retriable.
	fb := newFakeBroker(t, answerRaw(nil))
	cfg := testConfig()
	cfg.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	de := dialErr(t, context.Background(), cfg, fb.Addr())
	if !errors.Is(de, io.EOF) || !strings.Contains(de.Error(), "may not speak TLS") || !errs.IsRetriable(de) {
		t.Errorf("dial error %v: want a retriable EOF with a hint", de)
	}
}

// Only the sizes that spell those answers are taken for them.
func TestSniffFirstFrame(t *testing.T) {
	for _, tc := range []struct {
		hdr   [4]byte
		tlsOn bool
		want  string
	}{
		{[4]byte{'H', 'T', 'T', 'P'}, false, reasonHTTP},
		{[4]byte{'H', 'T', 'T', 'P'}, true, reasonHTTP},
		{[4]byte{'<', '!', 'D', 'O'}, false, reasonHTTP},
		{[4]byte{'<', 'h', 't', 'm'}, true, reasonHTTP},
		{[4]byte{'S', 'S', 'H', '-'}, false, `the server answered with text ("SSH-"), not Kafka`},
		{[4]byte{'-', 'E', 'R', 'R'}, false, `the server answered with text ("-ERR"), not Kafka`},
		{[4]byte{'2', '2', '0', ' '}, false, `the server answered with text ("220 "), not Kafka`},
		{[4]byte{'O', 'K', '\r', '\n'}, false, `the server answered with text ("OK\r\n"), not Kafka`},
		{[4]byte{0x15, 0x03, 0x01, 0x00}, false, reasonSpeaksTLS},
		{[4]byte{0x16, 0x03, 0x03, 0x00}, false, reasonSpeaksTLS},
		{[4]byte{0x15, 0x03, 0x03, 0x00}, true, ""}, // inside TLS, not a record header
		{[4]byte{0x15, 0x02, 0x03, 0x00}, false, ""},
		{[4]byte{0x16, 0x03, 0x10, 0x00}, false, ""},
		{[4]byte{0x00, 0x00, 0x01, 0x00}, false, ""},
		{[4]byte{0x7f, 0xff, 0xff, 0xff}, false, ""},
		{[4]byte{0x1f, 'a', 'b', 'c'}, false, ""},    // not text
		{[4]byte{'\n', 'a', 'b', 'c'}, false, ""},    // nor this
		{[4]byte{0x00, 0x00, 0x00, 0x0a}, false, ""}, // a small Kafka frame
	} {
		got := ""
		if nk := sniffFirstFrame(tc.hdr, tc.tlsOn); nk != nil {
			got = nk.Reason
		}
		if got != tc.want {
			t.Errorf("sniffFirstFrame(% x, tls %v) = %q, want %q", tc.hdr, tc.tlsOn, got, tc.want)
		}
	}
}
