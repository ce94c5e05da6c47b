package conn

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"

	"github.com/riffle-go/riffle/internal/errs"
)

// NotKafkaError is what the peer at an address answered instead of
// Kafka, as far as it can be told: an HTTP server, a TLS listener reached
// without TLS, or a server that does not speak TLS reached with it. It
// matches errs.ErrMalformed (and Err, the failure it explains); dialing
// again fails the same way.
type NotKafkaError struct {
	Reason string // what the peer is, for humans
	Err    error  // what reading its answer failed with; may be nil
}

// Reasons of a NotKafkaError.
const (
	reasonHTTP      = "this is an HTTP server, not a Kafka broker"
	reasonSpeaksTLS = "the broker speaks TLS; enable TLS"
	reasonNoTLS     = "the server does not speak TLS at this address"
)

func (e *NotKafkaError) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Reason + ": " + e.Err.Error()
}

// Unwrap makes a NotKafkaError match errs.ErrMalformed and its cause.
func (e *NotKafkaError) Unwrap() []error {
	if e.Err == nil {
		return []error{errs.ErrMalformed}
	}
	return []error{errs.ErrMalformed, e.Err}
}

// sniffFirstFrame looks at the first four bytes a peer answered the
// handshake's first request with, where Kafka puts the size of its
// response, for the answers of common servers that are not Kafka: "HTTP"
// (1213486160 as a size), or an HTML page without a status line (what
// some HTTP servers send a request line without a version), other text
// (SSH, SMTP, Redis banners), and a TLS record header (an alert or
// handshake, version 3.x), which a plaintext client meets at a TLS
// listener. Those sizes are far above any frame limit (text is 0x20202020
// and up), so a Kafka broker never sends them. tlsOn is whether the
// connection runs TLS already. It returns nil for anything else.
func sniffFirstFrame(hdr [4]byte, tlsOn bool) *NotKafkaError {
	switch {
	case string(hdr[:]) == "HTTP" || hdr[0] == '<' && isText(hdr):
		return &NotKafkaError{Reason: reasonHTTP}
	case isText(hdr):
		return &NotKafkaError{Reason: fmt.Sprintf("the server answered with text (%q), not Kafka", hdr[:])}
	case !tlsOn && (hdr[0] == 0x15 || hdr[0] == 0x16) && hdr[1] == 0x03 && hdr[2] < 0x10:
		return &NotKafkaError{Reason: reasonSpeaksTLS}
	}
	return nil
}

// isText reports whether b is printable ASCII or line breaks, starting
// with a printable character.
func isText(b [4]byte) bool {
	for i, c := range b {
		if (c < 0x20 || c > 0x7e) && (i == 0 || c != '\r' && c != '\n' && c != '\t') {
			return false
		}
	}
	return true
}

// explainTLSFailure says what a TLS handshake failure means when the peer
// answered with something that is not TLS: crypto/tls reports a
// tls.RecordHeaderError for a first record that does not look like a TLS
// handshake, which a plaintext server sends. A Kafka listener without TLS
// answers nothing: it takes the ClientHello for an oversized request and
// closes, so an EOF gets a hint, and stays retriable, since a broker
// going away mid-handshake looks the same. Other errors come back as they
// are.
func explainTLSFailure(err error) error {
	var rhe tls.RecordHeaderError
	switch {
	case errors.As(err, &rhe) && string(rhe.RecordHeader[:4]) == "HTTP":
		return &NotKafkaError{Reason: reasonHTTP + " (and it does not speak TLS)", Err: err}
	case errors.As(err, &rhe):
		return &NotKafkaError{Reason: reasonNoTLS, Err: err}
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w (the server closed the connection during the TLS handshake: it may not speak TLS at this address)", err)
	}
	return err
}
