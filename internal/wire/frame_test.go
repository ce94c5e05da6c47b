package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/riffle-go/riffle/internal/errs"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func frame(size int32, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(size))
	return append(b, body...)
}

func TestReadFrame(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		max     int32
		want    []byte
		wantErr error
	}{
		{"ok", frame(3, []byte("abc")), 0, []byte("abc"), nil},
		{"empty", frame(0, nil), 0, []byte{}, nil},
		{"eof", nil, 0, nil, io.EOF},
		{"short prefix", []byte{0, 0}, 0, nil, errs.ErrMalformed},
		{"negative", frame(-1, nil), 0, nil, errs.ErrMalformed},
		{"too big", frame(1<<30, nil), 0, nil, errs.ErrMalformed},
		{"above custom max", frame(11, make([]byte, 11)), 10, nil, errs.ErrMalformed},
		{"truncated", frame(10, []byte("abc")), 0, nil, errs.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadFrame(bytes.NewReader(tt.in), tt.max, nil, 0)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && !bytes.Equal(got, tt.want) {
				t.Fatalf("got %q want %q", got, tt.want)
			}
		})
	}
}

// A frame claiming 90 MiB that delivers a few bytes must not allocate 90 MiB.
func TestReadFrameTruncatedDoesNotAllocateClaimedSize(t *testing.T) {
	in := frame(90<<20, []byte("tiny"))
	before := totalAlloc()
	_, err := ReadFrame(bytes.NewReader(in), 0, nil, 0)
	grew := totalAlloc() - before
	if !errors.Is(err, errs.ErrMalformed) {
		t.Fatalf("err = %v", err)
	}
	if grew > 8<<20 {
		t.Fatalf("allocated %d bytes for a 4-byte body", grew)
	}
}

func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

func TestSplitResponse(t *testing.T) {
	// correlation id 7, one tagged field (tag 1, 2 bytes), then body "xy".
	body := []byte{0, 0, 0, 7, 1, 1, 2, 'a', 'b', 'x', 'y'}
	id, rest, err := SplitResponse(body, true)
	if err != nil || id != 7 || string(rest) != "xy" {
		t.Fatalf("got %d %q %v", id, rest, err)
	}
	id, rest, err = SplitResponse(body, false)
	if err != nil || id != 7 || len(rest) != 7 {
		t.Fatalf("non-flexible: %d %q %v", id, rest, err)
	}
	if _, _, err := SplitResponse([]byte{0, 0, 0, 7, 1, 1, 200}, true); !errors.Is(err, errs.ErrMalformed) {
		t.Fatalf("oversized tag: %v", err)
	}
	if _, _, err := SplitResponse([]byte{0, 0}, false); !errors.Is(err, errs.ErrMalformed) {
		t.Fatalf("short: %v", err)
	}
}

func TestFormatterCorrelationID(t *testing.T) {
	f := NewFormatter("riffle-test")
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(9)
	b := f.Append(nil, req)
	SetCorrelationID(b, 42)
	if got := int32(binary.BigEndian.Uint32(b[8:])); got != 42 {
		t.Fatalf("corr id %d", got)
	}
	if int(binary.BigEndian.Uint32(b)) != len(b)-4 {
		t.Fatal("size prefix does not match frame")
	}
	if !ResponseFlexible(req) {
		t.Fatal("metadata v9 is flexible")
	}
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	if ResponseFlexible(av) {
		t.Fatal("ApiVersions responses never have a flexible header")
	}
}

func FuzzReadFrame(f *testing.F) {
	f.Add(frame(3, []byte("abc")))
	f.Add(frame(-5, nil))
	f.Add(frame(1<<30, []byte("x")))
	f.Add([]byte{0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		body, err := ReadFrame(bytes.NewReader(in), 1<<16, nil, 0)
		if err == nil {
			if len(in) < 4 || int(binary.BigEndian.Uint32(in)) != len(body) {
				t.Fatalf("body length %d does not match prefix", len(body))
			}
			_, _, _ = SplitResponse(body, true)
		}
	})
}

// A frame within the caller's trusted size is read into one buffer of its
// exact size: no growth, no copy (a 12 MiB fetch response grown in steps
// copied about as many bytes again as it held). Larger than trusted, it
// still grows as its bytes arrive.
func TestReadFrameTrustedOneAllocation(t *testing.T) {
	const n = 12 << 20
	in := frame(n, make([]byte, n))
	r := bytes.NewReader(in)
	allocs := testing.AllocsPerRun(5, func() {
		r.Reset(in)
		body, err := ReadFrame(r, 0, nil, n+1<<20)
		if err != nil || len(body) != n || cap(body) != n {
			t.Fatalf("len %d cap %d err %v", len(body), cap(body), err)
		}
	})
	// The body, and the 4-byte size prefix, which escapes through the
	// io.Reader interface.
	if allocs > 2 {
		t.Fatalf("%v allocations for a trusted frame, want 2", allocs)
	}
	grown := testing.AllocsPerRun(5, func() {
		r.Reset(in)
		if _, err := ReadFrame(r, 0, nil, 0); err != nil {
			t.Fatal(err)
		}
	})
	if grown < 4 {
		t.Fatalf("%v allocations above the default trusted size: expected chunked growth", grown)
	}
}
