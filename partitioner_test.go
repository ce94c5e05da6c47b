package riffle

import "testing"

// Vectors from the Java client's UtilsTest.testMurmur2.
func TestMurmur2JavaVectors(t *testing.T) {
	cases := map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	}
	for in, want := range cases {
		if got := murmur2([]byte(in)); got != want {
			t.Errorf("murmur2(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestDefaultPartitioner(t *testing.T) {
	p := DefaultPartitioner().ForTopic("t")
	// Keyed: stable and murmur2-based.
	k := &Record{Key: []byte("foobar")}
	want := int((-790332482 & 0x7fffffff) % 12)
	for i := 0; i < 3; i++ {
		if got := p.Partition(k, 12); got != want {
			t.Fatalf("keyed partition %d, want %d", got, want)
		}
	}
	// Empty key is a key (hashes), nil key is sticky.
	if got := p.Partition(&Record{Key: []byte{}}, 12); got != murmurPartition([]byte{}, 12) {
		t.Fatalf("empty key partition %d", got)
	}
	// Sticky: the same partition until a batch's worth, then another.
	big := &Record{Value: make([]byte, 1024)}
	first := p.Partition(big, 12)
	for i := 1; i < stickySwitchBytes/1024; i++ {
		if got := p.Partition(big, 12); got != first {
			t.Fatalf("sticky switched after %d KiB", i)
		}
	}
	if got := p.Partition(big, 12); got == first {
		t.Fatalf("sticky did not move on after %d bytes", stickySwitchBytes)
	}
}

func TestRoundRobinAndManual(t *testing.T) {
	rr := RoundRobinPartitioner().ForTopic("t")
	seen := map[int]int{}
	for i := 0; i < 30; i++ {
		seen[rr.Partition(&Record{}, 3)]++
	}
	if len(seen) != 3 || seen[0] != 10 {
		t.Fatalf("round robin distribution %v", seen)
	}
	m := ManualPartitioner().ForTopic("t")
	if m.Partition(&Record{Partition: 7}, 12) != 7 {
		t.Fatal("manual partitioner ignored the record's partition")
	}
}
