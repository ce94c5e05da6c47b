package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Codec is a compression codec, numbered as in the low three bits of the
// batch attributes.
type Codec int8

const (
	// CodecNone is no compression.
	CodecNone Codec = 0
	// CodecGzip is gzip (RFC 1952).
	CodecGzip Codec = 1
	// CodecSnappy is snappy: raw blocks when encoding (as librdkafka and
	// franz-go write), raw or xerial-framed (as the Java client writes)
	// when decoding.
	CodecSnappy Codec = 2
	// CodecLZ4 is the LZ4 frame format.
	CodecLZ4 Codec = 3
	// CodecZstd is zstd; brokers accept it from produce request v7 on.
	CodecZstd Codec = 4
)

// String returns the Kafka name of the codec.
func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLZ4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return "unknown"
}

// Valid reports whether c is a codec this package can encode and decode.
func (c Codec) Valid() bool { return c >= CodecNone && c <= CodecZstd }

// DefaultMaxDecompressedSize is the decompressed size limit used when
// DecodeOptions.MaxDecompressedSize is zero. It is far above what real
// batches decompress to (brokers cap the compressed size at
// message.max.bytes, 1 MiB by default) while keeping a bomb from taking the
// process down.
const DefaultMaxDecompressedSize = 128 << 20

// errCompress is returned when a compressor fails, which with in-memory
// writers only happens for inputs too large for the format.
var errCompress = errors.New("batch: compression failed")

// ---------------------------------------------------------------------------
// Compression. Encoders are pooled (gzip, lz4) or shared (zstd's EncodeAll is
// safe for concurrent use) because creating them costs far more than
// compressing a typical batch.

// appendWriter is an io.Writer that appends to a slice, so compressors can
// write straight into a (pooled) destination without a bytes.Buffer.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

type gzipEncoder struct {
	w   *gzip.Writer
	out appendWriter
}

var gzipEncoders = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.DefaultCompression)
	return &gzipEncoder{w: w}
}}

type lz4Encoder struct {
	w   *lz4.Writer
	out appendWriter
}

var lz4Encoders = sync.Pool{New: func() any {
	w := lz4.NewWriter(nil)
	// 64 KiB blocks as the Java client uses: LZ4's window is 64 KiB
	// anyway, so larger blocks barely help the ratio but make every
	// writer and reader hold megabytes. No content checksum: the batch
	// CRC already covers the data, and Java's writer omits it too.
	_ = w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false))
	return &lz4Encoder{w: w}
}}

// zstdEncoders pools single-goroutine encoders (as franz-go does): an
// encoder with the default concurrency hands each EncodeAll's blocks to
// its worker goroutines, which for batch-sized inputs is about twice as
// slow as encoding inline (BenchmarkEncode/zstd: 2.7 → 1.5 µs/record).
var zstdEncoders = sync.Pool{New: func() any {
	e, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithEncoderConcurrency(1),
		// Kafka frames are checksummed by the batch CRC; skipping
		// zstd's own xxhash saves time on both sides.
		zstd.WithEncoderCRC(false),
		zstd.WithZeroFrames(true),
		// Batches are at most a few MiB: a 64 KiB window (as franz-go
		// uses) finds nearly the same matches and sets up much faster.
		zstd.WithWindowSize(64<<10),
	)
	if err != nil {
		panic(err) // only invalid options fail, which is a bug here
	}
	return e
}}

// compress appends the compressed form of src to dst.
func compress(dst, src []byte, codec Codec) ([]byte, error) {
	switch codec {
	case CodecGzip:
		e := gzipEncoders.Get().(*gzipEncoder)
		e.out.b = dst
		e.w.Reset(&e.out)
		_, err := e.w.Write(src)
		if err == nil {
			err = e.w.Close()
		}
		dst = e.out.b
		e.out.b = nil
		gzipEncoders.Put(e)
		return dst, err

	case CodecSnappy:
		n := s2.MaxEncodedLen(len(src))
		if n < 0 {
			return dst, errCompress
		}
		dst = grow(dst, n)
		// EncodeSnappy writes at the start of the slice it is given
		// (it does not append), so hand it the free tail.
		enc := s2.EncodeSnappy(dst[len(dst):], src)
		return dst[:len(dst)+len(enc)], nil

	case CodecLZ4:
		e := lz4Encoders.Get().(*lz4Encoder)
		e.out.b = dst
		e.w.Reset(&e.out)
		_, err := e.w.Write(src)
		if err == nil {
			err = e.w.Close()
		}
		dst = e.out.b
		e.out.b = nil
		e.w.Reset(nil)
		lz4Encoders.Put(e)
		return dst, err

	case CodecZstd:
		e := zstdEncoders.Get().(*zstd.Encoder)
		out := e.EncodeAll(src, dst)
		zstdEncoders.Put(e)
		return out, nil
	}
	return dst, errCompress
}

