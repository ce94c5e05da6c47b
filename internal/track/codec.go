package track

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
)

// Metadata format, version 1 (see the package documentation):
//
//	'1' base64url-nopad( kind | crc32c LE (4 bytes) | body )
//
// kind 'r': body is uvarints u0, f0-1, u1-1, f1-1, … where, counting from
// committed+1, the offsets alternate between u unfinished and f finished
// ones (u0 may be 0, every other run is at least 1 long, the last run is a
// finished one). kind 'b': body is a bitset, bit i (LSB first within each
// byte) = offset committed+1+i finished, last byte non-zero. The checksum is
// CRC-32C over committed (8 bytes big-endian), kind and body, so metadata
// decoded against any other committed offset is rejected.
const (
	version1  = '1'
	kindRuns  = 'r'
	kindBits  = 'b'
	headerLen = 5 // kind + crc32
)

// Errors returned by Decode, wrapped with detail; test with errors.Is.
var (
	// ErrUnknownVersion: the metadata does not start with a version this
	// package knows ('1'). Other clients' metadata normally lands here.
	ErrUnknownVersion = errors.New("track: unknown metadata version")
	// ErrCorrupt: the metadata has a known version but is malformed, fails
	// its checksum (for example because it belongs to another committed
	// offset), or describes offsets beyond committed+MaxSpan.
	ErrCorrupt = errors.New("track: corrupt metadata")
)

var (
	b64      = base64.RawURLEncoding.Strict()
	crcTable = crc32.MakeTable(crc32.Castagnoli)
)

// maxBody is the largest body a canonical encoding has: the encoder picks
// the smaller of the two kinds, and a bitset never exceeds MaxSpan bits.
const maxBody = (MaxSpan + 7) / 8

// maxEncoded is the longest string Decode accepts.
var maxEncoded = encodedLen(maxBody)

// encodedLen returns the length of an encoding whose body is n bytes.
func encodedLen(n int) int { return 1 + b64.EncodedLen(headerLen+n) }

func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// runCursor iterates maximal runs [s, e) of finished offsets as positions
// relative to committed+1, increasing and separated by at least one
// unfinished position, all within [0, MaxSpan]. It reads either a
// Tracker's window or a finished-offset list; a concrete type (rather than
// a closure) keeps EncodedLen and MetadataSize free of allocations.
type runCursor struct {
	committed int64

	t *Tracker // window source: next search from x
	x int64

	fin  []int64 // list source: next index i, last kept offset prev
	i    int
	prev int64
}

func trackerRuns(t *Tracker) runCursor {
	x := t.hi // empty window (commit may be math.MaxInt64: no commit+1)
	if t.commit < t.hi {
		x = t.commit + 1
	}
	return runCursor{committed: t.commit, t: t, x: x}
}

// sliceRuns reads a finished-offset list, dropping every offset that is not
// above committed and above the previous kept one, that is more than MaxSpan
// above committed, or that is math.MaxInt64 (not a valid record offset).
func sliceRuns(committed int64, finished []int64) runCursor {
	if committed < 0 {
		finished = nil
	}
	return runCursor{committed: committed, fin: finished, prev: committed}
}

// next returns the next run.
func (r *runCursor) next() (s, e int64, ok bool) {
	if t := r.t; t != nil {
		if r.x >= t.hi {
			return 0, 0, false
		}
		s = t.nextDone(r.x, t.hi)
		if s >= t.hi {
			r.x = t.hi
			return 0, 0, false
		}
		e = t.nextPending(s, t.hi)
		r.x = e
		base := r.committed + 1
		return s - base, e - base, true
	}
	// Locals, not fields, in the loop: r is addressed, so its fields would
	// be loaded and stored on every iteration.
	fin, i, prev, c := r.fin, r.i, r.prev, r.committed
	s, e = -1, -1
	for ; i < len(fin); i++ {
		o := fin[i]
		if o <= prev || o-c > MaxSpan || o == math.MaxInt64 {
			continue
		}
		p := o - c - 1
		if p != e {
			if e >= 0 {
				break // o starts the next run
			}
			s = p
		}
		e = p + 1
		prev = o
	}
	r.i, r.prev = i, prev
	return s, e, e >= 0
}

