package rifftest_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// wire speaks just enough of the Kafka protocol over a net.Conn to check
// what the cluster answers, without a Kafka client: the package must not
// depend on Riffle (which depends on it) nor on kgo.
type wire struct {
	t    *testing.T
	conn net.Conn
	fmtr *kmsg.RequestFormatter
	corr int32
}

func newWire(t *testing.T, conn net.Conn) *wire {
	t.Helper()
	t.Cleanup(func() { conn.Close() })
	return &wire{t: t, conn: conn, fmtr: kmsg.NewRequestFormatter(kmsg.FormatterClientID("rifftest"))}
}

func dialWire(t *testing.T, addr string) *wire {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	return newWire(t, conn)
}

// roundTrip sends req and reads its response into resp, whose version it
// sets to the request's. It returns an error instead of failing the test
// so callers can assert on a broker hanging up.
func (w *wire) roundTrip(req kmsg.Request, resp kmsg.Response) error {
	// A broker that neither answers nor hangs up is a bug under test, and
	// must fail the test rather than hang it.
	if err := w.conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return err
	}
	w.corr++
	if _, err := w.conn.Write(w.fmtr.AppendRequest(nil, req, w.corr)); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	var size [4]byte
	if _, err := io.ReadFull(w.conn, size[:]); err != nil {
		return fmt.Errorf("read size: %w", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(w.conn, body); err != nil {
		return fmt.Errorf("read body: %w", err)
	}
	if len(body) < 4 {
		return fmt.Errorf("response of %d bytes has no correlation ID", len(body))
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != w.corr {
		return fmt.Errorf("correlation ID %d, want %d", corr, w.corr)
	}
	body = body[4:]
	resp.SetVersion(req.GetVersion())
	// Flexible response headers carry a tag section, except ApiVersions,
	// whose header stays v0 so that clients can parse it before knowing
	// what the broker supports.
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		if len(body) < 1 || body[0] != 0 {
			return fmt.Errorf("unexpected response header tags")
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("parse %T: %w", resp, err)
	}
	return nil
}

// metadata asks for every topic.
func (w *wire) metadata() (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(9)
	resp := kmsg.NewPtrMetadataResponse()
	return resp, w.roundTrip(req, resp)
}

// saslPlain runs a SaslHandshake v1 + SaslAuthenticate v1 PLAIN exchange.
func (w *wire) saslPlain(user, pass string) error {
	hreq := kmsg.NewPtrSASLHandshakeRequest()
	hreq.SetVersion(1)
	hreq.Mechanism = "PLAIN"
	hresp := kmsg.NewPtrSASLHandshakeResponse()
	if err := w.roundTrip(hreq, hresp); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	if hresp.ErrorCode != 0 {
		return fmt.Errorf("handshake: error code %d", hresp.ErrorCode)
	}
	areq := kmsg.NewPtrSASLAuthenticateRequest()
	areq.SetVersion(1)
	areq.SASLAuthBytes = []byte("\x00" + user + "\x00" + pass)
	aresp := kmsg.NewPtrSASLAuthenticateResponse()
	if err := w.roundTrip(areq, aresp); err != nil {
		return fmt.Errorf("authenticate: %w", err)
	}
	if aresp.ErrorCode != 0 {
		return fmt.Errorf("authenticate: error code %d", aresp.ErrorCode)
	}
	return nil
}
