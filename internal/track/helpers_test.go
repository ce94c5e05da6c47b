package track

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// check recomputes every counter the Tracker maintains from its bits, bit
// by bit, and verifies the representation invariants, including memory
// proportional to the window.
func (t *Tracker) check() error {
	if t.commit < 0 || t.next < 0 || t.next > t.hi || t.commit > t.hi {
		return fmt.Errorf("bounds commit=%d next=%d hi=%d", t.commit, t.next, t.hi)
	}
	if t.hi-1-t.commit > MaxSpan {
		return fmt.Errorf("window %d > MaxSpan+1", t.hi-t.commit)
	}
	live := t.live()
	if n := len(t.ring); n != 0 && n&(n-1) != 0 {
		return fmt.Errorf("ring length %d not a power of two", n)
	}
	if live > len(t.ring) {
		return fmt.Errorf("live words %d > ring %d", live, len(t.ring))
	}
	if len(t.ring) > max(minWords, 4*live) {
		return fmt.Errorf("ring %d words for %d live: memory not proportional to the window", len(t.ring), live)
	}
	if t.commit < t.hi && !t.pendingAt(t.commit) {
		return fmt.Errorf("committable %d is not pending", t.commit)
	}
	// Every bit outside the window is zero.
	liveIdx := map[int]int64{}
	if live > 0 {
		m := uint64(len(t.ring) - 1)
		for k := t.commit >> 6; k <= (t.hi-1)>>6; k++ {
			liveIdx[int(uint64(k)&m)] = k
		}
	}
	for i, w := range t.ring {
		k, ok := liveIdx[i]
		for b := range 64 {
			pend, fin := w.pend>>b&1 != 0, w.fin>>b&1 != 0
			if !pend && !fin {
				continue
			}
			o := k*64 + int64(b)
			if !ok || o < t.commit || o >= t.hi {
				return fmt.Errorf("stray bit at ring word %d bit %d (pend=%v fin=%v)", i, b, pend, fin)
			}
			if pend && fin {
				return fmt.Errorf("offset %d both pending and finished", o)
			}
		}
	}
	inFlight, finished, runs := 0, 0, 0
	for o := t.commit; o < t.hi; o++ {
		w := t.word(o)
		b := uint64(o) & 63
		if w.pend>>b&1 != 0 && o < t.next {
			inFlight++
		}
		if w.fin>>b&1 != 0 {
			finished++
		}
		if o > t.commit && t.doneAt(o) && !t.doneAt(o-1) {
			runs++
		}
	}
	if inFlight != t.inFlight || finished != t.finished || runs != t.runs {
		return fmt.Errorf("counters inFlight=%d/%d finished=%d/%d runs=%d/%d (kept/recomputed)",
			t.inFlight, inFlight, t.finished, finished, t.runs, runs)
	}
	return nil
}

// checkMetadata verifies Metadata against AppendFinished and the codec, the
// exact size against the O(1) bound, and returns the metadata size.
func (t *Tracker) checkMetadata() (int, error) {
	fin := t.AppendFinished(nil)
	md := t.Metadata()
	if md != Encode(t.commit, fin) {
		return 0, fmt.Errorf("Metadata %q != Encode(AppendFinished) %q", md, Encode(t.commit, fin))
	}
	if got := t.MetadataSize(); got != len(md) {
		return 0, fmt.Errorf("MetadataSize %d != len(Metadata) %d", got, len(md))
	}
	if b := t.MetadataBound(); len(md) > b {
		return 0, fmt.Errorf("metadata %d bytes above its bound %d", len(md), b)
	}
	dec, err := Decode(t.commit, md)
	if err != nil {
		return 0, fmt.Errorf("Decode(Metadata): %v", err)
	}
	if !slices.Equal(dec, fin) && !(len(dec) == 0 && len(fin) == 0) {
		return 0, fmt.Errorf("Decode(Metadata) = %v, want %v", dec, fin)
	}
	return len(md), nil
}

// Record states in the reference model.
const (
	stFlight = 1 + iota
	stDone
	stSeeded
)

// model is the trivially correct reference: a map of offset states.
type model struct {
	c0   int64 // seed committed offset
	next int64 // Deliver accepts ≥ next
	top  int64 // one past the highest seeded offset (or c0)
	st   map[int64]byte
	lo   int64 // committable never decreases: search from here
}