// measure returns the body lengths of both kinds (0, 0 for no runs).
func measure(r runCursor) (runsLen, bitsLen int) {
	var end int64 = -1
	for {
		s, e, ok := r.next()
		if !ok {
			break
		}
		if end < 0 {
			runsLen += uvarintLen(uint64(s))
		} else {
			runsLen += uvarintLen(uint64(s - end - 1))
		}
		runsLen += uvarintLen(uint64(e - s - 1))
		end = e
	}
	if end < 0 {
		return 0, 0
	}
	return runsLen, int((end + 7) / 8)
}

// encodedSize returns len(encode(r)).
func encodedSize(r runCursor) int {
	rl, bl := measure(r)
	if rl == 0 {
		return 0
	}
	return encodedLen(min(rl, bl))
}

func checksum(committed int64, kind byte, body []byte) uint32 {
	var h [9]byte
	binary.BigEndian.PutUint64(h[:8], uint64(committed))
	h[8] = kind
	return crc32.Update(crc32.Update(0, crcTable, h[:]), crcTable, body)
}

// encode writes r in the smaller kind (runs on a tie).
func encode(r runCursor) string {
	rl, bl := measure(r)
	if rl == 0 {
		return ""
	}
	kind, n := byte(kindRuns), rl
	if bl < rl {
		kind, n = kindBits, bl
	}
	p := make([]byte, headerLen+n)
	p[0] = kind
	body := p[headerLen:]
	i := 0
	var end int64 = -1
	for {
		s, e, ok := r.next()
		if !ok {
			break
		}
		if kind == kindRuns {
			if end < 0 {
				i += binary.PutUvarint(body[i:], uint64(s))
			} else {
				i += binary.PutUvarint(body[i:], uint64(s-end-1))
			}
			i += binary.PutUvarint(body[i:], uint64(e-s-1))
			end = e
			continue
		}
		for ; s < e && s&7 != 0; s++ {
			body[s>>3] |= 1 << (s & 7)
		}
		for ; s+8 <= e; s += 8 {
			body[s>>3] = 0xff
		}
		for ; s < e; s++ {
			body[s>>3] |= 1 << (s & 7)
		}
	}
	binary.LittleEndian.PutUint32(p[1:headerLen], checksum(r.committed, kind, body))
	out := make([]byte, 1+b64.EncodedLen(len(p)))
	out[0] = version1
	b64.Encode(out[1:], p)
	return string(out)
}

// Encode returns the commit metadata for committed whose finished offsets
// above it are finished (sorted, all > committed). It picks, per call, the
// smaller of a run-length and a bitset encoding, so a long contiguous run —
// one record stuck at committed while 100,000 later ones finish — costs a
// few bytes. The result is "" when nothing is finished (or committed is
// negative).
//
// Offsets that are not above committed, not above the previous offset
// (unsorted or duplicated input), more than MaxSpan above committed, or
// math.MaxInt64 are dropped. Dropping is always safe: a dropped offset is only processed again
// after a restart, never skipped.
func Encode(committed int64, finished []int64) string {
	return encode(sliceRuns(committed, finished))
}

