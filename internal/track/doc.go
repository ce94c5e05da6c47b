// Package track is the functional core of parallel processing with safe
// commits: it follows the records of one partition that are processed
// concurrently (per key or unordered), says which offset may be committed,
// and encodes the records finished above that offset into the commit
// metadata, so that a restart skips them. It is pure: no I/O, no goroutines,
// no clock; the processor owns one Tracker per assigned partition and calls
// it from one goroutine.
//
// # Why
//
// Committing offset N says every record below N is done. Committing the
// highest finished offset skips unfinished lower records after a crash, so
// the committable offset is the first unfinished one. Records finished above
// it would be processed again after a restart; storing them in the commit
// metadata (as Confluent's parallel-consumer does) avoids that.
//
// # Tracker
//
// Per partition, in delivery order:
//
//   - Seed(committed, finished) on assignment, with the committed offset and
//     Decode of its metadata (nil if Decode fails: never trust metadata that
//     does not decode; doing the work again is safe, skipping it is not).
//   - For each fetched record: if Skip(offset), drop it — it finished before
//     the restart. Otherwise, when CanDeliver(offset, limit), Deliver(offset)
//     and hand it out; when not, stop taking records until a Finish.
//   - Finish(offset) when its processing ends, in any order.
//   - Advance(next) after a fetched batch whose last offsets were not
//     delivered (compaction, control records), optionally gated by
//     CanAdvance.
//   - Commit Committable() with Metadata(), from one committer per partition
//     so commits go out in order.
//
// Offsets are delivered strictly increasing. An offset passed without being
// delivered is a gap and counts as finished: offsets removed by compaction,
// control records, records Skip reported. Committable is the first delivered
// record not finished, else the offset after everything delivered or
// advanced past (and past seeded finished offsets that follow); it never
// decreases and never passes an unfinished record. Finishing an offset that
// is not in flight is an error that changes nothing.
//
// State is two bitsets over the window [Committable, highest offset
// delivered, advanced past or seeded] in a ring of 64-bit words that slides
// with Committable: O(1) amortized per operation and memory proportional to
// the window (at most MaxSpan+1 offsets; ErrWindowFull past it), never to the
// number of records processed.
//
// # Metadata format
//
// Metadata is the set of offsets above the committed offset known finished
// (finished records, gaps, seeded offsets: gaps merge runs and cost
// nothing). The string is one version character, '1', followed by
// base64.RawURLEncoding (URL alphabet, no padding, strict) of
//
//	kind (1 byte) | CRC-32C (4 bytes, little-endian) | body
//
// with, per call, the smaller body of:
//
//   - kind 'r', run lengths: uvarints u0, f0−1, u1−1, f1−1, …, where counting
//     from committed+1 the offsets alternate between u unfinished and f
//     finished ones, ending with a finished run. A record stuck at the
//     committed offset while 100,000 later ones finish is two uvarints (4
//     bytes; 13 characters in all).
//   - kind 'b', bitset: bit i (LSB first) = offset committed+1+i finished,
//     last byte non-zero. The committed offset itself is never in the set
//     (it is unfinished by definition), so bit 0 is committed+1.
//
// The checksum covers the committed offset (8 bytes, big-endian), kind and
// body, so metadata is only accepted with the offset it was written for,
// and foreign metadata that happens to start with '1' is rejected. No
// finished offsets encode as "". Decode accepts only canonical encodings
// (minimal varints, non-zero last bitset byte, no trailing data), never
// panics, and bounds its work and output by MaxSpan. An unknown first
// character is ErrUnknownVersion; anything else malformed is ErrCorrupt.
//
// # Metadata size limit
//
// The broker rejects metadata above offset.metadata.max.bytes
// (DefaultMetadataLimit, 4096). Checking the exact size per record would
// re-encode the window, so the Tracker keeps, in O(1), the number of
// finished runs and of records in flight, and MetadataBound derives from
// them and the window length an upper bound that holds whatever order the
// in-flight records finish in: each can add at most one run; a uvarint is
// 1 byte plus one per 7 bits, and the run lengths sum to at most the window;
// the bitset is at most window/8 bytes. The bound is monotone, so Finish
// never raises it. CanDeliver(offset, limit) says whether delivering one
// more record (and the gap below it) keeps that bound within the limit, and
// is always true when nothing is in flight, since a record delivered then
// becomes Committable and neither it nor its gap can grow the encoding. The
// rule for the processor:
//
//	deliver a record only if CanDeliver(offset, limit); otherwise wait for a
//	Finish and ask again.
//
// Near the limit the partition thus only finishes what it has — the oldest
// record is always dispatchable (in per-key mode it heads its key's queue)
// and finishing it shrinks the encoding — until delivering is safe again,
// degrading to one record at a time at worst. MetadataSize, the exact
// length, costs O(window/64 + runs) and is cached until the next change.
package track
