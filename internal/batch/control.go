package batch

import (
	"encoding/binary"
	"fmt"
)

// ControlType is the type of a control record, from its key.
type ControlType int16

const (
	// ControlUnknown marks a batch without a (decodable) control record.
	ControlUnknown ControlType = -1
	// ControlAbort is the marker ending an aborted transaction.
	ControlAbort ControlType = 0
	// ControlCommit is the marker ending a committed transaction.
	ControlCommit ControlType = 1
	// ControlLeaderChange is a KRaft leader change record.
	ControlLeaderChange ControlType = 2
	// ControlSnapshotHeader is a KRaft snapshot header record.
	ControlSnapshotHeader ControlType = 3
	// ControlSnapshotFooter is a KRaft snapshot footer record.
	ControlSnapshotFooter ControlType = 4
)

// String returns the name of the control type.
func (t ControlType) String() string {
	switch t {
	case ControlUnknown:
		return "unknown"
	case ControlAbort:
		return "abort"
	case ControlCommit:
		return "commit"
	case ControlLeaderChange:
		return "leader_change"
	case ControlSnapshotHeader:
		return "snapshot_header"
	case ControlSnapshotFooter:
		return "snapshot_footer"
	}
	return fmt.Sprintf("ControlType(%d)", int16(t))
}

// ParseControlKey decodes the key of a control record: an int16 version and
// an int16 type. Later versions may append fields, which are ignored, as the
// Java client does.
func ParseControlKey(key []byte) (version int16, typ ControlType, err error) {
	if len(key) < 4 {
		return 0, ControlUnknown, fmt.Errorf("%w: control record key of %d bytes", ErrCorrupt, len(key))
	}
	version = int16(binary.BigEndian.Uint16(key))
	if version < 0 {
		return version, ControlUnknown, fmt.Errorf("%w: control record key version %d", ErrCorrupt, version)
	}
	return version, ControlType(binary.BigEndian.Uint16(key[2:])), nil
}

// ParseEndTxnMarker decodes the value of a commit or abort control record:
// an int16 version and the int32 epoch of the transaction coordinator that
// wrote it.
func ParseEndTxnMarker(value []byte) (version int16, coordinatorEpoch int32, err error) {
	if len(value) < 6 {
		return 0, 0, fmt.Errorf("%w: transaction marker of %d bytes", ErrCorrupt, len(value))
	}
	return int16(binary.BigEndian.Uint16(value)), int32(binary.BigEndian.Uint32(value[2:])), nil
}

// decodeControlType sets b.ControlType from the key of the batch's first
// record, as the Java consumer does to recognise abort markers. Control
// batches are a single tiny uncompressed record in practice, so doing this
// eagerly costs nothing on the data path.
func (b *Batch) decodeControlType() *BatchError {
	if b.NumRecords == 0 {
		return nil
	}
	if err := b.decompress(); err != nil {
		return err
	}
	data := b.records
	length, p := readVarint(data, 0)
	if p < 0 || length < 0 || int(length) > len(data)-p {
		return &BatchError{Offset: b.BaseOffset, Pos: b.pos, Err: ErrCorrupt, Reason: "bad control record"}
	}
	rec := data[:p+int(length)]
	p++ // attributes
	_, p = readVarlong(rec, p)
	_, p = readVarint(rec, p)
	key, p := readBytes(rec, p)
	if p < 0 {
		return &BatchError{Offset: b.BaseOffset, Pos: b.pos, Err: ErrCorrupt, Reason: "bad control record"}
	}
	_, typ, err := ParseControlKey(key)
	if err != nil {
		return &BatchError{Offset: b.BaseOffset, Pos: b.pos, Err: ErrCorrupt, Reason: "bad control record key"}
	}
	b.ControlType = typ
	return nil
}
