package riffle

import (
	"slices"
	"testing"
)

func queueRecs(from, n int) []*Record {
	out := make([]*Record, n)
	for i := range out {
		out[i] = &Record{Offset: int64(from + i), Value: make([]byte, 10)}
	}
	return out
}

func offsetsOf(rs []*Record) []int64 {
	var out []int64
	for _, r := range rs {
		out = append(out, r.Offset)
	}
	return out
}

func TestRecQueue(t *testing.T) {
	var q recQueue
	if c, b := q.take(5); c != nil || b != 0 {
		t.Fatal("take from an empty queue")
	}
	q.push(queueRecs(0, 4), 40)
	q.push(queueRecs(4, 3), 30)
	if q.len() != 7 || q.bytes != 70 {
		t.Fatalf("len %d bytes %d", q.len(), q.bytes)
	}
	// Within the head segment: a capped sub-slice, no copy.
	c, b := q.take(3)
	if !slices.Equal(offsetsOf(c), []int64{0, 1, 2}) || b != 30 || cap(c) != 3 {
		t.Fatalf("chunk %v bytes %d cap %d", offsetsOf(c), b, cap(c))
	}
	// Spanning segments: copied, in order.
	c, b = q.take(3)
	if !slices.Equal(offsetsOf(c), []int64{3, 4, 5}) || b != 30 {
		t.Fatalf("chunk %v bytes %d", offsetsOf(c), b)
	}
	// A handler stopped at offset 4: 4 and 5 go back in front of 6.
	q.pushFront(c[1:], 20)
	c, _ = q.take(10)
	if !slices.Equal(offsetsOf(c), []int64{4, 5, 6}) || q.len() != 0 || q.bytes != 0 {
		t.Fatalf("after pushFront: %v, left %d/%d", offsetsOf(c), q.len(), q.bytes)
	}
	// An append to a chunk cannot overwrite queued records.
	q.push(queueRecs(10, 5), 50)
	c, _ = q.take(2)
	_ = append(c, &Record{Offset: 99})
	c, _ = q.take(3)
	if !slices.Equal(offsetsOf(c), []int64{12, 13, 14}) {
		t.Fatalf("queued records overwritten: %v", offsetsOf(c))
	}
	q.push(queueRecs(20, 2), 20)
	if got := q.reset(); got != 20 || q.len() != 0 {
		t.Fatalf("reset returned %d, len %d", got, q.len())
	}
}

// Model test: any sequence of pushes, takes and put-backs yields the
// records in order, each once, with consistent counts.
func TestRecQueueModel(t *testing.T) {
	for seed := range 200 {
		var q recQueue
		var model []int64
		next := 0
		for step := range 50 {
			switch (seed*7 + step*13) % 4 {
			case 0, 1:
				n := (seed+step)%5 + 1
				q.push(queueRecs(next, n), int64(10*n))
				for i := range n {
					model = append(model, int64(next+i))
				}
				next += n
			case 2:
				max := (seed*step)%4 + 1
				c, b := q.take(max)
				want := model[:min(max, len(model))]
				if !slices.Equal(offsetsOf(c), want) || b != int64(10*len(c)) {
					t.Fatalf("seed %d step %d: took %v want %v", seed, step, offsetsOf(c), want)
				}
				model = model[len(want):]
				if k := len(c) / 2; len(c) > 0 && step%3 == 0 {
					q.pushFront(c[k:], int64(10*(len(c)-k)))
					model = append(slices.Clone(offsetsOf(c[k:])), model...)
				}
			case 3:
			}
			if q.len() != len(model) || q.bytes != int64(10*len(model)) {
				t.Fatalf("seed %d step %d: len %d bytes %d, model %d", seed, step, q.len(), q.bytes, len(model))
			}
		}
	}
}
