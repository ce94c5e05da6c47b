package integration_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/internal/kafkatest"
)

// The Java client (kafka-clients 4.4.0) as a peer: internal/kafkatest's
// JavaPeer, compiled once per run (and cached by its source's hash).
var javaPeer struct {
	once sync.Once
	peer *kafkatest.JavaPeer
	err  error
}

// needJava is need plus the Java peer: it skips (fails with
// RIFFLE_KAFKA_REQUIRE=1) in one line when it cannot be built, e.g. for
// want of javac.
func needJava(t *testing.T) *kafkatest.JavaPeer {
	t.Helper()
	need(t)
	javaPeer.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		javaPeer.peer, javaPeer.err = kafkatest.BuildJavaPeer(ctx)
	})
	if javaPeer.err != nil {
		if env.require {
			t.Fatal(javaPeer.err)
		}
		t.Skip(javaPeer.err)
	}
	return javaPeer.peer
}

// javaLine is one line of the Java peer's stdout (see javapeer/Peer.java).
type javaLine struct {
	Ev      string     `json:"ev"`
	Topic   string     `json:"topic"`
	P       int32      `json:"p"`
	O       int64      `json:"o"`
	Ts      int64      `json:"ts"`
	TsType  string     `json:"tstype"`
	Epoch   int32      `json:"epoch"`
	Key     []byte     `json:"key"`
	Value   []byte     `json:"value"`
	Headers [][][]byte `json:"headers"`
	Ms      int64      `json:"ms"`
	Tps     []struct {
		Topic string `json:"topic"`
		P     int32  `json:"p"`
	} `json:"tps"`
	Ack   *int   `json:"ack"`
	Done  string `json:"done"`
	Error string `json:"error"`

	raw string
}

// javaProc is a running Java peer of the test, killed when the test ends.
type javaProc struct {
	t  *testing.T
	pp *kafkatest.PeerProcess
}

func startJava(t *testing.T, peer *kafkatest.JavaPeer, args ...string) *javaProc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pp, err := peer.Start(ctx, append(args[:1:1], append([]string{"--bootstrap", strings.Join(env.addrs, ",")}, args[1:]...)...)...)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	jp := &javaProc{t: t, pp: pp}
	t.Cleanup(func() {
		cancel()
		pp.Kill()
		wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer wcancel()
		_ = pp.Wait(wctx)
		if t.Failed() {
			t.Logf("java peer %s stderr:\n%s", args[0], lastN(pp.Stderr(), 40))
		}
	})
	return jp
}

func lastN(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}

// next is the peer's next line, failing the test after d or when the peer
// exits first.
func (jp *javaProc) next(d time.Duration) javaLine {
	jp.t.Helper()
	select {
	case s, ok := <-jp.pp.Lines():
		if !ok {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			jp.t.Fatalf("java peer exited (%v) before its next line; stderr:\n%s", jp.pp.Wait(ctx), lastN(jp.pp.Stderr(), 40))
		}
		var l javaLine
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			jp.t.Fatalf("java peer line %q: %v", s, err)
		}
		l.raw = s
		return l
	case <-time.After(d):
		jp.t.Fatalf("java peer: no line after %v; stderr:\n%s", d, lastN(jp.pp.Stderr(), 40))
	}
	panic("unreachable")
}

// until reads lines until one satisfies stop (returned with the lines
// before it), within d in all.
func (jp *javaProc) until(d time.Duration, stop func(javaLine) bool) (before []javaLine, last javaLine) {
	jp.t.Helper()
	deadline := time.Now().Add(d)
	for {
		l := jp.next(time.Until(deadline))
		if stop(l) {
			return before, l
		}
		before = append(before, l)
	}
}

func (jp *javaProc) send(line string) {
	jp.t.Helper()
	if err := jp.pp.Send(line); err != nil {
		jp.t.Fatalf("java peer stdin: %v; stderr:\n%s", err, lastN(jp.pp.Stderr(), 40))
	}
}

// javaBytes is the peer's token for b: "-" for nil, "b:" + base64.
func javaBytes(b []byte) string {
	if b == nil {
		return "-"
	}
	return "b:" + base64.StdEncoding.EncodeToString(b)
}

// javaRec is the peer's produce command for r (to r.Partition, at
// r.Timestamp).
func javaRec(r *riffle.Record) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "rec %s %d %s %s %d", r.Topic, r.Partition, javaBytes(r.Key), javaBytes(r.Value), r.Timestamp.UnixMilli())
	for _, h := range r.Headers {
		sb.WriteString(" " + base64.StdEncoding.EncodeToString([]byte(h.Key)) + ":" + javaBytes(h.Value))
	}
	return sb.String()
}

