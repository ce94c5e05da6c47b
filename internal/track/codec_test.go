package track

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// kindOf returns the kind byte of a non-empty encoding.
func kindOf(t testing.TB, s string) byte {
	p, err := b64.DecodeString(s[1:])
	if err != nil {
		t.Fatal(err)
	}
	return p[0]
}

// seal builds a version-1 string with a valid checksum around any body, so
// tests and the fuzzer reach the body decoders.
func seal(committed int64, kind byte, body []byte) string {
	p := append([]byte{kind, 0, 0, 0, 0}, body...)
	binary.LittleEndian.PutUint32(p[1:5], checksum(committed, kind, body))
	return string(version1) + b64.EncodeToString(p)
}

// seq returns the offsets [a, b].
func seq(a, b int64) []int64 {
	var s []int64
	for o := a; o <= b; o++ {
		s = append(s, o)
	}
	return s
}

// TestCodecGolden pins the format: changing it breaks metadata committed by
// earlier versions and needs a new version character.
func TestCodecGolden(t *testing.T) {
	tests := []struct {
		c    int64
		fin  []int64
		want string
	}{
		{100, nil, ""},
		// Tiny sets: the bitset is smaller (1 byte against 2 and 4).
		{100, []int64{101}, seal(100, kindBits, []byte{1})},
		{100, []int64{103, 104, 105, 107}, seal(100, kindBits, []byte{0b01011100})},
		{0, []int64{3, 4, 5, 7, 9, 11, 14, 18}, seal(0, kindBits, []byte{0b01011100, 0b00100101, 0b00000010})},
		// Long runs: u0=0, f0-1=199 (3 bytes) against a 25-byte bitset.
		{100, seq(101, 300), seal(100, kindRuns, []byte{0, 0xc7, 0x01})},
		// u0=2, f0-1=2, u1-1=100, f1-1=0 (4 bytes) against 14.
		{100, []int64{103, 104, 105, 207}, seal(100, kindRuns, []byte{2, 2, 100, 0})},
	}
	for _, tt := range tests {
		got := Encode(tt.c, tt.fin)
		if got != tt.want {
			t.Errorf("Encode(%d, %v) = %q, want %q", tt.c, tt.fin, got, tt.want)
		}
		if dec, err := Decode(tt.c, got); err != nil || !slices.Equal(dec, tt.fin) {
			t.Errorf("Decode(%q) = %v, %v", got, dec, err)
		}
	}
	// A literal, so the checksum and base64 choices are pinned too.
	for _, tt := range []struct {
		c    int64
		fin  []int64
		want string
	}{
		{100, []int64{101}, "1Yle5kA4B"},
		{100, seq(101, 300), "1cn97jkEAxwE"},
	} {
		if got := Encode(tt.c, tt.fin); got != tt.want {
			t.Errorf("Encode(%d, %v) = %q, want %q", tt.c, tt.fin, got, tt.want)
		}
	}
}

func TestCodecRoundTripRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	kinds := map[byte]int{}
	for iter := range 1000 {
		c := rng.Int64N(math.MaxInt64 - MaxSpan)
		if iter%10 == 0 {
			c = rng.Int64N(100)
		}
		span := 1 + rng.IntN([]int{10, 100, 10_000, 100_000}[rng.IntN(4)])
		if iter == 0 {
			span = MaxSpan
		}
		var fin []int64
		switch rng.IntN(3) {
		case 0: // uniform density
			d := rng.Float64()
			for i := 1; i <= span; i++ {
				if rng.Float64() < d {
					fin = append(fin, c+int64(i))
				}
			}
		case 1: // a few runs
			o := c + 1 + rng.Int64N(int64(span))
			for range rng.IntN(8) {
				for n := rng.IntN(2000); n > 0 && o-c <= int64(span); n-- {
					fin = append(fin, o)
					o++
				}
				o += 1 + rng.Int64N(3000)
			}
		case 2: // sparse points
			o := c
			for range rng.IntN(50) {
				o += 1 + rng.Int64N(int64(span)/10+1)
				if o-c > MaxSpan {
					break
				}
				fin = append(fin, o)
			}
		}
		s := Encode(c, fin)
		if len(s) != EncodedLen(c, fin) {
			t.Fatalf("iter %d: EncodedLen %d != %d", iter, EncodedLen(c, fin), len(s))
		}
		if len(fin) == 0 {
			if s != "" {
				t.Fatalf("empty set encodes to %q", s)
			}
			continue
		}
		rl, bl := measure(sliceRuns(c, fin))
		if len(s) != encodedLen(min(rl, bl)) {
			t.Fatalf("iter %d: not the smaller encoding: %d, runs %d bitset %d", iter, len(s), rl, bl)
		}
		kinds[kindOf(t, s)]++
		dec, err := Decode(c, s)
		if err != nil || !slices.Equal(dec, fin) {
			t.Fatalf("iter %d: round trip of %d offsets: %v", iter, len(fin), err)
		}
		// Bound to its committed offset.
		if _, err := Decode(c+1, s); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("iter %d: decoded against another committed offset: %v", iter, err)
		}
	}
	if kinds[kindRuns] < 50 || kinds[kindBits] < 50 {
		t.Fatalf("both encodings must be exercised: %v", kinds)
	}
	t.Logf("kinds chosen: runs %d, bitset %d", kinds[kindRuns], kinds[kindBits])
}