// grow returns dst with room for at least n more bytes.
func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst
	}
	c := max(2*cap(dst), len(dst)+n)
	nb := make([]byte, len(dst), c)
	copy(nb, dst)
	return nb
}

// scratch buffers hold intermediate output (compressed batches before they
// are copied out at their exact size, lz4 output before the same). Large
// ones are not kept, so one huge batch does not pin memory forever.
var scratchPool = sync.Pool{New: func() any {
	b := make([]byte, 0, 64<<10)
	return &b
}}

const maxPooledScratch = 4 << 20

func getScratch() *[]byte { return scratchPool.Get().(*[]byte) }

func putScratch(p *[]byte, b []byte) {
	if cap(b) > maxPooledScratch {
		return
	}
	*p = b[:0]
	scratchPool.Put(p)
}

// ---------------------------------------------------------------------------
// Decompression. Every path is bounded by maxSize: sizes that formats declare up
// front are checked before allocating (snappy, zstd frame content size), and
// streams are read through a loop that never grows its buffer past maxSize+1.
// The result is a fresh slice that decoded records may alias.

type gzipDecoder struct {
	r   gzip.Reader
	src bytes.Reader
}

var gzipDecoders = sync.Pool{New: func() any { return new(gzipDecoder) }}

type lz4Decoder struct {
	r   *lz4.Reader
	src bytes.Reader
}

var lz4Decoders = sync.Pool{New: func() any { return &lz4Decoder{r: lz4.NewReader(nil)} }}

// zstd decoders are shared, one per distinct limit, because the limit is a
// decoder option (WithDecoderMaxMemory) and DecodeAll is safe for
// concurrent use. In practice a process uses one limit.
var zstdDecoders sync.Map // int -> *zstd.Decoder

func zstdDecoder(maxSize int) (*zstd.Decoder, error) {
	if d, ok := zstdDecoders.Load(maxSize); ok {
		return d.(*zstd.Decoder), nil
	}
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderMaxMemory(uint64(maxSize)),
		zstd.WithDecoderConcurrency(0),
	)
	if err != nil {
		return nil, err
	}
	actual, loaded := zstdDecoders.LoadOrStore(maxSize, d)
	if loaded {
		d.Close()
	}
	return actual.(*zstd.Decoder), nil
}

// decompress returns the decompressed form of src, which must not exceed maxSize
// bytes. Errors are ErrTooLarge or a codec error (corrupt input).
func decompress(src []byte, codec Codec, maxSize int) ([]byte, error) {
	switch codec {
	case CodecGzip:
		return gunzip(src, maxSize)
	case CodecSnappy:
		return unsnappy(src, maxSize)
	case CodecLZ4:
		return unlz4(src, maxSize)
	case CodecZstd:
		return unzstd(src, maxSize)
	}
	return nil, ErrUnsupported
}

func gunzip(src []byte, maxSize int) ([]byte, error) {
	d := gzipDecoders.Get().(*gzipDecoder)
	defer func() {
		d.src.Reset(nil) // do not pin the input while pooled
		gzipDecoders.Put(d)
	}()
	d.src.Reset(src)
	if err := d.r.Reset(&d.src); err != nil {
		return nil, err
	}
	// The gzip trailer's ISIZE is the uncompressed size (mod 2^32) of the
	// last member: with it, honest input is read straight into an exactly
	// sized buffer. It is only a hint, capped by maxSize and by deflate's
	// maximum ratio (about 1032:1), so a lying trailer cannot make us
	// allocate much.
	hint := 0
	if len(src) >= 18 {
		hint = int(binary.LittleEndian.Uint32(src[len(src)-4:]))
	}
	hint = min(hint, maxSize, len(src)*1032)
	return readBounded(make([]byte, 0, hint+1), &d.r, maxSize)
}

