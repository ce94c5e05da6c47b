package wire

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// corrIDOffset is where the correlation id sits in a framed request:
// size(4) api key(2) api version(2).
const corrIDOffset = 8

// Formatter encodes requests with the client id in their headers.
type Formatter struct{ f *kmsg.RequestFormatter }

// NewFormatter returns a formatter that stamps clientID on every request.
func NewFormatter(clientID string) Formatter {
	return Formatter{kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))}
}

// Append appends the framed request (size prefix, header, body) to dst with a
// zero correlation id; the connection patches the real id in when it knows
// the request's place in the pipeline, so encoding can happen off the lock.
func (f Formatter) Append(dst []byte, req kmsg.Request) []byte {
	return f.f.AppendRequest(dst, req, 0)
}

// SetCorrelationID patches the correlation id of a frame built by Append.
func SetCorrelationID(frame []byte, id int32) {
	binary.BigEndian.PutUint32(frame[corrIDOffset:], uint32(id))
}

// ResponseFlexible reports whether the response to req carries a flexible
// (tagged) header. ApiVersions never does, so that a client can always read
// the broker's answer about versions (KIP-511).
func ResponseFlexible(req kmsg.Request) bool {
	return req.IsFlexible() && req.Key() != 18
}

// SplitResponse parses the response header of a frame body and returns the
// correlation id and the response body.
func SplitResponse(body []byte, flexible bool) (int32, []byte, error) {
	if len(body) < 4 {
		return 0, nil, &FrameError{Reason: "response shorter than its header", Size: int64(len(body))}
	}
	id := int32(binary.BigEndian.Uint32(body))
	rest := body[4:]
	if flexible {
		var err error
		if rest, err = skipTags(rest); err != nil {
			return id, nil, err
		}
	}
	return id, rest, nil
}

func skipTags(b []byte) ([]byte, error) {
	n, b, err := uvarint(b)
	if err != nil {
		return nil, err
	}
	for ; n > 0; n-- {
		if _, b, err = uvarint(b); err != nil { // tag
			return nil, err
		}
		var size uint64
		if size, b, err = uvarint(b); err != nil {
			return nil, err
		}
		if size > uint64(len(b)) {
			return nil, &FrameError{Reason: "tagged field longer than the response"}
		}
		b = b[size:]
	}
	return b, nil
}

func uvarint(b []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 || v > 1<<31 {
		return 0, nil, &FrameError{Reason: "bad varint in response header"}
	}
	return v, b[n:], nil
}