// EncodedLen returns len(Encode(committed, finished)) in one pass over
// finished, without allocating.
func EncodedLen(committed int64, finished []int64) int {
	return encodedSize(sliceRuns(committed, finished))
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// Decode returns the finished offsets, sorted, that Encode(committed, …)
// stored in s; "" decodes to none. Any other input that is not a canonical
// version-1 encoding for this committed offset fails with an error wrapping
// ErrUnknownVersion or ErrCorrupt; the caller should then treat nothing as
// finished (records are processed again, never skipped). Decode never
// panics, rejects input longer than a canonical encoding can be, and
// allocates at most MaxSpan offsets.
func Decode(committed int64, s string) ([]int64, error) {
	if s == "" {
		return nil, nil
	}
	if s[0] != version1 {
		return nil, fmt.Errorf("%w %q", ErrUnknownVersion, s[0])
	}
	if committed < 0 {
		return nil, corrupt("negative committed offset %d", committed)
	}
	if len(s) > maxEncoded {
		return nil, corrupt("%d bytes, longer than any encoding", len(s))
	}
	p, err := b64.DecodeString(s[1:])
	if err != nil {
		return nil, corrupt("%v", err)
	}
	if len(p) <= headerLen {
		return nil, corrupt("too short")
	}
	kind, body := p[0], p[headerLen:]
	if binary.LittleEndian.Uint32(p[1:headerLen]) != checksum(committed, kind, body) {
		return nil, corrupt("checksum mismatch (metadata of another committed offset?)")
	}
	switch kind {
	case kindRuns:
		return decodeRuns(committed, body)
	case kindBits:
		return decodeBits(committed, body)
	}
	return nil, corrupt("unknown kind %q", kind)
}

// readUvarint reads a minimally encoded uvarint.
func readUvarint(b []byte) (uint64, int, bool) {
	v, n := binary.Uvarint(b)
	if n <= 0 || (n > 1 && b[n-1] == 0) {
		return 0, 0, false
	}
	return v, n, true
}

// walkRuns parses a run-length body, calling fn for every run [s, e) of
// relative positions; it validates everything before the caller allocates.
func walkRuns(body []byte, fn func(s, e int64)) error {
	var end int64
	for i, first := 0, true; i < len(body); first = false {
		u, n, ok := readUvarint(body[i:])
		if !ok {
			return corrupt("bad varint at %d", i)
		}
		i += n
		if i == len(body) {
			return corrupt("ends with an unfinished run")
		}
		f, n, ok := readUvarint(body[i:])
		if !ok {
			return corrupt("bad varint at %d", i)
		}
		i += n
		if u > MaxSpan || f >= MaxSpan {
			return corrupt("run beyond MaxSpan")
		}
		s := end + int64(u)
		if !first {
			s++
		}
		e := s + int64(f) + 1
		if e > MaxSpan {
			return corrupt("run beyond MaxSpan")
		}
		if fn != nil {
			fn(s, e)
		}
		end = e
	}
	return nil
}

func decodeRuns(committed int64, body []byte) ([]int64, error) {
	var count, end int64
	if err := walkRuns(body, func(s, e int64) { count += e - s; end = e }); err != nil {
		return nil, err
	}
	if committed >= math.MaxInt64-end {
		return nil, corrupt("offsets reach math.MaxInt64")
	}
	out := make([]int64, 0, count)
	base := committed + 1
	walkRuns(body, func(s, e int64) {
		for i := s; i < e; i++ {
			out = append(out, base+i) // base+i ≤ committed+end: no overflow
		}
	})
	return out, nil
}

func decodeBits(committed int64, body []byte) ([]int64, error) {
	if body[len(body)-1] == 0 {
		return nil, corrupt("bitset ends with a zero byte")
	}
	top := int64(len(body)-1)*8 + int64(bits.Len8(body[len(body)-1])) // highest position + 1
	if top > MaxSpan {
		return nil, corrupt("bitset beyond MaxSpan")
	}
	if committed >= math.MaxInt64-top {
		return nil, corrupt("offsets reach math.MaxInt64")
	}
	count := 0
	for _, b := range body {
		count += bits.OnesCount8(b)
	}
	out := make([]int64, 0, count)
	base := committed + 1
	for i, b := range body {
		for b != 0 {
			j := bits.TrailingZeros8(b)
			out = append(out, base+int64(i)*8+int64(j))
			b &= b - 1
		}
	}
	return out, nil
}
