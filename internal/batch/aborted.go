package batch

import (
	"cmp"
	"slices"
)

// AbortedTxn is an entry of a fetch response partition's AbortedTransactions:
// the producer whose transaction was aborted and the first offset of that
// transaction within the fetched range.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
}

// AbortFilter decides, for a read_committed consumer, which batches of one
// partition's fetch response must not be delivered. It implements the Java
// consumer's algorithm:
//
//   - Aborted transactions are considered in FirstOffset order; once a batch
//     reaches (its LastOffset is at or past) a transaction's FirstOffset, the
//     transaction's producer is marked aborted.
//   - A transactional data batch of a producer marked aborted is dropped.
//   - An abort marker (control batch with ControlAbort) of a producer ends
//     its aborted transaction: the producer is unmarked, so its next
//     transaction is delivered unless it is in the list too.
//   - Control batches are always dropped: they carry no user records.
//
// Batches must be passed to Drop in log order, every one of them (including
// batches the consumer skips for other reasons), because the markers they
// contain change the filter's state. The zero value filters nothing but
// control batches. The filter is pure: it does no I/O and never decodes
// records.
type AbortFilter struct {
	txns   []AbortedTxn // sorted by FirstOffset
	next   int          // txns[next:] have not been reached yet
	active []int64      // producers in an aborted transaction
}

// NewAbortFilter returns a filter for the given aborted transactions, which
// need not be sorted (brokers send them sorted, but nothing requires it).
func NewAbortFilter(aborted []AbortedTxn) *AbortFilter {
	f := new(AbortFilter)
	f.Reset(aborted)
	return f
}

// Reset reinitialises the filter for another fetch response, reusing its
// memory. The aborted slice is copied.
func (f *AbortFilter) Reset(aborted []AbortedTxn) {
	f.txns = append(f.txns[:0], aborted...)
	if !slices.IsSortedFunc(f.txns, cmpFirstOffset) {
		slices.SortStableFunc(f.txns, cmpFirstOffset)
	}
	f.next = 0
	f.active = f.active[:0]
}

func cmpFirstOffset(a, b AbortedTxn) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) }

// Drop reports whether b's records must not be delivered to a read_committed
// consumer: b is a control batch, or a transactional batch of an aborted
// transaction. It uses b's ProducerID, LastOffset, Transactional, Control and
// ControlType fields.
func (f *AbortFilter) Drop(b *Batch) bool {
	if b.ProducerID >= 0 {
		// Every aborted transaction starting at or before this batch's
		// end has begun by now.
		for f.next < len(f.txns) && f.txns[f.next].FirstOffset <= b.LastOffset {
			f.activate(f.txns[f.next].ProducerID)
			f.next++
		}
		if b.Control && b.ControlType == ControlAbort {
			f.deactivate(b.ProducerID)
		} else if b.Transactional && f.isActive(b.ProducerID) {
			return true
		}
	}
	return b.Control
}

// Aborting reports whether producerID is currently inside an aborted
// transaction, as of the batches passed to Drop so far.
func (f *AbortFilter) Aborting(producerID int64) bool { return f.isActive(producerID) }

// The active set is a slice: it holds the producers whose aborted
// transactions overlap the current position, which is a handful at most, so
// a linear scan beats a map and never allocates once warm.

func (f *AbortFilter) isActive(id int64) bool { return slices.Contains(f.active, id) }

func (f *AbortFilter) activate(id int64) {
	if !f.isActive(id) {
		f.active = append(f.active, id)
	}
}

func (f *AbortFilter) deactivate(id int64) {
	if i := slices.Index(f.active, id); i >= 0 {
		f.active[i] = f.active[len(f.active)-1]
		f.active = f.active[:len(f.active)-1]
	}
}