// TestStuckRecordEncoding: one record stuck at the committed offset while
// 100,000 later ones finish is a single finished run: a few bytes, where a
// bitset would take 12,500 bytes (16,675 characters) and fail the broker's
// 4096-byte limit.
func TestStuckRecordEncoding(t *testing.T) {
	const c, n = 5_000_000, 100_000
	var tr Tracker
	tr.Seed(c, nil)
	for o := int64(c); o <= c+n; o++ {
		if err := tr.Deliver(o); err != nil {
			t.Fatal(err)
		}
	}
	for o := int64(c + n); o > c; o-- { // worst order for the window: newest first
		if err := tr.Finish(o); err != nil {
			t.Fatal(err)
		}
		if o%10_000 == 0 && tr.MetadataSize() >= DefaultMetadataLimit {
			t.Fatalf("metadata %d bytes with %d finished", tr.MetadataSize(), c+n-o+1)
		}
	}
	md := tr.Metadata()
	if tr.Committable() != c || tr.FinishedAbove() != n {
		t.Fatalf("committable %d finished above %d", tr.Committable(), tr.FinishedAbove())
	}
	if kindOf(t, md) != kindRuns || len(md) > 16 {
		t.Fatalf("stuck record metadata %q (%d bytes)", md, len(md))
	}
	_, bl := measure(trackerRuns(&tr))
	t.Logf("stuck record + %d finished: metadata %q = %d bytes (bitset would be %d bytes, %d encoded); bound %d",
		n, md, len(md), bl, encodedLen(bl), tr.MetadataBound())
	fin, err := Decode(c, md)
	if err != nil || len(fin) != n || fin[0] != c+1 || fin[n-1] != c+n {
		t.Fatalf("decode: %d offsets, %v", len(fin), err)
	}
	if err := tr.Finish(c); err != nil || tr.Committable() != c+n+1 || tr.Metadata() != "" {
		t.Fatalf("after the stuck record finishes: committable %d metadata %q", tr.Committable(), tr.Metadata())
	}
}

func TestDecodeUnknownVersion(t *testing.T) {
	for _, s := range []string{"0", "2abc", "x", "{\"k\":1}", "\xff", "ckvR-ScAAA", " 1ckvR-ScAAA"} {
		if _, err := Decode(100, s); !errors.Is(err, ErrUnknownVersion) {
			t.Errorf("Decode(%q) = %v, want ErrUnknownVersion", s, err)
		}
	}
}