func newModel(c0 int64, seeded []int64) *model {
	m := &model{c0: c0, next: c0, top: c0, st: map[int64]byte{}, lo: c0}
	for _, o := range seeded {
		m.st[o] = stSeeded
		m.top = o + 1
	}
	return m
}

// known reports whether offset o is known finished.
func (m *model) known(o int64) bool {
	if o < m.c0 {
		return true
	}
	switch m.st[o] {
	case stDone, stSeeded:
		return true
	case stFlight:
		return false
	}
	return o < m.next // a gap
}

func (m *model) committable() int64 {
	o := m.lo
	for m.known(o) {
		o++
	}
	m.lo = o
	return o
}

func (m *model) inFlight() int {
	n := 0
	for _, s := range m.st {
		if s == stFlight {
			n++
		}
	}
	return n
}

func (m *model) finishedAbove() int {
	c, n := m.committable(), 0
	for o, s := range m.st {
		if o > c && (s == stDone || s == stSeeded) {
			n++
		}
	}
	return n
}

// finishedSet returns the known-finished offsets above committable.
func (m *model) finishedSet() []int64 {
	var out []int64
	c := m.committable()
	if c == math.MaxInt64 {
		return nil
	}
	for o := c + 1; o < max(m.next, m.top); o++ {
		if m.known(o) {
			out = append(out, o)
		}
	}
	return out
}

func (m *model) deliver(o int64) error {
	if o < m.next || o == math.MaxInt64 {
		return ErrOrder
	}
	if m.st[o] == stSeeded {
		return ErrSkipped
	}
	if m.inFlight() > 0 && o-m.committable() > MaxSpan {
		return ErrWindowFull
	}
	m.st[o] = stFlight
	m.next = o + 1
	return nil
}

func (m *model) advance(n int64) error {
	if n <= m.next {
		return nil
	}
	if m.inFlight() > 0 && n-1-m.committable() > MaxSpan {
		return ErrWindowFull
	}
	m.next = n
	return nil
}

func (m *model) finish(o int64) error {
	if m.st[o] != stFlight {
		return ErrNotInFlight
	}
	m.st[o] = stDone
	return nil
}

func (m *model) skip(o int64) bool { return o >= m.next && m.st[o] == stSeeded }

// compare checks every observable of t against m.
func compare(t *Tracker, m *model) error {
	if err := t.check(); err != nil {
		return err
	}
	if got, want := t.Committable(), m.committable(); got != want {
		return fmt.Errorf("Committable = %d, model %d", got, want)
	}
	if got, want := t.Next(), m.next; got != want {
		return fmt.Errorf("Next = %d, model %d", got, want)
	}
	if got, want := t.InFlight(), m.inFlight(); got != want {
		return fmt.Errorf("InFlight = %d, model %d", got, want)
	}
	if got, want := t.FinishedAbove(), m.finishedAbove(); got != want {
		return fmt.Errorf("FinishedAbove = %d, model %d", got, want)
	}
	o, ok := t.Oldest()
	if ok != (m.inFlight() > 0) || (ok && o != m.committable()) || (ok && m.st[o] != stFlight) {
		return fmt.Errorf("Oldest = %d, %v; model committable %d, in flight %d", o, ok, m.committable(), m.inFlight())
	}
	if got, want := t.AppendFinished(nil), m.finishedSet(); !slices.Equal(got, want) {
		return fmt.Errorf("AppendFinished = %v, model %v", got, want)
	}
	// Committable never passes an unfinished delivered record.
	for off, s := range m.st {
		if s == stFlight && off < t.Committable() {
			return fmt.Errorf("Committable %d passes unfinished %d", t.Committable(), off)
		}
	}
	for k := int64(-2); k < max(m.next, m.top)-m.next+2; k++ {
		off := m.next + k
		if (k > 0 && off < m.next) || (k < 0 && off > m.next) {
			continue // wrapped around
		}
		if t.Skip(off) != m.skip(off) {
			return fmt.Errorf("Skip(%d) = %v, model %v", off, t.Skip(off), m.skip(off))
		}
	}
	_, err := t.checkMetadata()
	return err
}

// sameErr reports whether two operation results agree.
func sameErr(a, b error) bool { return errors.Is(a, b) && errors.Is(b, a) }
