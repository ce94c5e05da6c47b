// Package sink is the contract between the consumer engine and a record
// processor that takes records off the engine and finishes them in its own
// time (riffle/process). The engine stays the owner of fetching, group
// membership and commits; the sink owns dispatch and says, per partition,
// which offset (and commit metadata) a commit may cover.
//
// It is generic in the record type so that it needs nothing from the root
// package (which imports it).
package sink

import "context"

// Part names a partition.
type Part struct {
	Topic     string
	Partition int32
}

// Batch is records of one partition handed to the sink in offset order.
type Batch[R any] struct {
	// Gen is the engine's dispatch generation of the partition. It changes
	// when the partition is reset to another offset or reassigned; a new
	// Gen starts the partition afresh at Start.
	Gen uint64
	// Start is where this generation began: the committed offset for a
	// group assignment, else the resolved start offset.
	Start int64
	// Meta is the commit metadata stored with Start ("" when none or when
	// Start is not a committed offset).
	Meta string
	// Recs are the records, in offset order, all at or above Start.
	Recs []R
	// Next, when non-negative, is the offset after the last record fetched
	// so far and Recs hold everything fetched: the offsets in between are
	// gaps (control records, compaction) once Recs are accepted.
	Next int64
	// Wake makes the engine offer the partition's records again. A sink
	// that accepted fewer records than offered must call it once it has
	// room, from outside any of its own locks.
	Wake func()
}

// Pos is what a commit of a partition may cover.
type Pos struct {
	Offset int64
	Meta   string
}

// Sink receives records from the engine.
type Sink[R any] interface {
	// Offer hands b over and returns how many records (a prefix of
	// b.Recs) the sink accepted; it never blocks. The engine keeps the
	// rest and offers them again after b.Wake.
	Offer(p Part, b Batch[R]) int
	// Stop ends the partitions. Unless lost, dispatch stops and records
	// already running are waited for until ctx ends; the positions a
	// commit may cover are returned (partitions that never started are
	// absent) with an error naming what was still running at the deadline.
	// When lost, running records' contexts are cancelled and nothing is
	// returned: another member may own the partitions already.
	Stop(ctx context.Context, parts []Part, lost bool) (map[Part]Pos, error)
	// Positions returns the commit positions of the partitions now.
	Positions(parts []Part) map[Part]Pos
	// Offsets is Positions without the metadata (cheap, for stats).
	Offsets(parts []Part) map[Part]int64
}
