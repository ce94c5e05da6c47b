package track

// DefaultMetadataLimit is the broker's default offset.metadata.max.bytes: a
// commit whose metadata is longer fails with OFFSET_METADATA_TOO_LARGE.
const DefaultMetadataLimit = 4096

// bound returns an upper bound on the encoded size of any finished set
// within span positions above the committed offset that has at most runs
// finished runs (span ≤ MaxSpan, as the window guarantees).
//
// The bitset is at most ceil(span/8) bytes. The run-length body has n = 2r
// uvarints (r = runs, at most ceil(span/2)) whose values sum to at most
// span. A uvarint takes 1 byte, plus 1 if its value is ≥ 2^7, plus 1 if ≥
// 2^14, and so on; at most span>>7k of the values can be ≥ 2^7k, so the body
// is at most n + Σ_k min(n, span>>7k) bytes. Every term grows with runs and
// span, so the bound is monotone: it never grows when a record finishes
// (runs+in-flight and the window only shrink then).
func bound(span int64, runs int) int {
	if span <= 0 || runs <= 0 {
		return 0
	}
	n := 2 * min(int64(runs), (span+1)/2)
	runsMax := n
	for v := span >> 7; v > 0; v >>= 7 {
		runsMax += min(n, v)
	}
	bitsMax := (span + 7) / 8
	return encodedLen(int(min(runsMax, bitsMax)))
}

// MetadataBound returns, in O(1), an upper bound on MetadataSize() that
// holds now and after any of the records in flight finish, in any order,
// as long as nothing more is delivered or advanced past: it counts every
// in-flight record as a possible new finished run. It never increases on
// Finish, only on Deliver and Advance.
func (t *Tracker) MetadataBound() int {
	return bound(t.hi-1-t.commit, t.runs+t.inFlight)
}

// CanDeliver reports, in O(1), whether Deliver(offset) keeps MetadataBound
// within limit (counting the gap below offset, if any, as a new finished
// run), so that the metadata stays within limit whatever order the records
// in flight then finish in. It is always true when nothing is in
// flight: the delivered record then becomes Committable, and neither
// delivering nor finishing it can grow the encoding. It is false when
// Deliver would fail with ErrWindowFull; it does not check the other
// preconditions of Deliver.
//
// The rule for a processor with a metadata limit (DefaultMetadataLimit
// unless the broker is configured otherwise): take the next record from the
// fetcher only when CanDeliver(record offset, limit) is true; otherwise stop
// taking records and retry after the next Finish. Records already delivered
// may be dispatched in any order (per key, unordered). Then MetadataSize()
// never exceeds the limit (given a seed that fit it), and the partition
// cannot stall: the oldest in-flight record is always dispatchable, finishing
// it only shrinks the encoding, and once nothing is in flight CanDeliver is
// true again.
func (t *Tracker) CanDeliver(offset int64, limit int) bool {
	if t.inFlight == 0 {
		return true
	}
	if offset-t.commit > MaxSpan {
		return false
	}
	runs := t.runs + t.inFlight + 1
	if offset > t.next {
		runs++ // the gap below offset may be a new finished run
	}
	return bound(max(t.hi, offset+1)-1-t.commit, runs) <= limit
}

// CanAdvance is CanDeliver for Advance(next): whether the trailing gap it
// adds keeps MetadataBound within limit. When it is false, skip the Advance;
// the gap is picked up by the next Deliver (which CanDeliver gates).
func (t *Tracker) CanAdvance(next int64, limit int) bool {
	if next <= t.next || t.inFlight == 0 {
		return true
	}
	if next-1-t.commit > MaxSpan {
		return false
	}
	return bound(max(t.hi, next)-1-t.commit, t.runs+t.inFlight+1) <= limit
}