func unlz4(src []byte, maxSize int) ([]byte, error) {
	d := lz4Decoders.Get().(*lz4Decoder)
	defer func() {
		d.r.Reset(nil)
		d.src.Reset(nil)
		lz4Decoders.Put(d)
	}()
	d.src.Reset(src)
	d.r.Reset(&d.src)
	// LZ4 frames from Kafka clients do not declare their content size, so
	// decompress into scratch and copy out at the exact size: records
	// alias the result, and slack capacity would stay pinned with them.
	sp := getScratch()
	out, err := readBounded((*sp)[:0], d.r, maxSize)
	var res []byte
	if err == nil {
		res = make([]byte, len(out))
		copy(res, out)
	}
	putScratch(sp, out)
	return res, err
}

// readBounded reads r to EOF, appending to dst, failing with ErrTooLarge as
// soon as more than maxSize bytes arrive. The buffer grows geometrically but
// never beyond maxSize+1 bytes.
func readBounded(dst []byte, r io.Reader, maxSize int) ([]byte, error) {
	limit := maxSize + 1
	if maxSize >= math.MaxInt-1 {
		limit = math.MaxInt
	}
	stalls := 0
	for {
		if len(dst) == cap(dst) {
			if len(dst) >= limit {
				return nil, ErrTooLarge
			}
			c := min(max(2*cap(dst), 4096), limit)
			nb := make([]byte, len(dst), c)
			copy(nb, dst)
			dst = nb
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			if stalls++; stalls > 100 {
				return nil, io.ErrNoProgress
			}
		} else {
			stalls = 0
		}
	}
	if len(dst) > maxSize {
		return nil, ErrTooLarge
	}
	return dst, nil
}

// zstdMinMemory is the least memory limit zstd decoders get. The decoder
// refuses frames whose window exceeds its limit, even if their content is
// small, and streaming zstd encoders (the Java client's zstd-jni among them)
// declare windows of up to 8 MiB without knowing the content size. So a
// MaxDecompressedSize below this still admits such frames: zstd output may
// reach this size before the limit is enforced on the result. A variable so
// tests can exercise the in-decoder limit with small inputs.
var zstdMinMemory = 8 << 20

func unzstd(src []byte, maxSize int) ([]byte, error) {
	d, err := zstdDecoder(max(maxSize, zstdMinMemory))
	if err != nil {
		return nil, err
	}
	out, err := d.DecodeAll(src, nil)
	if err != nil {
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
			return nil, ErrTooLarge
		}
		return nil, err
	}
	if len(out) > maxSize {
		return nil, ErrTooLarge
	}
	return out, nil
}

// xerialMagic starts the framing that the Java client's snappy-java
// SnappyOutputStream writes: the 8-byte magic, then a 4-byte version and a
// 4-byte compatible version, then chunks of [int32 length][raw snappy block].
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

var errXerial = errors.New("malformed xerial snappy framing")

func unsnappy(src []byte, maxSize int) ([]byte, error) {
	if len(src) >= 16 && bytes.HasPrefix(src, xerialMagic) {
		return unxerial(src[16:], maxSize)
	}
	n, err := s2.DecodedLen(src)
	if err != nil {
		return nil, err
	}
	if n > maxSize {
		return nil, ErrTooLarge
	}
	return s2.Decode(make([]byte, n), src)
}

func unxerial(src []byte, maxSize int) ([]byte, error) {
	// First pass: validate the chunk framing and add up the declared
	// sizes, so the output is allocated once, exactly, and only if it is
	// within bounds.
	total := 0
	for rem := src; len(rem) > 0; {
		if len(rem) < 4 {
			return nil, errXerial
		}
		size := binary.BigEndian.Uint32(rem)
		rem = rem[4:]
		if uint64(size) > uint64(len(rem)) {
			return nil, errXerial
		}
		n, err := s2.DecodedLen(rem[:size])
		if err != nil {
			return nil, err
		}
		if n > maxSize-total {
			return nil, ErrTooLarge
		}
		total += n
		rem = rem[size:]
	}
	out := make([]byte, total)
	pos := 0
	for len(src) > 0 {
		size := binary.BigEndian.Uint32(src)
		src = src[4:]
		n, _ := s2.DecodedLen(src[:size])
		if _, err := s2.Decode(out[pos:pos+n], src[:size]); err != nil {
			return nil, err
		}
		pos += n
		src = src[size:]
	}
	return out, nil
}

// Compress appends the compressed form of src to dst, for payloads that are
// not record batches (KIP-714 telemetry pushes). CodecNone appends src as
// it is.
func Compress(dst, src []byte, codec Codec) ([]byte, error) {
	if codec == CodecNone {
		return append(dst, src...), nil
	}
	return compress(dst, src, codec)
}