func TestDecodeCorrupt(t *testing.T) {
	good := Encode(100, []int64{101, 105})
	tests := []struct {
		name string
		c    int64
		s    string
	}{
		{"version only", 100, "1"},
		{"short", 100, "1ckvR"},
		{"bad base64", 100, "1ckv!-ScAAA"},
		{"padding", 100, good + "="},
		{"std alphabet", 100, strings.ReplaceAll(Encode(7, []int64{8, 9, 10, 20, 21, 22, 30, 31, 32}), "-", "+")},
		{"non-zero trailing bits", 100, good[:len(good)-1] + "B"},
		{"truncated", 100, good[:len(good)-2]},
		{"extra character", 100, good + "A"},
		{"other committed offset", 101, good},
		{"negative committed", -1, good},
		{"unknown kind", 100, seal(100, 'x', []byte{0, 0})},
		{"runs: odd value count", 100, seal(100, kindRuns, []byte{0, 0, 1})},
		{"runs: non-minimal varint", 100, seal(100, kindRuns, []byte{0x80, 0x00, 0x00})},
		{"runs: truncated varint", 100, seal(100, kindRuns, []byte{0x00, 0x80})},
		{"runs: varint overflow", 100, seal(100, kindRuns, []byte{0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})},
		{"runs: beyond MaxSpan", 100, seal(100, kindRuns, binary.AppendUvarint([]byte{0}, MaxSpan))},
		{"runs: gap beyond MaxSpan", 100, seal(100, kindRuns, append(binary.AppendUvarint(nil, MaxSpan), 0))},
		{"runs: sum beyond MaxSpan", 100, seal(100, kindRuns, append(binary.AppendUvarint([]byte{0}, MaxSpan-2), 0, 0))},
		{"runs: offsets overflow", math.MaxInt64 - 2, seal(math.MaxInt64-2, kindRuns, []byte{0, 2})},
		{"runs: offset math.MaxInt64", math.MaxInt64 - 3, seal(math.MaxInt64-3, kindRuns, []byte{0, 2})},
		{"bits: offset math.MaxInt64", math.MaxInt64 - 1, seal(math.MaxInt64-1, kindBits, []byte{1})},
		{"bits: zero last byte", 100, seal(100, kindBits, []byte{1, 0})},
		{"bits: beyond MaxSpan", 100, seal(100, kindBits, append(make([]byte, MaxSpan/8), 1))},
		{"bits: offsets overflow", math.MaxInt64 - 2, seal(math.MaxInt64-2, kindBits, []byte{0b100})},
		{"too long", 100, "1" + strings.Repeat("A", maxEncoded)},
	}
	for _, tt := range tests {
		if dec, err := Decode(tt.c, tt.s); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Decode = %v, %v; want ErrCorrupt", tt.name, dec, err)
		}
	}
	// The largest spans are accepted.
	for _, tt := range []struct {
		c int64
		s string
	}{
		{100, seal(100, kindRuns, binary.AppendUvarint([]byte{0}, MaxSpan-1))},
		{100, seal(100, kindBits, append(make([]byte, MaxSpan/8-1), 0x80))},
		{math.MaxInt64 - 4, seal(math.MaxInt64-4, kindRuns, []byte{0, 2})},
	} {
		dec, err := Decode(tt.c, tt.s)
		if err != nil || dec[len(dec)-1]-tt.c > MaxSpan {
			t.Errorf("Decode at the limit: %v", err)
		}
	}
}

// TestBodyDecodersBounds checks the body decoders' own MaxSpan checks
// (Decode's input length cap alone would also reject these bodies).
func TestBodyDecodersBounds(t *testing.T) {
	if _, err := decodeBits(0, append(make([]byte, MaxSpan/8), 1)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("bitset reaching MaxSpan+1: %v", err)
	}
	if dec, err := decodeBits(0, append(make([]byte, MaxSpan/8-1), 0x80)); err != nil || dec[0] != MaxSpan {
		t.Errorf("bitset reaching MaxSpan: %v", err)
	}
	if _, err := decodeRuns(0, append(binary.AppendUvarint([]byte{0}, MaxSpan-1), 0, 0)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("runs beyond MaxSpan: %v", err)
	}
}

// TestDecodeAllocationBounded: a huge input is rejected before it is
// base64-decoded, and the worst accepted input allocates MaxSpan offsets.
func TestDecodeAllocationBounded(t *testing.T) {
	huge := "1" + strings.Repeat("A", 8<<20)
	allocated := func(f func()) uint64 {
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		f()
		runtime.ReadMemStats(&b)
		return b.TotalAlloc - a.TotalAlloc
	}
	if n := allocated(func() { Decode(0, huge) }); n > 64<<10 {
		t.Errorf("Decode of an 8 MiB string allocated %d bytes", n)
	}
	worst := seal(0, kindRuns, binary.AppendUvarint([]byte{0}, MaxSpan-1))
	if n := allocated(func() { Decode(0, worst) }); n > 8*MaxSpan+64<<10 {
		t.Errorf("Decode of the largest run allocated %d bytes", n)
	}
}

