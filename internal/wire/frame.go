// Package wire moves Kafka frames: the 4-byte size prefix, request headers
// and response headers around the kmsg bodies. It reads defensively: a
// hostile size prefix is rejected before any allocation, and a body is read
// in bounded chunks so a truncated frame never costs its claimed size.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/riffle-go/riffle/internal/errs"
)

// DefaultMaxFrame is the largest response frame accepted by default.
const DefaultMaxFrame = 100 << 20

// growChunk bounds how far a body buffer grows ahead of the bytes actually
// received for frames claiming more than they are trusted with, so a frame that
// claims 90 MiB and sends 10 bytes costs at most a few MiB.
const growChunk = 1 << 20

// TrustedFrame is the default size up to which a frame's buffer is
// allocated at once: more than an ordinary response needs, small enough
// that a lying size prefix costs little.
const TrustedFrame = 8 << 20

// FrameError describes why a frame was rejected. It matches errs.ErrMalformed.
type FrameError struct {
	Reason string
	Size   int64
}

func (e *FrameError) Error() string {
	if e.Size != 0 {
		return fmt.Sprintf("malformed frame: %s (size %d)", e.Reason, e.Size)
	}
	return "malformed frame: " + e.Reason
}

// Unwrap makes a FrameError match errs.ErrMalformed.
func (e *FrameError) Unwrap() error { return errs.ErrMalformed }

// ReadFrame reads one size-prefixed frame from r into buf (reusing its
// capacity) and returns the body. maxSize <= 0 means DefaultMaxFrame.
// A clean EOF before the size prefix is returned as io.EOF.
//
// trusted is the size up to which the body's buffer is allocated at once
// (<= 0 means TrustedFrame): the most the caller expects, such as a fetch
// request's MaxBytes. Larger claims grow the buffer as their bytes arrive,
// doubling, so a lying size prefix costs at most about twice what was
// actually sent. A frame within trusted is read with no copy at all, which
// matters for fetch responses: growing a 12 MiB response in steps copied
// about as many bytes again as it held.
func ReadFrame(r io.Reader, maxSize int32, buf []byte, trusted int) ([]byte, error) {
	if maxSize <= 0 {
		maxSize = DefaultMaxFrame
	}
	if trusted <= 0 {
		trusted = TrustedFrame
	}
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, &FrameError{Reason: "truncated size prefix"}
		}
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(hdr[:]))
	switch {
	case size < 0:
		return nil, &FrameError{Reason: "negative size prefix", Size: int64(size)}
	case size > maxSize:
		return nil, &FrameError{Reason: fmt.Sprintf("size prefix above the %d byte limit", maxSize), Size: int64(size)}
	}
	n := int(size)
	buf = buf[:0]
	if cap(buf) < n && n <= trusted {
		// Expected responses get their exact size in one allocation;
		// only claims above trusted grow as their bytes arrive.
		buf = make([]byte, 0, n)
	}
	for len(buf) < n {
		want := min(n-len(buf), growChunk)
		if cap(buf)-len(buf) < want {
			nb := make([]byte, len(buf), len(buf)+max(want, min(n-len(buf), cap(buf))))
			copy(nb, buf)
			buf = nb
		}
		start := len(buf)
		buf = buf[:start+want]
		if _, err := io.ReadFull(r, buf[start:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, &FrameError{Reason: "truncated body", Size: int64(size)}
			}
			return nil, err
		}
	}
	return buf, nil
}
