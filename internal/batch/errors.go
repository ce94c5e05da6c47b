package batch

import (
	"errors"
	"fmt"
)

var (
	// ErrCorrupt is matched (errors.Is) by errors for batches that fail
	// their CRC check or are malformed.
	ErrCorrupt = errors.New("corrupt record batch")
	// ErrTooLarge is matched by errors for compressed batches whose
	// decompressed size exceeds DecodeOptions.MaxDecompressedSize: a
	// decompression bomb, or a limit set too low.
	ErrTooLarge = errors.New("decompressed record batch exceeds the maximum size")
	// ErrUnsupported is matched by errors for well-formed batches this
	// package cannot decode: an unknown magic or compression codec.
	ErrUnsupported = errors.New("unsupported record batch")
	// ErrRecordTooLarge is returned (wrapped) by CheckSize for a record
	// that cannot fit in a batch even on its own.
	ErrRecordTooLarge = errors.New("record is larger than the maximum batch size")
	// ErrEmpty is returned by Builder.Finish when no record was added:
	// brokers reject empty batches.
	ErrEmpty = errors.New("record batch has no records")
)

// BatchError describes why one batch could not be decoded. Other batches of
// the same input are unaffected (unless the batch's framing itself was
// unusable, in which case iteration ends after it).
type BatchError struct {
	// Offset is the base offset from the batch header (for a legacy
	// message, its offset), which a consumer can report or seek past.
	Offset int64
	// Pos is the byte position of the batch within the iterated input.
	Pos int
	// Err is ErrCorrupt, ErrTooLarge or ErrUnsupported.
	Err error
	// Reason is a human-readable detail.
	Reason string
}

// Error implements error.
func (e *BatchError) Error() string {
	return fmt.Sprintf("batch at offset %d (byte %d): %v: %s", e.Offset, e.Pos, e.Err, e.Reason)
}

// Unwrap lets errors.Is match the sentinel in Err.
func (e *BatchError) Unwrap() error { return e.Err }