func TestEncodeDropsInvalid(t *testing.T) {
	tests := []struct {
		c        int64
		in, kept []int64
	}{
		{10, []int64{5, 10, 11, 12}, []int64{11, 12}},
		{10, []int64{11, 11, 12}, []int64{11, 12}},
		{10, []int64{13, 12, 14}, []int64{13, 14}},
		{10, []int64{11, 10 + MaxSpan, 11 + MaxSpan}, []int64{11, 10 + MaxSpan}},
		{-1, []int64{0, 1}, nil},
		{math.MaxInt64 - 3, []int64{math.MaxInt64 - 1, math.MaxInt64}, []int64{math.MaxInt64 - 1}},
	}
	for _, tt := range tests {
		got := Encode(tt.c, tt.in)
		if got != Encode(tt.c, tt.kept) || EncodedLen(tt.c, tt.in) != len(got) {
			t.Errorf("Encode(%d, %v) = %q, want %q", tt.c, tt.in, got, Encode(tt.c, tt.kept))
		}
	}
}

func TestEncodedLenNoAlloc(t *testing.T) {
	fin := make([]int64, 10_000)
	for i := range fin {
		fin[i] = int64(1 + 2*i)
	}
	if a := testing.AllocsPerRun(10, func() { EncodedLen(0, fin) }); a != 0 {
		t.Fatalf("EncodedLen allocates %v", a)
	}
}

// FuzzDecode: arbitrary strings never panic, and whatever decodes is a valid
// finished set (sorted, within MaxSpan) that round-trips. The sealed variant
// wraps the fuzzed body with a valid checksum so the body decoders are
// reached.
func FuzzDecode(f *testing.F) {
	f.Add(int64(100), Encode(100, []int64{101, 105}), byte(kindRuns), []byte{0, 0})
	f.Add(int64(0), Encode(0, []int64{3, 4, 5, 7, 9, 11, 14, 18}), byte(kindBits), []byte{0xff, 1})
	f.Add(int64(5), "2", byte('x'), []byte{0x80, 0x80, 0x01})
	f.Add(int64(-1), "", byte(kindRuns), []byte{0xff, 0xff, 0xff, 0x7f, 0})
	f.Fuzz(func(t *testing.T, c int64, s string, kind byte, body []byte) {
		check := func(s string) {
			dec, err := Decode(c, s)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnknownVersion) {
					t.Fatalf("untyped error %v", err)
				}
				return
			}
			if len(dec) > MaxSpan {
				t.Fatalf("%d offsets", len(dec))
			}
			for i, o := range dec {
				if o <= c || o-c > MaxSpan || (i > 0 && o <= dec[i-1]) {
					t.Fatalf("invalid offset %d at %d", o, i)
				}
			}
			again, err := Decode(c, Encode(c, dec))
			if err != nil || !slices.Equal(again, dec) && len(dec) > 0 {
				t.Fatalf("re-encoding does not round-trip: %v", err)
			}
			if s != "" && len(dec) == 0 {
				t.Fatalf("non-empty %q decodes to nothing", s)
			}
		}
		check(s)
		check(seal(c, kind, body))
	})
}

// FuzzEncodeRoundTrip: any finished set, given as deltas, round-trips and
// the tracker encodes the same set identically.
func FuzzEncodeRoundTrip(f *testing.F) {
	f.Add(int64(0), []byte{1, 1, 1, 5, 200})
	f.Add(int64(1<<40), []byte{0, 0, 0, 0, 255, 255, 3})
	f.Fuzz(func(t *testing.T, c int64, deltas []byte) {
		if c < 0 || c > math.MaxInt64-1<<24 {
			return
		}
		var fin []int64
		o := c
		for _, d := range deltas {
			o += 1 + int64(d)
			fin = append(fin, o)
		}
		s := Encode(c, fin)
		dec, err := Decode(c, s)
		if err != nil || !slices.Equal(dec, fin) && len(fin) > 0 || len(s) != EncodedLen(c, fin) {
			t.Fatalf("round trip: %v", err)
		}
		var tr Tracker
		if err := tr.Seed(c, fin); err != nil {
			t.Fatal(err)
		}
		if tr.Metadata() != s || tr.MetadataSize() != len(s) {
			t.Fatalf("tracker encodes %q, Encode %q", tr.Metadata(), s)
		}
	})
}
