package batch

import "hash/crc32"

// Record batches v2 are checksummed with CRC-32C (Castagnoli), which the
// standard library computes with SSE4.2/ARMv8 instructions. Legacy messages
// use CRC-32 (IEEE); see legacy.go.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// crc32cCombine returns the CRC-32C of A||B given crcA = CRC(A), crcB = CRC(B)
// and lenB = len(B), in O(log lenB) time without touching the data.
//
// It exists so that patching producer fields into an already compressed batch
// costs a 40-byte CRC plus this combination, instead of re-reading the whole
// (possibly megabyte-sized) batch. The method is zlib's crc32_combine: the CRC
// of A must be advanced over lenB zero bytes, which is a multiplication by
// x^(8*lenB) modulo the polynomial.
func crc32cCombine(crcA, crcB uint32, lenB int) uint32 {
	if lenB <= 0 {
		return crcA
	}
	return multModP(x2nModP(uint64(lenB), 3), crcA) ^ crcB
}

// castagnoliReflected is the Castagnoli polynomial in the reflected bit order
// that crc32 uses.
const castagnoliReflected = 0x82f63b78

// x2nTable[k] = x^(2^k) mod P. 64 entries cover every lenB (zlib relies on a
// period of 32 that holds for the IEEE polynomial; computing all 64 avoids
// assuming it for Castagnoli).
var x2nTable = func() (t [64]uint32) {
	p := uint32(1) << 30 // x^1
	t[0] = p
	for k := 1; k < len(t); k++ {
		p = multModP(p, p)
		t[k] = p
	}
	return t
}()

// multModP multiplies a and b modulo P, in reflected representation.
func multModP(a, b uint32) uint32 {
	if a == 0 {
		return 0
	}
	var p uint32
	for m := uint32(1) << 31; ; m >>= 1 {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				return p
			}
		}
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReflected
		} else {
			b >>= 1
		}
	}
}

// x2nModP returns x^(n * 2^k) mod P.
func x2nModP(n uint64, k uint) uint32 {
	p := uint32(1) << 31 // x^0
	for n != 0 {
		if n&1 != 0 {
			p = multModP(x2nTable[k&63], p)
		}
		n >>= 1
		k++
	}
	return p
}
