// Package batch encodes and decodes Kafka record batches.
//
// It is the pure, allocation-conscious core that the producer and the
// consumer share: it performs no I/O and starts no goroutines, so every cost
// it has (copying, compression, CRC computation) is paid on the goroutine of
// the caller, where it can be measured and bounded.
//
// # Encoding
//
// A [Builder] appends records for a single partition directly into their wire
// form (record batch v2, the only format the producer writes). Add refuses a
// record once the batch would exceed its byte limit, so the caller can start a
// new batch; [EncodedSize] and [CheckSize] let the caller reject a record that
// could not fit even in an empty batch. [Builder.Finish] compresses the
// records (if a [Codec] is given), fills in the 61-byte batch header and
// computes the CRC, returning an [Encoded] batch.
//
// Producer id, epoch and base sequence are not known when a batch is built:
// the producer pins them only when a batch first goes into a produce request.
// [Encoded.SetProducer] patches them into the finished bytes. Because the
// batch CRC covers those fields but compression does not, only the CRC is
// recomputed, and even that avoids re-reading the records: the CRC of the
// records is remembered and combined with the CRC of the 40 header bytes.
//
// Batch buffers come from size-classed pools; once the broker has
// acknowledged a batch, [Encoded.Release] returns its memory so that steady
// state production allocates next to nothing.
//
// # Decoding
//
// An [Iterator] walks the record set of a fetch response partition, which may
// hold v2 record batches as well as legacy (magic 0 and 1) message sets,
// including compressed wrapper messages. A trailing partial batch, which
// brokers routinely send when a fetch hits its byte limit, ends iteration
// silently. Each [Batch] exposes its header; [Batch.AppendRecords]
// decompresses (bounded by [DecodeOptions.MaxDecompressedSize]) and decodes
// its records. Keeping record decoding separate lets a consumer skip batches
// it will drop (aborted transactions, control batches, offsets it already
// has) without paying for decompression.
//
// Errors are confined to the batch that caused them and are of type
// *[BatchError], matching [ErrCorrupt], [ErrTooLarge] or [ErrUnsupported]
// with errors.Is. Decoding never panics, and what it allocates is bounded by
// the input size and the configured decompression limit (see
// [DecodeOptions.MaxDecompressedSize]), never by sizes the input claims.
//
// Decoded records are zero-copy: Key, Value, header values and even header
// keys (strings) alias the input buffer, or the freshly allocated
// decompression buffer for compressed batches. The input must therefore not
// be modified or reused while decoded records are in use. Slices are capped
// (three-index slicing) so appending to a Key or Value never overwrites a
// neighbouring record.
//
// # Transactions
//
// Control batches carry commit and abort markers; the ControlType field of a
// [Batch] is decoded eagerly for them, and [ParseControlKey] and
// [ParseEndTxnMarker] decode control records. [AbortFilter] implements the standard
// read_committed algorithm that decides, from the fetch response's aborted
// transaction list and the batches in order, which data batches belong to
// aborted transactions.
package batch
