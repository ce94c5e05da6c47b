package batch

import "math/bits"

// Kafka's record format uses zigzag varints (protobuf style): "varint" for
// int32 fields, "varlong" for int64 ones. These helpers are written for the
// hot path: sizes are computed without writing, writes go into pre-sized
// slices, and reads have a one-byte fast path that the compiler inlines.
//
// Readers take a position and return the new position, or -1 on malformed or
// truncated input. They accept a negative position and fail, so a sequence
// of reads only needs its error checked once at the end.

func uvarintSize(u uint64) int { return (bits.Len64(u|1) + 6) / 7 }

func varintSize(v int32) int { return uvarintSize(uint64(uint32(v<<1) ^ uint32(v>>31))) }

func varlongSize(v int64) int { return uvarintSize(uint64(v<<1) ^ uint64(v>>63)) }

// bytesSize is the encoded size of a nullable varint-length-prefixed field.
func bytesSize(b []byte) int {
	if b == nil {
		return 1 // varint(-1)
	}
	return varintSize(int32(len(b))) + len(b)
}

// putUvarint writes u at b[p:] and returns the position after it. b must be
// large enough, which the callers guarantee by sizing first.
func putUvarint(b []byte, p int, u uint64) int {
	for u >= 0x80 {
		b[p] = byte(u) | 0x80
		u >>= 7
		p++
	}
	b[p] = byte(u)
	return p + 1
}

func putVarint(b []byte, p int, v int32) int {
	return putUvarint(b, p, uint64(uint32(v<<1)^uint32(v>>31)))
}

func putVarlong(b []byte, p int, v int64) int {
	return putUvarint(b, p, uint64(v<<1)^uint64(v>>63))
}

// putBytes writes a nullable varint-length-prefixed field.
func putBytes(b []byte, p int, v []byte) int {
	if v == nil {
		b[p] = 1 // zigzag(-1)
		return p + 1
	}
	p = putVarint(b, p, int32(len(v)))
	return p + copy(b[p:], v)
}

// readUvarint reads an unsigned varint of at most 10 bytes. It is a plain
// loop, without a separate slow path, so that it and its zigzag wrappers stay
// under the compiler's inlining budget: decoding a record reads seven
// varints, and a call for each would cost more than the decoding.
func readUvarint(b []byte, p int) (uint64, int) {
	var u uint64
	for s := uint(0); s < 64; s += 7 {
		if uint(p) >= uint(len(b)) {
			return 0, -1
		}
		c := b[p]
		p++
		u |= uint64(c&0x7f) << s
		if c < 0x80 {
			return u, p
		}
	}
	return 0, -1
}

// readVarint reads a zigzag varint into an int32. Values beyond 32 bits are
// truncated rather than rejected (a check would push the function over the
// inlining budget); every length read this way is bounds-checked anyway, so
// garbage can only produce wrong values, never out-of-range access.
func readVarint(b []byte, p int) (int32, int) {
	u, p := readUvarint(b, p)
	return int32(uint32(u)>>1) ^ -int32(u&1), p
}

// readVarlong reads a zigzag varint into an int64.
func readVarlong(b []byte, p int) (int64, int) {
	u, p := readUvarint(b, p)
	return int64(u>>1) ^ -int64(u&1), p
}

// readBytes reads a nullable varint-length-prefixed field. The result aliases
// b and is capped so appends to it cannot clobber what follows. A length of
// -1 yields nil; zero yields an empty non-nil slice.
func readBytes(b []byte, p int) ([]byte, int) {
	n, p := readVarint(b, p)
	end := p + int(n)
	if p < 0 || n < -1 || end > len(b) {
		return nil, -1
	}
	if n == -1 {
		return nil, p
	}
	return b[p:end:end], end
}