// interopRecords are n records for topic's partitions 0..parts-1 with
// every edge the formats have: null and empty keys and values, headers
// with null, empty and binary values and repeated keys, no headers,
// binary and large compressible values, explicit millisecond timestamps.
func interopRecords(topic string, parts int32, n int, tag string) []*riffle.Record {
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	out := make([]*riffle.Record, n)
	for i := range n {
		r := &riffle.Record{Topic: topic, Partition: int32(i) % parts, Timestamp: base.Add(time.Duration(i) * time.Millisecond)}
		v := []byte(tag + "-" + strconv.Itoa(i))
		switch i % 8 {
		case 0:
			r.Key, r.Value = nil, v
		case 1:
			r.Key, r.Value = []byte{}, v
		case 2:
			r.Key, r.Value = []byte("k"+strconv.Itoa(i)), nil
		case 3:
			r.Key, r.Value = []byte("k"+strconv.Itoa(i)), []byte{}
		case 4:
			r.Key, r.Value = []byte{0, 0xff, 0x80, byte(i)}, append([]byte{0, 1, 0xfe}, v...)
		case 5:
			r.Key, r.Value = nil, nil
		case 6:
			r.Key, r.Value = []byte("big"), bytes.Repeat(v, 2000)
		default:
			r.Key, r.Value = []byte{}, []byte{}
		}
		switch i % 4 {
		case 0:
		case 1:
			r.Headers = []riffle.Header{{Key: "h", Value: []byte("1")}, {Key: "h", Value: []byte("2")}}
		case 2:
			r.Headers = []riffle.Header{{Key: "null", Value: nil}, {Key: "empty", Value: []byte{}}, {Key: "", Value: []byte("nokey")}}
		default:
			r.Headers = []riffle.Header{{Key: "bin é", Value: []byte{0xff, 0, 0x7f}}}
		}
		out[i] = r
	}
	return out
}

// diffRecord says how got differs from want in key, value, headers and
// timestamp ("" if not at all).
func diffRecord(want, got *riffle.Record) string {
	var d []string
	if !sameBytes(want.Key, got.Key) {
		d = append(d, fmt.Sprintf("key %s, want %s", show(got.Key), show(want.Key)))
	}
	if !sameBytes(want.Value, got.Value) {
		d = append(d, fmt.Sprintf("value %s, want %s", show(got.Value), show(want.Value)))
	}
	if len(want.Headers) != len(got.Headers) {
		d = append(d, fmt.Sprintf("headers %v, want %v", got.Headers, want.Headers))
	} else {
		for i := range want.Headers {
			if want.Headers[i].Key != got.Headers[i].Key || !sameBytes(want.Headers[i].Value, got.Headers[i].Value) {
				d = append(d, fmt.Sprintf("headers %v, want %v", got.Headers, want.Headers))
				break
			}
		}
	}
	if !want.Timestamp.Equal(got.Timestamp) {
		d = append(d, fmt.Sprintf("timestamp %v, want %v", got.Timestamp.UnixMilli(), want.Timestamp.UnixMilli()))
	}
	return strings.Join(d, "; ")
}

func show(b []byte) string {
	if b == nil {
		return "null"
	}
	if len(b) > 40 {
		return fmt.Sprintf("%q...(%d bytes)", b[:40], len(b))
	}
	return fmt.Sprintf("%q", b)
}

// recordOf is the Record a Java consumer's line describes.
func recordOf(l javaLine) *riffle.Record {
	r := &riffle.Record{Topic: l.Topic, Partition: l.P, Offset: l.O, LeaderEpoch: l.Epoch, Key: l.Key, Value: l.Value,
		Timestamp: time.UnixMilli(l.Ts)}
	for _, h := range l.Headers {
		r.Headers = append(r.Headers, riffle.Header{Key: string(h[0]), Value: h[1]})
	}
	return r
}

// javaCodecs are the Java producer's compression.type for Riffle's codecs.
var javaCodecs = []struct {
	name  string
	codec riffle.Compression
}{
	{"none", riffle.CompressionNone},
	{"gzip", riffle.CompressionGzip},
	{"snappy", riffle.CompressionSnappy},
	{"lz4", riffle.CompressionLZ4},
	{"zstd", riffle.CompressionZstd},
}
